// AVX-512F kernels for amd64. The Go declarations, and the conditions under
// which these functions are called, are in kernel_amd64.go. Besides AVX
// and FMA, they need AVX512F only: no AVX512DQ, BW or VL instruction is
// used (zeroing uses VPXORD, not the DQ-only EVEX VXORPS; masks are 16-bit,
// KMOVW; the X and Y instructions at the end of the reductions are the
// VEX-encoded AVX ones, and VEXTRACTF64X4 is AVX512F).
//
// Go operand order is the reverse of Intel's, with the mask just before
// the destination: "VMAXPS Z0, Z4, K1, Z0" is Intel
// "vmaxps zmm0{k1}, zmm4, zmm0". The .Z suffix selects zero-masking, .BCST
// an embedded {1to16} broadcast of a 4-byte memory operand.
//
// Every function ends with VZEROUPPER, which cleans the upper halves of
// Z0-Z15; the MatMul kernels, the only ones that use Z16-Z31 (which
// VZEROUPPER does not touch), also zero those they used, so that no dirty
// 512-bit state outlives a call.

#include "textflag.h"

// HMAX4 leaves in X0 the largest lane of the accumulators Z0-Z3, in the
// same fixed order for Max and MaxRows, so both give the same bits (X1, Y1
// scratch).
#define HMAX4 \
	VMAXPS        Z1, Z0, Z0; \
	VMAXPS        Z3, Z2, Z2; \
	VMAXPS        Z2, Z0, Z0; \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VMAXPS        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VMAXPS        X1, X0, X0; \
	VMOVHLPS      X0, X0, X1; \
	VMAXPS        X1, X0, X0; \
	VMOVSHDUP     X0, X1; \
	VMAXSS        X1, X0, X0

// ---------------------------------------------------------------------------
// MatMul micro-kernels.
//
// Register use in gemmZ32 and gemmZ16:
//   SI  A cursor, row 0 of the panel     R8  lda in bytes
//   R10 A cursor, row 3 (SI + 3·lda)     R13 A cursor, row 6 (SI + 6·lda)
//   DI  B cursor                         R9  ldb in bytes
//   CX  k                                BX  row count, then k/2 counter
//   R11 C row 0                          AX  C row 3 (R11 + 3·ldc)
//   DX  C row 6 (R11 + 6·ldc)            R12 ldc in bytes
//   Z16, Z17  B row: columns 0-15 and 16-31 (gemmZ32), even and odd k
//             (gemmZ16)
//   Z18 broadcast A element (gemmZ32)    K1  column mask (gemmZ16)
//
// gemmZ32 computes an mr×32 block, mr ≤ 8: row r accumulates in Z(2r)
// (columns 0-15) and Z(2r+1) (columns 16-31). Per k step it loads two
// vectors of a B row and, for each row, broadcasts one A element into Z18
// and issues two FMAs: 16 FMAs against 10 loads for a full panel. With 4
// rows or fewer there are at most 8 independent FMA chains, too few to
// cover the FMA latency on two FMA ports, so odd k steps go to a second
// set of accumulators, Z(8+2r) and Z(9+2r), added to the first at the end.
//
// gemmZ16 computes an mr×nr block, mr ≤ 8, nr ≤ 16, under the lane mask K1
// (B and C are loaded with zero-masking and stored with masking, so lanes
// at and beyond nr are neither read nor written and cannot fault). Row r
// accumulates in Z(r) for even k and Z(8+r) for odd k; each FMA takes its
// A element as an embedded broadcast memory operand.
//
// The k loop is unrolled twice: E step at A offset 0 and B row (DI), O step
// at A offset 4 and B row (DI)(R9*1).
// ---------------------------------------------------------------------------

#define ZZ(r) VPXORD r, r, r
#define NOCOMB

// 32 wide: one A element against both halves of the B row.
#define FZ32(A, c0, c1) VBROADCASTSS A, Z18; VFMADD231PS Z16, Z18, c0; VFMADD231PS Z17, Z18, c1

// 32 wide: B row loads.
#define B32E VMOVUPS (DI), Z16; VMOVUPS 64(DI), Z17
#define B32O VMOVUPS (DI)(R9*1), Z16; VMOVUPS 64(DI)(R9*1), Z17

// 32 wide: even-k steps (all k steps for 5 to 8 rows).
#define E32_1(o) FZ32(o(SI), Z0, Z1)
#define E32_2(o) E32_1(o); FZ32(o(SI)(R8*1), Z2, Z3)
#define E32_3(o) E32_2(o); FZ32(o(SI)(R8*2), Z4, Z5)
#define E32_4(o) E32_3(o); FZ32(o(R10), Z6, Z7)
#define E32_5(o) E32_4(o); FZ32(o(R10)(R8*1), Z8, Z9)
#define E32_6(o) E32_5(o); FZ32(o(R10)(R8*2), Z10, Z11)
#define E32_7(o) E32_6(o); FZ32(o(R13), Z12, Z13)
#define E32_8(o) E32_7(o); FZ32(o(R13)(R8*1), Z14, Z15)

// 32 wide: odd-k steps for 1 to 4 rows (accumulators Z8-Z15).
#define O32_1(o) FZ32(o(SI), Z8, Z9)
#define O32_2(o) O32_1(o); FZ32(o(SI)(R8*1), Z10, Z11)
#define O32_3(o) O32_2(o); FZ32(o(SI)(R8*2), Z12, Z13)
#define O32_4(o) O32_3(o); FZ32(o(R10), Z14, Z15)

// 32 wide: fold the odd accumulators into the even ones.
#define M32_1 VADDPS Z8, Z0, Z0; VADDPS Z9, Z1, Z1
#define M32_2 M32_1; VADDPS Z10, Z2, Z2; VADDPS Z11, Z3, Z3
#define M32_3 M32_2; VADDPS Z12, Z4, Z4; VADDPS Z13, Z5, Z5
#define M32_4 M32_3; VADDPS Z14, Z6, Z6; VADDPS Z15, Z7, Z7

// 32 wide: zero the accumulators of 1 to 8 rows (Z32_n), the odd set of 1
// to 4 rows (ZO32_n), or both (ZS32_n).
#define Z32_1 ZZ(Z0); ZZ(Z1)
#define Z32_2 Z32_1; ZZ(Z2); ZZ(Z3)
#define Z32_3 Z32_2; ZZ(Z4); ZZ(Z5)
#define Z32_4 Z32_3; ZZ(Z6); ZZ(Z7)
#define Z32_5 Z32_4; ZZ(Z8); ZZ(Z9)
#define Z32_6 Z32_5; ZZ(Z10); ZZ(Z11)
#define Z32_7 Z32_6; ZZ(Z12); ZZ(Z13)
#define Z32_8 Z32_7; ZZ(Z14); ZZ(Z15)
#define ZO32_1 ZZ(Z8); ZZ(Z9)
#define ZO32_2 ZO32_1; ZZ(Z10); ZZ(Z11)
#define ZO32_3 ZO32_2; ZZ(Z12); ZZ(Z13)
#define ZO32_4 ZO32_3; ZZ(Z14); ZZ(Z15)
#define ZS32_1 Z32_1; ZO32_1
#define ZS32_2 Z32_2; ZO32_2
#define ZS32_3 Z32_3; ZO32_3
#define ZS32_4 Z32_4; ZO32_4

// 32 wide: load C into the (even) accumulators; for 1 to 4 rows also zero
// the odd set (LS32_n).
#define LC32_1 VMOVUPS (R11), Z0; VMOVUPS 64(R11), Z1
#define LC32_2 LC32_1; VMOVUPS (R11)(R12*1), Z2; VMOVUPS 64(R11)(R12*1), Z3
#define LC32_3 LC32_2; VMOVUPS (R11)(R12*2), Z4; VMOVUPS 64(R11)(R12*2), Z5
#define LC32_4 LC32_3; VMOVUPS (AX), Z6; VMOVUPS 64(AX), Z7
#define LC32_5 LC32_4; VMOVUPS (AX)(R12*1), Z8; VMOVUPS 64(AX)(R12*1), Z9
#define LC32_6 LC32_5; VMOVUPS (AX)(R12*2), Z10; VMOVUPS 64(AX)(R12*2), Z11
#define LC32_7 LC32_6; VMOVUPS (DX), Z12; VMOVUPS 64(DX), Z13
#define LC32_8 LC32_7; VMOVUPS (DX)(R12*1), Z14; VMOVUPS 64(DX)(R12*1), Z15
#define LS32_1 LC32_1; ZO32_1
#define LS32_2 LC32_2; ZO32_2
#define LS32_3 LC32_3; ZO32_3
#define LS32_4 LC32_4; ZO32_4

// 32 wide: store.
#define S32_1 VMOVUPS Z0, (R11); VMOVUPS Z1, 64(R11)
#define S32_2 S32_1; VMOVUPS Z2, (R11)(R12*1); VMOVUPS Z3, 64(R11)(R12*1)
#define S32_3 S32_2; VMOVUPS Z4, (R11)(R12*2); VMOVUPS Z5, 64(R11)(R12*2)
#define S32_4 S32_3; VMOVUPS Z6, (AX); VMOVUPS Z7, 64(AX)
#define S32_5 S32_4; VMOVUPS Z8, (AX)(R12*1); VMOVUPS Z9, 64(AX)(R12*1)
#define S32_6 S32_5; VMOVUPS Z10, (AX)(R12*2); VMOVUPS Z11, 64(AX)(R12*2)
#define S32_7 S32_6; VMOVUPS Z12, (DX); VMOVUPS Z13, 64(DX)
#define S32_8 S32_7; VMOVUPS Z14, (DX)(R12*1); VMOVUPS Z15, 64(DX)(R12*1)

// 16 wide, masked: B row loads (even k into Z16, odd k into Z17).
#define B16E VMOVUPS.Z (DI), K1, Z16
#define B16O VMOVUPS.Z (DI)(R9*1), K1, Z17

// 16 wide: even-k and odd-k steps, with embedded-broadcast A operands.
#define E16_1(o) VFMADD231PS.BCST o(SI), Z16, Z0
#define E16_2(o) E16_1(o); VFMADD231PS.BCST o(SI)(R8*1), Z16, Z1
#define E16_3(o) E16_2(o); VFMADD231PS.BCST o(SI)(R8*2), Z16, Z2
#define E16_4(o) E16_3(o); VFMADD231PS.BCST o(R10), Z16, Z3
#define E16_5(o) E16_4(o); VFMADD231PS.BCST o(R10)(R8*1), Z16, Z4
#define E16_6(o) E16_5(o); VFMADD231PS.BCST o(R10)(R8*2), Z16, Z5
#define E16_7(o) E16_6(o); VFMADD231PS.BCST o(R13), Z16, Z6
#define E16_8(o) E16_7(o); VFMADD231PS.BCST o(R13)(R8*1), Z16, Z7
#define O16_1(o) VFMADD231PS.BCST o(SI), Z17, Z8
#define O16_2(o) O16_1(o); VFMADD231PS.BCST o(SI)(R8*1), Z17, Z9
#define O16_3(o) O16_2(o); VFMADD231PS.BCST o(SI)(R8*2), Z17, Z10
#define O16_4(o) O16_3(o); VFMADD231PS.BCST o(R10), Z17, Z11
#define O16_5(o) O16_4(o); VFMADD231PS.BCST o(R10)(R8*1), Z17, Z12
#define O16_6(o) O16_5(o); VFMADD231PS.BCST o(R10)(R8*2), Z17, Z13
#define O16_7(o) O16_6(o); VFMADD231PS.BCST o(R13), Z17, Z14
#define O16_8(o) O16_7(o); VFMADD231PS.BCST o(R13)(R8*1), Z17, Z15

// 16 wide: fold, zero the odd set, zero both sets.
#define M16_1 VADDPS Z8, Z0, Z0
#define M16_2 M16_1; VADDPS Z9, Z1, Z1
#define M16_3 M16_2; VADDPS Z10, Z2, Z2
#define M16_4 M16_3; VADDPS Z11, Z3, Z3
#define M16_5 M16_4; VADDPS Z12, Z4, Z4
#define M16_6 M16_5; VADDPS Z13, Z5, Z5
#define M16_7 M16_6; VADDPS Z14, Z6, Z6
#define M16_8 M16_7; VADDPS Z15, Z7, Z7
#define ZO16_1 ZZ(Z8)
#define ZO16_2 ZO16_1; ZZ(Z9)
#define ZO16_3 ZO16_2; ZZ(Z10)
#define ZO16_4 ZO16_3; ZZ(Z11)
#define ZO16_5 ZO16_4; ZZ(Z12)
#define ZO16_6 ZO16_5; ZZ(Z13)
#define ZO16_7 ZO16_6; ZZ(Z14)
#define ZO16_8 ZO16_7; ZZ(Z15)
#define ZE16_1 ZZ(Z0)
#define ZE16_2 ZE16_1; ZZ(Z1)
#define ZE16_3 ZE16_2; ZZ(Z2)
#define ZE16_4 ZE16_3; ZZ(Z3)
#define ZE16_5 ZE16_4; ZZ(Z4)
#define ZE16_6 ZE16_5; ZZ(Z5)
#define ZE16_7 ZE16_6; ZZ(Z6)
#define ZE16_8 ZE16_7; ZZ(Z7)
#define Z16_1 ZE16_1; ZO16_1
#define Z16_2 ZE16_2; ZO16_2
#define Z16_3 ZE16_3; ZO16_3
#define Z16_4 ZE16_4; ZO16_4
#define Z16_5 ZE16_5; ZO16_5
#define Z16_6 ZE16_6; ZO16_6
#define Z16_7 ZE16_7; ZO16_7
#define Z16_8 ZE16_8; ZO16_8

// 16 wide: masked load of C (and zero the odd set), masked store.
#define LC16_1 VMOVUPS.Z (R11), K1, Z0
#define LC16_2 LC16_1; VMOVUPS.Z (R11)(R12*1), K1, Z1
#define LC16_3 LC16_2; VMOVUPS.Z (R11)(R12*2), K1, Z2
#define LC16_4 LC16_3; VMOVUPS.Z (AX), K1, Z3
#define LC16_5 LC16_4; VMOVUPS.Z (AX)(R12*1), K1, Z4
#define LC16_6 LC16_5; VMOVUPS.Z (AX)(R12*2), K1, Z5
#define LC16_7 LC16_6; VMOVUPS.Z (DX), K1, Z6
#define LC16_8 LC16_7; VMOVUPS.Z (DX)(R12*1), K1, Z7
#define L16_1 LC16_1; ZO16_1
#define L16_2 LC16_2; ZO16_2
#define L16_3 LC16_3; ZO16_3
#define L16_4 LC16_4; ZO16_4
#define L16_5 LC16_5; ZO16_5
#define L16_6 LC16_6; ZO16_6
#define L16_7 LC16_7; ZO16_7
#define L16_8 LC16_8; ZO16_8
#define S16_1 VMOVUPS Z0, K1, (R11)
#define S16_2 S16_1; VMOVUPS Z1, K1, (R11)(R12*1)
#define S16_3 S16_2; VMOVUPS Z2, K1, (R11)(R12*2)
#define S16_4 S16_3; VMOVUPS Z3, K1, (AX)
#define S16_5 S16_4; VMOVUPS Z4, K1, (AX)(R12*1)
#define S16_6 S16_5; VMOVUPS Z5, K1, (AX)(R12*2)
#define S16_7 S16_6; VMOVUPS Z6, K1, (DX)
#define S16_8 S16_7; VMOVUPS Z7, K1, (DX)(R12*1)

// ZBLOCK computes one panel: initialize the accumulators (ZERO, or LOADC
// when the byte flag ACC is set), run the k loop, fold, store, clean up,
// return. The remaining arguments are labels, unique within the function.
#define ZBLOCK(ACC, LOADC, ZERO, LDB0, LDB1, STEPE, STEPO, COMB, STORE, ld, kl, lp, tl, dn) \
	CMPB  ACC, $0; \
	JNE   ld; \
	ZERO; \
	JMP   kl; \
ld: \
	LOADC; \
kl: \
	MOVQ  CX, BX; \
	SHRQ  $1, BX; \
	JZ    tl; \
lp: \
	LDB0; \
	STEPE(0); \
	LDB1; \
	STEPO(4); \
	ADDQ  $8, SI; \
	ADDQ  $8, R10; \
	ADDQ  $8, R13; \
	LEAQ  (DI)(R9*2), DI; \
	DECQ  BX; \
	JNZ   lp; \
tl: \
	TESTQ $1, CX; \
	JZ    dn; \
	LDB0; \
	STEPE(0); \
dn: \
	COMB; \
	STORE; \
	ZZ(Z16); \
	ZZ(Z17); \
	ZZ(Z18); \
	VZEROUPPER; \
	RET

// ZPROLOGUE loads the arguments common to both kernels and leaves the row
// count in BX for the dispatch. Row pointers past the panel's last row are
// computed but never dereferenced.
#define ZPROLOGUE(mr, k, a, lda, b, ldb, c, ldc) \
	MOVQ k, CX; \
	MOVQ a, SI; \
	MOVQ lda, R8; \
	SHLQ $2, R8; \
	LEAQ (SI)(R8*2), R10; \
	ADDQ R8, R10; \
	LEAQ (R10)(R8*2), R13; \
	ADDQ R8, R13; \
	MOVQ b, DI; \
	MOVQ ldb, R9; \
	SHLQ $2, R9; \
	MOVQ c, R11; \
	MOVQ ldc, R12; \
	SHLQ $2, R12; \
	LEAQ (R11)(R12*2), AX; \
	ADDQ R12, AX; \
	LEAQ (AX)(R12*2), DX; \
	ADDQ R12, DX; \
	MOVQ mr, BX

#define ZDISPATCH \
	CMPQ BX, $8; \
	JEQ  r8; \
	CMPQ BX, $7; \
	JEQ  r7; \
	CMPQ BX, $6; \
	JEQ  r6; \
	CMPQ BX, $5; \
	JEQ  r5; \
	CMPQ BX, $4; \
	JEQ  r4; \
	CMPQ BX, $3; \
	JEQ  r3; \
	CMPQ BX, $2; \
	JEQ  r2; \
	JMP  r1

// func gemmZ32(mr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
TEXT ·gemmZ32(SB), NOSPLIT, $0-65
	ZPROLOGUE(mr+0(FP), k+8(FP), a+16(FP), lda+24(FP), b+32(FP), ldb+40(FP), c+48(FP), ldc+56(FP))
	ZDISPATCH

r8:
	ZBLOCK(acc+64(FP), LC32_8, Z32_8, B32E, B32O, E32_8, E32_8, NOCOMB, S32_8, ld8, kl8, lp8, tl8, dn8)

r7:
	ZBLOCK(acc+64(FP), LC32_7, Z32_7, B32E, B32O, E32_7, E32_7, NOCOMB, S32_7, ld7, kl7, lp7, tl7, dn7)

r6:
	ZBLOCK(acc+64(FP), LC32_6, Z32_6, B32E, B32O, E32_6, E32_6, NOCOMB, S32_6, ld6, kl6, lp6, tl6, dn6)

r5:
	ZBLOCK(acc+64(FP), LC32_5, Z32_5, B32E, B32O, E32_5, E32_5, NOCOMB, S32_5, ld5, kl5, lp5, tl5, dn5)

r4:
	ZBLOCK(acc+64(FP), LS32_4, ZS32_4, B32E, B32O, E32_4, O32_4, M32_4, S32_4, ld4, kl4, lp4, tl4, dn4)

r3:
	ZBLOCK(acc+64(FP), LS32_3, ZS32_3, B32E, B32O, E32_3, O32_3, M32_3, S32_3, ld3, kl3, lp3, tl3, dn3)

r2:
	ZBLOCK(acc+64(FP), LS32_2, ZS32_2, B32E, B32O, E32_2, O32_2, M32_2, S32_2, ld2, kl2, lp2, tl2, dn2)

r1:
	ZBLOCK(acc+64(FP), LS32_1, ZS32_1, B32E, B32O, E32_1, O32_1, M32_1, S32_1, ld1, kl1, lp1, tl1, dn1)

// func gemmZ16(mr, nr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
TEXT ·gemmZ16(SB), NOSPLIT, $0-73
	// K1 = the low nr bits.
	MOVQ  nr+8(FP), CX
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	ZPROLOGUE(mr+0(FP), k+16(FP), a+24(FP), lda+32(FP), b+40(FP), ldb+48(FP), c+56(FP), ldc+64(FP))
	ZDISPATCH

r8:
	ZBLOCK(acc+72(FP), L16_8, Z16_8, B16E, B16O, E16_8, O16_8, M16_8, S16_8, ld8, kl8, lp8, tl8, dn8)

r7:
	ZBLOCK(acc+72(FP), L16_7, Z16_7, B16E, B16O, E16_7, O16_7, M16_7, S16_7, ld7, kl7, lp7, tl7, dn7)

r6:
	ZBLOCK(acc+72(FP), L16_6, Z16_6, B16E, B16O, E16_6, O16_6, M16_6, S16_6, ld6, kl6, lp6, tl6, dn6)

r5:
	ZBLOCK(acc+72(FP), L16_5, Z16_5, B16E, B16O, E16_5, O16_5, M16_5, S16_5, ld5, kl5, lp5, tl5, dn5)

r4:
	ZBLOCK(acc+72(FP), L16_4, Z16_4, B16E, B16O, E16_4, O16_4, M16_4, S16_4, ld4, kl4, lp4, tl4, dn4)

r3:
	ZBLOCK(acc+72(FP), L16_3, Z16_3, B16E, B16O, E16_3, O16_3, M16_3, S16_3, ld3, kl3, lp3, tl3, dn3)

r2:
	ZBLOCK(acc+72(FP), L16_2, Z16_2, B16E, B16O, E16_2, O16_2, M16_2, S16_2, ld2, kl2, lp2, tl2, dn2)

r1:
	ZBLOCK(acc+72(FP), L16_1, Z16_1, B16E, B16O, E16_1, O16_1, M16_1, S16_1, ld1, kl1, lp1, tl1, dn1)

// ---------------------------------------------------------------------------
// ExpShift, 16 lanes. The constants and the algorithm are those of
// expGeneric in generic.go and of expShiftY in kernel_amd64.s, operation for
// operation, so the results are bit-identical to the AVX2 code (keep the
// bit patterns in sync).
// ---------------------------------------------------------------------------

DATA expConstZ<>+0(SB)/4, $0x3f317200  // ln2 hi
DATA expConstZ<>+4(SB)/4, $0x35bfbe8e  // ln2 lo
DATA expConstZ<>+8(SB)/4, $0x42b20000  // expMax = 89
DATA expConstZ<>+12(SB)/4, $0xc2b00000 // expLow = -88
DATA expConstZ<>+16(SB)/4, $0x3afaaf3a // c6
DATA expConstZ<>+20(SB)/4, $0x3c00e9fc // c5
DATA expConstZ<>+24(SB)/4, $0x3d2b7037 // c4
DATA expConstZ<>+28(SB)/4, $0x3f800000 // 1.0, whose bits are also 127<<23
DATA expConstZ<>+32(SB)/4, $0x3fb8aa3b // log2(e)
DATA expConstZ<>+36(SB)/4, $0x3e2aa18d // c3
DATA expConstZ<>+40(SB)/4, $0x3f000026 // c2
DATA expConstZ<>+44(SB)/4, $0xff800000 // -Inf (for maxZ)
GLOBL expConstZ<>(SB), RODATA|NOPTR, $48

// EXP16(x, n, p) replaces x (src) by exp(x - shift), using n and p as
// scratch. Constant registers: Z15 shift, Z14 1.0 (= 127<<23), Z13 ln2 hi,
// Z12 ln2 lo, Z11 expMax, Z10 expLow, Z9 c6, Z8 c5, Z7 c4; log2 e, c3 and
// c2 are embedded-broadcast memory operands. See EXP8 in kernel_amd64.s for
// the algorithm; VRNDSCALEPS $9 is floor with the precision exception
// suppressed (exceptions are masked anyway).
#define EXP16(x, n, p) \
	VSUBPS           Z15, x, x; \
	VMINPS           x, Z11, x; \
	VMAXPS           x, Z10, x; \
	VMULPS.BCST      expConstZ<>+32(SB), x, n; \
	VRNDSCALEPS      $9, n, n; \
	VFNMADD231PS     Z13, n, x; \
	VFNMADD231PS     Z12, n, x; \
	VCVTPS2DQ        n, n; \
	VPSLLD           $23, n, n; \
	VPADDD           Z14, n, n; \
	VMOVAPS          Z9, p; \
	VFMADD213PS      Z8, x, p; \
	VFMADD213PS      Z7, x, p; \
	VFMADD213PS.BCST expConstZ<>+36(SB), x, p; \
	VFMADD213PS.BCST expConstZ<>+40(SB), x, p; \
	VFMADD213PS      Z14, x, p; \
	VFMADD213PS      Z14, x, p; \
	VMULPS           n, p, x

// TAILMASK sets K1 to the low CX bits (CX in 1..15); clobbers AX.
#define TAILMASK \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX; \
	KMOVW AX, K1

// HSUMZ leaves in X0 the sum of the 16 lanes of Z0; clobbers Y1.
#define HSUMZ \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPS        X1, X0, X0; \
	VMOVHLPS      X0, X0, X1; \
	VADDPS        X1, X0, X0; \
	VMOVSHDUP     X0, X1; \
	VADDSS        X1, X0, X0

// func expShiftZ(dst, src *float32, n int, shift float32) float32
TEXT ·expShiftZ(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS shift+24(FP), Z15
	VBROADCASTSS expConstZ<>+28(SB), Z14
	VBROADCASTSS expConstZ<>+0(SB), Z13
	VBROADCASTSS expConstZ<>+4(SB), Z12
	VBROADCASTSS expConstZ<>+8(SB), Z11
	VBROADCASTSS expConstZ<>+12(SB), Z10
	VBROADCASTSS expConstZ<>+16(SB), Z9
	VBROADCASTSS expConstZ<>+20(SB), Z8
	VBROADCASTSS expConstZ<>+24(SB), Z7
	ZZ(Z3) // running sum

	// 32 elements per iteration in two independent streams.
	MOVQ CX, BX
	SHRQ $5, BX
	JZ   exp16

exp32:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z4
	EXP16(Z0, Z1, Z2)
	EXP16(Z4, Z5, Z6)
	VMOVUPS Z0, (DI)
	VMOVUPS Z4, 64(DI)
	VADDPS  Z0, Z3, Z3
	VADDPS  Z4, Z3, Z3
	ADDQ    $128, SI
	ADDQ    $128, DI
	DECQ    BX
	JNZ     exp32

exp16:
	TESTQ $16, CX
	JZ    tail
	VMOVUPS (SI), Z0
	EXP16(Z0, Z1, Z2)
	VMOVUPS Z0, (DI)
	VADDPS  Z0, Z3, Z3
	ADDQ    $64, SI
	ADDQ    $64, DI

tail:
	// The last n mod 16 elements, under the lane mask K1. Masked-off lanes
	// are not read or written, and not added to the sum.
	ANDQ $15, CX
	JZ   done
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	EXP16(Z0, Z1, Z2)
	VMOVUPS   Z0, K1, (DI)
	VADDPS    Z0, Z3, K1, Z3

done:
	VMOVAPS Z3, Z0
	HSUMZ
	VMOVSS  X0, ret+32(FP)
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// BLAS-1 helpers, any n ≥ 1: 64 elements per iteration in four independent
// registers, then 16 at a time, then the last n mod 16 under a lane mask.
// ---------------------------------------------------------------------------

// func maxZ(x *float32, n int) float32
TEXT ·maxZ(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS expConstZ<>+44(SB), Z0
	VMOVAPS      Z0, Z1
	VMOVAPS      Z0, Z2
	VMOVAPS      Z0, Z3
	MOVQ         CX, BX
	SHRQ         $6, BX
	JZ           max16

	// VMAXPS returns its second (Intel) source, the accumulator, when
	// either operand is NaN, so NaN elements are skipped.
max64:
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	VMOVUPS 128(SI), Z6
	VMOVUPS 192(SI), Z7
	VMAXPS  Z0, Z4, Z0
	VMAXPS  Z1, Z5, Z1
	VMAXPS  Z2, Z6, Z2
	VMAXPS  Z3, Z7, Z3
	ADDQ    $256, SI
	DECQ    BX
	JNZ     max64

max16:
	MOVQ CX, BX
	ANDQ $63, BX
	SHRQ $4, BX
	JZ   maxtail

max16loop:
	VMOVUPS (SI), Z4
	VMAXPS  Z0, Z4, Z0
	ADDQ    $64, SI
	DECQ    BX
	JNZ     max16loop

maxtail:
	// Masked-off lanes keep the accumulator (merge-masking).
	ANDQ $15, CX
	JZ   maxred
	TAILMASK
	VMOVUPS.Z (SI), K1, Z4
	VMAXPS    Z0, Z4, K1, Z0

maxred:
	HMAX4
	VMOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET

// func scaleZ(x *float32, n int, a float32)
TEXT ·scaleZ(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS a+16(FP), Z15
	MOVQ         CX, BX
	SHRQ         $6, BX
	JZ           scale16

scale64:
	VMULPS  (SI), Z15, Z0
	VMULPS  64(SI), Z15, Z1
	VMULPS  128(SI), Z15, Z2
	VMULPS  192(SI), Z15, Z3
	VMOVUPS Z0, (SI)
	VMOVUPS Z1, 64(SI)
	VMOVUPS Z2, 128(SI)
	VMOVUPS Z3, 192(SI)
	ADDQ    $256, SI
	DECQ    BX
	JNZ     scale64

scale16:
	MOVQ CX, BX
	ANDQ $63, BX
	SHRQ $4, BX
	JZ   scaletail

scale16loop:
	VMULPS  (SI), Z15, Z0
	VMOVUPS Z0, (SI)
	ADDQ    $64, SI
	DECQ    BX
	JNZ     scale16loop

scaletail:
	ANDQ $15, CX
	JZ   scaledone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z0
	VMULPS    Z15, Z0, Z0
	VMOVUPS   Z0, K1, (SI)

scaledone:
	VZEROUPPER
	RET

// func dotZ(a, b *float32, n int) float32
TEXT ·dotZ(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	ZZ(Z0)
	ZZ(Z1)
	ZZ(Z2)
	ZZ(Z3)
	MOVQ   CX, BX
	SHRQ   $6, BX
	JZ     dot16

dot64:
	VMOVUPS     (SI), Z4
	VMOVUPS     64(SI), Z5
	VMOVUPS     128(SI), Z6
	VMOVUPS     192(SI), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ        $256, SI
	ADDQ        $256, DI
	DECQ        BX
	JNZ         dot64

dot16:
	MOVQ CX, BX
	ANDQ $63, BX
	SHRQ $4, BX
	JZ   dottail

dot16loop:
	VMOVUPS     (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        BX
	JNZ         dot16loop

dottail:
	// Zero-masked loads: the masked-off lanes add 0·0.
	ANDQ $15, CX
	JZ   dotred
	TAILMASK
	VMOVUPS.Z   (SI), K1, Z4
	VMOVUPS.Z   (DI), K1, Z5
	VFMADD231PS Z5, Z4, Z1

dotred:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	HSUMZ
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyZ(x, y *float32, n int, a float32)
TEXT ·axpyZ(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         y+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSS a+24(FP), Z15
	MOVQ         CX, BX
	SHRQ         $6, BX
	JZ           axpy16

axpy64:
	VMOVUPS     (DI), Z0
	VMOVUPS     64(DI), Z1
	VMOVUPS     128(DI), Z2
	VMOVUPS     192(DI), Z3
	VFMADD231PS (SI), Z15, Z0
	VFMADD231PS 64(SI), Z15, Z1
	VFMADD231PS 128(SI), Z15, Z2
	VFMADD231PS 192(SI), Z15, Z3
	VMOVUPS     Z0, (DI)
	VMOVUPS     Z1, 64(DI)
	VMOVUPS     Z2, 128(DI)
	VMOVUPS     Z3, 192(DI)
	ADDQ        $256, SI
	ADDQ        $256, DI
	DECQ        BX
	JNZ         axpy64

axpy16:
	MOVQ CX, BX
	ANDQ $63, BX
	SHRQ $4, BX
	JZ   axpytail

axpy16loop:
	VMOVUPS     (DI), Z0
	VFMADD231PS (SI), Z15, Z0
	VMOVUPS     Z0, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        BX
	JNZ         axpy16loop

axpytail:
	ANDQ $15, CX
	JZ   axpydone
	TAILMASK
	VMOVUPS.Z   (DI), K1, Z0
	VMOVUPS.Z   (SI), K1, Z1
	VFMADD231PS Z1, Z15, Z0
	VMOVUPS     Z0, K1, (DI)

axpydone:
	VZEROUPPER
	RET

// func maxRowsZ(s *float32, lds, m, n int, out *float32)
//
// out[i] = the largest element of row i of the m×n matrix at s (row stride
// lds bytes): maxZ on each row, operation for operation.
TEXT ·maxRowsZ(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), DI
	MOVQ lds+8(FP), R8
	MOVQ m+16(FP), R9
	MOVQ n+24(FP), CX
	MOVQ out+32(FP), R11
	MOVQ CX, R12
	ANDQ $15, R12
	JZ   mrowsloop
	MOVQ CX, R13
	MOVQ R12, CX
	TAILMASK
	MOVQ R13, CX

mrowsloop:
	MOVQ         DI, SI
	VBROADCASTSS expConstZ<>+44(SB), Z0
	VMOVAPS      Z0, Z1
	VMOVAPS      Z0, Z2
	VMOVAPS      Z0, Z3
	MOVQ         CX, BX
	SHRQ         $6, BX
	JZ           mrows16

mrows64:
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	VMOVUPS 128(SI), Z6
	VMOVUPS 192(SI), Z7
	VMAXPS  Z0, Z4, Z0
	VMAXPS  Z1, Z5, Z1
	VMAXPS  Z2, Z6, Z2
	VMAXPS  Z3, Z7, Z3
	ADDQ    $256, SI
	DECQ    BX
	JNZ     mrows64

mrows16:
	MOVQ CX, BX
	ANDQ $63, BX
	SHRQ $4, BX
	JZ   mrowstail

mrows16loop:
	VMOVUPS (SI), Z4
	VMAXPS  Z0, Z4, Z0
	ADDQ    $64, SI
	DECQ    BX
	JNZ     mrows16loop

mrowstail:
	TESTQ     R12, R12
	JZ        mrowsred
	VMOVUPS.Z (SI), K1, Z4
	VMAXPS    Z0, Z4, K1, Z0

mrowsred:
	HMAX4
	VMOVSS        X0, (R11)
	ADDQ          R8, DI
	ADDQ          $4, R11
	DECQ          R9
	JNZ           mrowsloop
	VZEROUPPER
	RET
