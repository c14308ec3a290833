// AVX2+FMA kernels for amd64. The Go declarations, and the conditions under
// which these functions are called, are in kernel_amd64.go. Go assembler
// operand order is the reverse of Intel's: "VFMADD231PS Y12, Y14, Y0" is
// Y0 += Y14·Y12, "VMINPS Y0, Y11, Y0" is Intel "vminps ymm0, ymm11, ymm0".

#include "textflag.h"

// ---------------------------------------------------------------------------
// MatMul micro-kernels.
//
// Register use in gemm16, gemm8 and gemmMask:
//   SI  A cursor, row 0 of the panel     R10 A cursor, row 3 (SI + 3·lda)
//   R8  lda in bytes                     DI  B cursor
//   R9  ldb in bytes                     CX  k
//   R11 C row 0                          AX  C row 3 (R11 + 3·ldc)
//   R12 ldc in bytes                     BX  k/2 loop counter
//   DX  accumulate flag                  Y12, Y13  B row, 8 columns each
//   Y14 broadcast A element              Y15 column mask (gemmMask)
//
// gemm16: row r of the panel accumulates in Y(2r) (columns 0-7) and Y(2r+1)
// (columns 8-15). With 3 rows or fewer there are too few independent FMA
// chains to hide the FMA latency, so odd k steps go to a second set of
// accumulators (the "O" macros), added to the first at the end.
// gemm8/gemmMask: row r accumulates in Y(r) for even k and Y(6+r) for odd k.
//
// The k loop is unrolled twice: E step at A offset 0 and B row (DI), O step
// at A offset 4 and B row (DI)(R9*1).
// ---------------------------------------------------------------------------

#define FMA16(A, c0, c1) VBROADCASTSS A, Y14; VFMADD231PS Y12, Y14, c0; VFMADD231PS Y13, Y14, c1
#define FMA8(A, c0) VBROADCASTSS A, Y14; VFMADD231PS Y12, Y14, c0
#define ZY(r) VXORPS r, r, r
#define NOCOMB

// B row loads.
#define B16E VMOVUPS (DI), Y12; VMOVUPS 32(DI), Y13
#define B16O VMOVUPS (DI)(R9*1), Y12; VMOVUPS 32(DI)(R9*1), Y13
#define B8E VMOVUPS (DI), Y12
#define B8O VMOVUPS (DI)(R9*1), Y12
#define BME VMASKMOVPS (DI), Y15, Y12
#define BMO VMASKMOVPS (DI)(R9*1), Y15, Y12

// 16 wide: even-k steps.
#define E16_1(o) FMA16(o(SI), Y0, Y1)
#define E16_2(o) E16_1(o); FMA16(o(SI)(R8*1), Y2, Y3)
#define E16_3(o) E16_2(o); FMA16(o(SI)(R8*2), Y4, Y5)
#define E16_4(o) E16_3(o); FMA16(o(R10), Y6, Y7)
#define E16_5(o) E16_4(o); FMA16(o(R10)(R8*1), Y8, Y9)
#define E16_6(o) E16_5(o); FMA16(o(R10)(R8*2), Y10, Y11)

// 16 wide: odd-k steps (separate accumulators for 1 to 3 rows).
#define O16_1(o) FMA16(o(SI), Y2, Y3)
#define O16_2(o) FMA16(o(SI), Y4, Y5); FMA16(o(SI)(R8*1), Y6, Y7)
#define O16_3(o) FMA16(o(SI), Y6, Y7); FMA16(o(SI)(R8*1), Y8, Y9); FMA16(o(SI)(R8*2), Y10, Y11)

// 16 wide: fold the odd accumulators into the even ones.
#define M16_1 VADDPS Y2, Y0, Y0; VADDPS Y3, Y1, Y1
#define M16_2 VADDPS Y4, Y0, Y0; VADDPS Y5, Y1, Y1; VADDPS Y6, Y2, Y2; VADDPS Y7, Y3, Y3
#define M16_3 VADDPS Y6, Y0, Y0; VADDPS Y7, Y1, Y1; VADDPS Y8, Y2, Y2; VADDPS Y9, Y3, Y3; VADDPS Y10, Y4, Y4; VADDPS Y11, Y5, Y5

// 16 wide: zero every accumulator in use.
#define Z16_2 ZY(Y0); ZY(Y1); ZY(Y2); ZY(Y3)
#define Z16_4 Z16_2; ZY(Y4); ZY(Y5); ZY(Y6); ZY(Y7)
#define Z16_5 Z16_4; ZY(Y8); ZY(Y9)
#define Z16_6 Z16_5; ZY(Y10); ZY(Y11)

// 16 wide: load C into the even accumulators (accumulate=true) and zero
// the odd ones.
#define LC16_1 VMOVUPS (R11), Y0; VMOVUPS 32(R11), Y1
#define LC16_2 LC16_1; VMOVUPS (R11)(R12*1), Y2; VMOVUPS 32(R11)(R12*1), Y3
#define LC16_3 LC16_2; VMOVUPS (R11)(R12*2), Y4; VMOVUPS 32(R11)(R12*2), Y5
#define LC16_4 LC16_3; VMOVUPS (AX), Y6; VMOVUPS 32(AX), Y7
#define LC16_5 LC16_4; VMOVUPS (AX)(R12*1), Y8; VMOVUPS 32(AX)(R12*1), Y9
#define LC16_6 LC16_5; VMOVUPS (AX)(R12*2), Y10; VMOVUPS 32(AX)(R12*2), Y11
#define L16_1 LC16_1; ZY(Y2); ZY(Y3)
#define L16_2 LC16_2; ZY(Y4); ZY(Y5); ZY(Y6); ZY(Y7)
#define L16_3 LC16_3; ZY(Y6); ZY(Y7); ZY(Y8); ZY(Y9); ZY(Y10); ZY(Y11)

// 16 wide: store.
#define S16_1 VMOVUPS Y0, (R11); VMOVUPS Y1, 32(R11)
#define S16_2 S16_1; VMOVUPS Y2, (R11)(R12*1); VMOVUPS Y3, 32(R11)(R12*1)
#define S16_3 S16_2; VMOVUPS Y4, (R11)(R12*2); VMOVUPS Y5, 32(R11)(R12*2)
#define S16_4 S16_3; VMOVUPS Y6, (AX); VMOVUPS Y7, 32(AX)
#define S16_5 S16_4; VMOVUPS Y8, (AX)(R12*1); VMOVUPS Y9, 32(AX)(R12*1)
#define S16_6 S16_5; VMOVUPS Y10, (AX)(R12*2); VMOVUPS Y11, 32(AX)(R12*2)

// 8 wide and masked: even-k and odd-k steps, fold, zero.
#define E8_1(o) FMA8(o(SI), Y0)
#define E8_2(o) E8_1(o); FMA8(o(SI)(R8*1), Y1)
#define E8_3(o) E8_2(o); FMA8(o(SI)(R8*2), Y2)
#define E8_4(o) E8_3(o); FMA8(o(R10), Y3)
#define E8_5(o) E8_4(o); FMA8(o(R10)(R8*1), Y4)
#define E8_6(o) E8_5(o); FMA8(o(R10)(R8*2), Y5)
#define O8_1(o) FMA8(o(SI), Y6)
#define O8_2(o) O8_1(o); FMA8(o(SI)(R8*1), Y7)
#define O8_3(o) O8_2(o); FMA8(o(SI)(R8*2), Y8)
#define O8_4(o) O8_3(o); FMA8(o(R10), Y9)
#define O8_5(o) O8_4(o); FMA8(o(R10)(R8*1), Y10)
#define O8_6(o) O8_5(o); FMA8(o(R10)(R8*2), Y11)
#define M8_1 VADDPS Y6, Y0, Y0
#define M8_2 M8_1; VADDPS Y7, Y1, Y1
#define M8_3 M8_2; VADDPS Y8, Y2, Y2
#define M8_4 M8_3; VADDPS Y9, Y3, Y3
#define M8_5 M8_4; VADDPS Y10, Y4, Y4
#define M8_6 M8_5; VADDPS Y11, Y5, Y5
#define ZO8_1 ZY(Y6)
#define ZO8_2 ZO8_1; ZY(Y7)
#define ZO8_3 ZO8_2; ZY(Y8)
#define ZO8_4 ZO8_3; ZY(Y9)
#define ZO8_5 ZO8_4; ZY(Y10)
#define ZO8_6 ZO8_5; ZY(Y11)
#define Z8_1 ZY(Y0); ZO8_1
#define Z8_2 ZY(Y0); ZY(Y1); ZO8_2
#define Z8_3 ZY(Y0); ZY(Y1); ZY(Y2); ZO8_3
#define Z8_4 ZY(Y0); ZY(Y1); ZY(Y2); ZY(Y3); ZO8_4
#define Z8_5 ZY(Y0); ZY(Y1); ZY(Y2); ZY(Y3); ZY(Y4); ZO8_5
#define Z8_6 ZY(Y0); ZY(Y1); ZY(Y2); ZY(Y3); ZY(Y4); ZY(Y5); ZO8_6

// 8 wide: load C (and zero the odd accumulators), store C.
#define LC8_1 VMOVUPS (R11), Y0
#define LC8_2 LC8_1; VMOVUPS (R11)(R12*1), Y1
#define LC8_3 LC8_2; VMOVUPS (R11)(R12*2), Y2
#define LC8_4 LC8_3; VMOVUPS (AX), Y3
#define LC8_5 LC8_4; VMOVUPS (AX)(R12*1), Y4
#define LC8_6 LC8_5; VMOVUPS (AX)(R12*2), Y5
#define L8_1 LC8_1; ZO8_1
#define L8_2 LC8_2; ZO8_2
#define L8_3 LC8_3; ZO8_3
#define L8_4 LC8_4; ZO8_4
#define L8_5 LC8_5; ZO8_5
#define L8_6 LC8_6; ZO8_6
#define S8_1 VMOVUPS Y0, (R11)
#define S8_2 S8_1; VMOVUPS Y1, (R11)(R12*1)
#define S8_3 S8_2; VMOVUPS Y2, (R11)(R12*2)
#define S8_4 S8_3; VMOVUPS Y3, (AX)
#define S8_5 S8_4; VMOVUPS Y4, (AX)(R12*1)
#define S8_6 S8_5; VMOVUPS Y5, (AX)(R12*2)

// Masked: the same with VMASKMOVPS under the column mask Y15. Masked-off
// lanes are neither read nor written (and cannot fault).
#define LCM_1 VMASKMOVPS (R11), Y15, Y0
#define LCM_2 LCM_1; VMASKMOVPS (R11)(R12*1), Y15, Y1
#define LCM_3 LCM_2; VMASKMOVPS (R11)(R12*2), Y15, Y2
#define LCM_4 LCM_3; VMASKMOVPS (AX), Y15, Y3
#define LCM_5 LCM_4; VMASKMOVPS (AX)(R12*1), Y15, Y4
#define LCM_6 LCM_5; VMASKMOVPS (AX)(R12*2), Y15, Y5
#define LM_1 LCM_1; ZO8_1
#define LM_2 LCM_2; ZO8_2
#define LM_3 LCM_3; ZO8_3
#define LM_4 LCM_4; ZO8_4
#define LM_5 LCM_5; ZO8_5
#define LM_6 LCM_6; ZO8_6
#define SM_1 VMASKMOVPS Y0, Y15, (R11)
#define SM_2 SM_1; VMASKMOVPS Y1, Y15, (R11)(R12*1)
#define SM_3 SM_2; VMASKMOVPS Y2, Y15, (R11)(R12*2)
#define SM_4 SM_3; VMASKMOVPS Y3, Y15, (AX)
#define SM_5 SM_4; VMASKMOVPS Y4, Y15, (AX)(R12*1)
#define SM_6 SM_5; VMASKMOVPS Y5, Y15, (AX)(R12*2)

// KERNEL computes one panel: initialize the accumulators (ZERO, or LOADC
// when DX is set), run the k loop, fold, store, return. The remaining
// arguments are labels, which must be unique within the function.
#define KERNEL(LOADC, ZERO, LDB0, LDB1, STEPE, STEPO, COMB, STORE, ld, kl, lp, tl, dn) \
	TESTQ DX, DX; \
	JNZ   ld; \
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
	VZEROUPPER; \
	RET

// PROLOGUE loads the arguments common to the three kernels (the offsets
// differ for gemmMask) and leaves the row count in BX for the dispatch.
#define PROLOGUE(mr, k, a, lda, b, ldb, c, ldc, acc) \
	MOVQ    k, CX; \
	MOVQ    a, SI; \
	MOVQ    lda, R8; \
	SHLQ    $2, R8; \
	LEAQ    (SI)(R8*2), R10; \
	ADDQ    R8, R10; \
	MOVQ    b, DI; \
	MOVQ    ldb, R9; \
	SHLQ    $2, R9; \
	MOVQ    c, R11; \
	MOVQ    ldc, R12; \
	SHLQ    $2, R12; \
	LEAQ    (R11)(R12*2), AX; \
	ADDQ    R12, AX; \
	MOVBQZX acc, DX; \
	MOVQ    mr, BX

#define DISPATCH \
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

// func gemm16(mr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
TEXT ·gemm16(SB), NOSPLIT, $0-65
	PROLOGUE(mr+0(FP), k+8(FP), a+16(FP), lda+24(FP), b+32(FP), ldb+40(FP), c+48(FP), ldc+56(FP), acc+64(FP))
	DISPATCH

r6:
	KERNEL(LC16_6, Z16_6, B16E, B16O, E16_6, E16_6, NOCOMB, S16_6, ld6, kl6, lp6, tl6, dn6)

r5:
	KERNEL(LC16_5, Z16_5, B16E, B16O, E16_5, E16_5, NOCOMB, S16_5, ld5, kl5, lp5, tl5, dn5)

r4:
	KERNEL(LC16_4, Z16_4, B16E, B16O, E16_4, E16_4, NOCOMB, S16_4, ld4, kl4, lp4, tl4, dn4)

r3:
	KERNEL(L16_3, Z16_6, B16E, B16O, E16_3, O16_3, M16_3, S16_3, ld3, kl3, lp3, tl3, dn3)

r2:
	KERNEL(L16_2, Z16_4, B16E, B16O, E16_2, O16_2, M16_2, S16_2, ld2, kl2, lp2, tl2, dn2)

r1:
	KERNEL(L16_1, Z16_2, B16E, B16O, E16_1, O16_1, M16_1, S16_1, ld1, kl1, lp1, tl1, dn1)

// func gemm8(mr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
TEXT ·gemm8(SB), NOSPLIT, $0-65
	PROLOGUE(mr+0(FP), k+8(FP), a+16(FP), lda+24(FP), b+32(FP), ldb+40(FP), c+48(FP), ldc+56(FP), acc+64(FP))
	DISPATCH

r6:
	KERNEL(L8_6, Z8_6, B8E, B8O, E8_6, O8_6, M8_6, S8_6, ld6, kl6, lp6, tl6, dn6)

r5:
	KERNEL(L8_5, Z8_5, B8E, B8O, E8_5, O8_5, M8_5, S8_5, ld5, kl5, lp5, tl5, dn5)

r4:
	KERNEL(L8_4, Z8_4, B8E, B8O, E8_4, O8_4, M8_4, S8_4, ld4, kl4, lp4, tl4, dn4)

r3:
	KERNEL(L8_3, Z8_3, B8E, B8O, E8_3, O8_3, M8_3, S8_3, ld3, kl3, lp3, tl3, dn3)

r2:
	KERNEL(L8_2, Z8_2, B8E, B8O, E8_2, O8_2, M8_2, S8_2, ld2, kl2, lp2, tl2, dn2)

r1:
	KERNEL(L8_1, Z8_1, B8E, B8O, E8_1, O8_1, M8_1, S8_1, ld1, kl1, lp1, tl1, dn1)

// func gemmMask(mr, nr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
TEXT ·gemmMask(SB), NOSPLIT, $0-73
	// Y15 = nr all-ones lanes followed by 8-nr zero lanes.
	MOVQ    nr+8(FP), BX
	NEGQ    BX
	LEAQ    maskTab<>+32(SB), AX
	VMOVDQU (AX)(BX*4), Y15
	PROLOGUE(mr+0(FP), k+16(FP), a+24(FP), lda+32(FP), b+40(FP), ldb+48(FP), c+56(FP), ldc+64(FP), acc+72(FP))
	DISPATCH

r6:
	KERNEL(LM_6, Z8_6, BME, BMO, E8_6, O8_6, M8_6, SM_6, ld6, kl6, lp6, tl6, dn6)

r5:
	KERNEL(LM_5, Z8_5, BME, BMO, E8_5, O8_5, M8_5, SM_5, ld5, kl5, lp5, tl5, dn5)

r4:
	KERNEL(LM_4, Z8_4, BME, BMO, E8_4, O8_4, M8_4, SM_4, ld4, kl4, lp4, tl4, dn4)

r3:
	KERNEL(LM_3, Z8_3, BME, BMO, E8_3, O8_3, M8_3, SM_3, ld3, kl3, lp3, tl3, dn3)

r2:
	KERNEL(LM_2, Z8_2, BME, BMO, E8_2, O8_2, M8_2, SM_2, ld2, kl2, lp2, tl2, dn2)

r1:
	KERNEL(LM_1, Z8_1, BME, BMO, E8_1, O8_1, M8_1, SM_1, ld1, kl1, lp1, tl1, dn1)

// maskTab holds 8 all-ones words followed by 8 zero words; the 8 words at
// maskTab+32-4·n are a mask selecting the first n lanes.
DATA maskTab<>+0(SB)/8, $0xffffffffffffffff
DATA maskTab<>+8(SB)/8, $0xffffffffffffffff
DATA maskTab<>+16(SB)/8, $0xffffffffffffffff
DATA maskTab<>+24(SB)/8, $0xffffffffffffffff
DATA maskTab<>+32(SB)/8, $0
DATA maskTab<>+40(SB)/8, $0
DATA maskTab<>+48(SB)/8, $0
DATA maskTab<>+56(SB)/8, $0
GLOBL maskTab<>(SB), RODATA|NOPTR, $64

// ---------------------------------------------------------------------------
// ExpShift. The constants and the algorithm are those of expGeneric in
// generic.go (keep the bit patterns in sync).
// ---------------------------------------------------------------------------

DATA expConst<>+0(SB)/4, $0x3f317200  // ln2 hi
DATA expConst<>+4(SB)/4, $0x35bfbe8e  // ln2 lo
DATA expConst<>+8(SB)/4, $0x42b20000  // expMax = 89
DATA expConst<>+12(SB)/4, $0xc2b00000 // expLow = -88
DATA expConst<>+16(SB)/4, $0x3afaaf3a // c6
DATA expConst<>+20(SB)/4, $0x3c00e9fc // c5
DATA expConst<>+24(SB)/4, $0x3d2b7037 // c4
DATA expConst<>+28(SB)/4, $0x3f800000 // 1.0, whose bits are also 127<<23
GLOBL expConst<>(SB), RODATA|NOPTR, $32

// Constants used as full-vector memory operands, each repeated 8 times:
// log2(e) at +0, c3 at +32, c2 at +64.
DATA expVec<>+0(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expVec<>+8(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expVec<>+16(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expVec<>+24(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expVec<>+32(SB)/8, $0x3e2aa18d3e2aa18d
DATA expVec<>+40(SB)/8, $0x3e2aa18d3e2aa18d
DATA expVec<>+48(SB)/8, $0x3e2aa18d3e2aa18d
DATA expVec<>+56(SB)/8, $0x3e2aa18d3e2aa18d
DATA expVec<>+64(SB)/8, $0x3f0000263f000026
DATA expVec<>+72(SB)/8, $0x3f0000263f000026
DATA expVec<>+80(SB)/8, $0x3f0000263f000026
DATA expVec<>+88(SB)/8, $0x3f0000263f000026
GLOBL expVec<>(SB), RODATA|NOPTR, $96

// EXP8(x, n, p) replaces x (src) by exp(x - shift), using n and p as
// scratch. Constant registers: Y15 shift, Y14 1.0 (= 127<<23), Y13 ln2 hi,
// Y12 ln2 lo, Y11 expMax, Y10 expLow, Y9 c6, Y8 c5, Y7 c4.
//
//   x = min(max(src - shift, -88), 89)  (both keep a NaN x)
//   n = floor(x·log2e)                  (in [-127, 128])
//   r = x - n·ln2                       (two FMAs, 0 ≤ r < ln2)
//   p = 1 + r + c2 r² + … + c6 r⁶      (Horner)
//   result = p · 2^n, 2^n = (n<<23) + (127<<23)
//
// n = -127 (x below about -87.3365) gives 2^n = +0, so the result is
// exactly 0; n = 128 gives +Inf.
#define EXP8(x, n, p) \
	VSUBPS       Y15, x, x; \
	VMINPS       x, Y11, x; \
	VMAXPS       x, Y10, x; \
	VMULPS       expVec<>+0(SB), x, n; \
	VROUNDPS     $1, n, n; \
	VFNMADD231PS Y13, n, x; \
	VFNMADD231PS Y12, n, x; \
	VCVTPS2DQ    n, n; \
	VPSLLD       $23, n, n; \
	VPADDD       Y14, n, n; \
	VMOVAPS      Y9, p; \
	VFMADD213PS  Y8, x, p; \
	VFMADD213PS  Y7, x, p; \
	VFMADD213PS  expVec<>+32(SB), x, p; \
	VFMADD213PS  expVec<>+64(SB), x, p; \
	VFMADD213PS  Y14, x, p; \
	VFMADD213PS  Y14, x, p; \
	VMULPS       n, p, x

// HSUM leaves in X0 the sum of the 8 lanes of Y0; clobbers X1.
#define HSUM \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0

// func expShiftY(dst, src *float32, n int, shift float32) float32
TEXT ·expShiftY(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS shift+24(FP), Y15
	VBROADCASTSS expConst<>+28(SB), Y14
	VBROADCASTSS expConst<>+0(SB), Y13
	VBROADCASTSS expConst<>+4(SB), Y12
	VBROADCASTSS expConst<>+8(SB), Y11
	VBROADCASTSS expConst<>+12(SB), Y10
	VBROADCASTSS expConst<>+16(SB), Y9
	VBROADCASTSS expConst<>+20(SB), Y8
	VBROADCASTSS expConst<>+24(SB), Y7
	VXORPS       Y3, Y3, Y3 // running sum

	// 16 elements per iteration in two independent streams.
	MOVQ CX, BX
	SHRQ $4, BX
	JZ   exp8

exp16:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y4
	EXP8(Y0, Y1, Y2)
	EXP8(Y4, Y5, Y6)
	VMOVUPS Y0, (DI)
	VMOVUPS Y4, 32(DI)
	VADDPS  Y0, Y3, Y3
	VADDPS  Y4, Y3, Y3
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    BX
	JNZ     exp16

exp8:
	TESTQ $8, CX
	JZ    tail
	VMOVUPS (SI), Y0
	EXP8(Y0, Y1, Y2)
	VMOVUPS Y0, (DI)
	VADDPS  Y0, Y3, Y3
	ADDQ    $32, SI
	ADDQ    $32, DI

tail:
	// The last n mod 8 elements, under the lane mask Y4. Masked-off lanes
	// are not read or written; their results are cleared before the sum.
	ANDQ       $7, CX
	JZ         done
	NEGQ       CX
	LEAQ       maskTab<>+32(SB), AX
	VMOVDQU    (AX)(CX*4), Y4
	VMASKMOVPS (SI), Y4, Y0
	EXP8(Y0, Y1, Y2)
	VANDPS     Y4, Y0, Y0
	VMASKMOVPS Y0, Y4, (DI)
	VADDPS     Y0, Y3, Y3

done:
	VMOVAPS Y3, Y0
	HSUM
	VMOVSS  X0, ret+32(FP)
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// BLAS-1 helpers. n is a positive multiple of 8; 32 elements per iteration
// in four independent registers, then 8 at a time.
// ---------------------------------------------------------------------------

DATA negInf<>+0(SB)/4, $0xff800000
GLOBL negInf<>(SB), RODATA|NOPTR, $4

// func maxY(x *float32, n int) float32
TEXT ·maxY(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS negInf<>(SB), Y0
	VMOVAPS      Y0, Y1
	VMOVAPS      Y0, Y2
	VMOVAPS      Y0, Y3
	MOVQ         CX, BX
	SHRQ         $5, BX
	JZ           max8

	// VMAXPS returns its second (Intel) source, the accumulator, when
	// either operand is NaN, so NaN elements are skipped.
max32:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMAXPS  Y0, Y4, Y0
	VMAXPS  Y1, Y5, Y1
	VMAXPS  Y2, Y6, Y2
	VMAXPS  Y3, Y7, Y3
	ADDQ    $128, SI
	DECQ    BX
	JNZ     max32

max8:
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   maxred

max8loop:
	VMOVUPS (SI), Y4
	VMAXPS  Y0, Y4, Y0
	ADDQ    $32, SI
	DECQ    CX
	JNZ     max8loop

maxred:
	VMAXPS       Y1, Y0, Y0
	VMAXPS       Y3, Y2, Y2
	VMAXPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VMOVSS       X0, ret+16(FP)
	VZEROUPPER
	RET

// func scaleY(x *float32, n int, a float32)
TEXT ·scaleY(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS a+16(FP), Y15
	MOVQ         CX, BX
	SHRQ         $5, BX
	JZ           scale8

scale32:
	VMULPS  (SI), Y15, Y0
	VMULPS  32(SI), Y15, Y1
	VMULPS  64(SI), Y15, Y2
	VMULPS  96(SI), Y15, Y3
	VMOVUPS Y0, (SI)
	VMOVUPS Y1, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y3, 96(SI)
	ADDQ    $128, SI
	DECQ    BX
	JNZ     scale32

scale8:
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   scaledone

scale8loop:
	VMULPS  (SI), Y15, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     scale8loop

scaledone:
	VZEROUPPER
	RET

// func dotY(a, b *float32, n int) float32
TEXT ·dotY(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   CX, BX
	SHRQ   $5, BX
	JZ     dot8

dot32:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	DECQ        BX
	JNZ         dot32

dot8:
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   dotred

dot8loop:
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         dot8loop

dotred:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyY(x, y *float32, n int, a float32)
TEXT ·axpyY(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         y+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSS a+24(FP), Y15
	MOVQ         CX, BX
	SHRQ         $5, BX
	JZ           axpy8

axpy32:
	VMOVUPS     (DI), Y0
	VMOVUPS     32(DI), Y1
	VMOVUPS     64(DI), Y2
	VMOVUPS     96(DI), Y3
	VFMADD231PS (SI), Y15, Y0
	VFMADD231PS 32(SI), Y15, Y1
	VFMADD231PS 64(SI), Y15, Y2
	VFMADD231PS 96(SI), Y15, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	VMOVUPS     Y2, 64(DI)
	VMOVUPS     Y3, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	DECQ        BX
	JNZ         axpy32

axpy8:
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   axpydone

axpy8loop:
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y15, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         axpy8loop

axpydone:
	VZEROUPPER
	RET
