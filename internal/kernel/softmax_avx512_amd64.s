// AVX-512F OnlineSoftmax: one call for a tile's rows (see softmax.go).
// Operand order and conventions as in kernel_avx512_amd64.s.

#include "textflag.h"

// The constants of expConstZ (kernel_avx512_amd64.s), bit for bit, and
// -126.0 for the zero mask of EXP16S.
DATA softConstZ<>+0(SB)/4, $0x3f317200  // ln2 hi
DATA softConstZ<>+4(SB)/4, $0x35bfbe8e  // ln2 lo
DATA softConstZ<>+8(SB)/4, $0x42b20000  // expMax = 89
DATA softConstZ<>+12(SB)/4, $0xc2fc0000 // -126.0, the lowest n of a nonzero result
DATA softConstZ<>+16(SB)/4, $0x3afaaf3a // c6
DATA softConstZ<>+20(SB)/4, $0x3c00e9fc // c5
DATA softConstZ<>+24(SB)/4, $0x3d2b7037 // c4
DATA softConstZ<>+28(SB)/4, $0x3f800000 // 1.0
DATA softConstZ<>+32(SB)/4, $0x3fb8aa3b // log2(e)
DATA softConstZ<>+36(SB)/4, $0x3e2aa18d // c3
DATA softConstZ<>+40(SB)/4, $0x3f000026 // c2
DATA softConstZ<>+44(SB)/4, $0xff800000 // -Inf
GLOBL softConstZ<>(SB), RODATA|NOPTR, $48

// EXP16S(x, n, p) replaces x by exp(x - shift), n and p scratch, with the
// results of EXP16 (kernel_avx512_amd64.s) bit for bit. Constant registers:
// Z16 -126.0, Z15 shift, Z14 1.0, Z13 ln2 hi, Z12 ln2 lo, Z11 expMax, Z9 c6,
// Z8 c5, Z7 c4. Two steps differ from EXP16, with the same results:
//   - EXP16 builds 2^n in the exponent field and multiplies; this scales by
//     VSCALEFPS (p·2^n: exact where the result is normal, and p·2^128
//     overflows to +Inf as p·(+Inf) does) under a zero mask, K2 = "not
//     n < -126" (true for NaN, so NaN propagates): the lanes with
//     n ≤ -127, whose 2^n EXP16 builds as +0, give +0.
//   - EXP16 clamps x from below at -88 only to keep n ≥ -127; here the
//     zero mask covers every n ≤ -127, -Inf included (whose r is NaN), so
//     that clamp is left out. The clamp from above stays: it keeps r small,
//     and so p finite and positive, for large arguments.
#define EXP16S(x, n, p) \
	VSUBPS           Z15, x, x; \
	VMINPS           x, Z11, x; \
	VMULPS.BCST      softConstZ<>+32(SB), x, n; \
	VRNDSCALEPS      $9, n, n; \
	VFNMADD231PS     Z13, n, x; \
	VFNMADD231PS     Z12, n, x; \
	VCMPPS           $5, Z16, n, K2; \
	VMOVAPS          Z9, p; \
	VFMADD213PS      Z8, x, p; \
	VFMADD213PS      Z7, x, p; \
	VFMADD213PS.BCST softConstZ<>+36(SB), x, p; \
	VFMADD213PS.BCST softConstZ<>+40(SB), x, p; \
	VFMADD213PS      Z14, x, p; \
	VFMADD213PS      Z14, x, p; \
	VSCALEFPS.Z      n, p, K2, x

// MASKOF(arg, k) sets opmask k to the low arg mod 16 bits; clobbers AX
// and CX.
#define MASKOF(arg, k) \
	MOVQ  arg, CX; \
	ANDQ  $15, CX; \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX; \
	KMOVW AX, k

// HSUMS leaves in X0 the sum of the 16 lanes of Z0, as HSUMZ does;
// clobbers Y1.
#define HSUMS \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPS        X1, X0, X0; \
	VMOVHLPS      X0, X0, X1; \
	VADDPS        X1, X0, X0; \
	VMOVSHDUP     X0, X1; \
	VADDSS        X1, X0, X0

// func softmaxRowsZ(s *float32, lds, m, n int, mloc, mrun, l, sum, lold, acc *float32, ldacc, dv int)
//
// Registers: DI row of s, R8 lds, R9 rows left, CX n, R10 mloc, R11 mrun,
// R12 l, R13 sum, R14 lold, R15 row of acc, DX ldacc; SI, BX scratch.
// K1 masks the last n mod 16 logits of a row, K3 the last dv mod 16
// outputs. X10 holds the row's α.
TEXT ·softmaxRowsZ(SB), NOSPLIT, $0-96
	MASKOF(n+24(FP), K1)
	MASKOF(dv+88(FP), K3)
	MOVQ s+0(FP), DI
	MOVQ lds+8(FP), R8
	MOVQ m+16(FP), R9
	MOVQ n+24(FP), CX
	MOVQ mloc+32(FP), R10
	MOVQ mrun+40(FP), R11
	MOVQ l+48(FP), R12
	MOVQ sum+56(FP), R13
	MOVQ lold+64(FP), R14
	MOVQ acc+72(FP), R15
	MOVQ ldacc+80(FP), DX
	VBROADCASTSS softConstZ<>+12(SB), Z16
	VBROADCASTSS softConstZ<>+28(SB), Z14
	VBROADCASTSS softConstZ<>+0(SB), Z13
	VBROADCASTSS softConstZ<>+4(SB), Z12
	VBROADCASTSS softConstZ<>+8(SB), Z11
	VBROADCASTSS softConstZ<>+16(SB), Z9
	VBROADCASTSS softConstZ<>+20(SB), Z8
	VBROADCASTSS softConstZ<>+24(SB), Z7

row:
	// X6 = mnew = max(mrun, mloc); neither is NaN.
	VMOVSS   (R11), X4
	VMOVSS   (R10), X5
	VMAXSS   X5, X4, X6
	VUCOMISS softConstZ<>+44(SB), X6
	JEQ      zerorow
	VBROADCASTSS X6, Z15
	VMOVSS   X6, (R11)
	VMOVSS   softConstZ<>+28(SB), X10 // α = 1
	VUCOMISS X4, X6
	JEQ      exprow
	VBROADCASTSS X4, Z0 // α = exp(mrun - mnew), EXP16S on every lane
	EXP16S(Z0, Z1, Z2)
	VMOVAPS  X0, X10

exprow:
	// The row's exp and sum, in expShiftZ's order: 32 elements a step in
	// two streams (here two such steps at once, in four), then 16, then
	// the masked tail.
	MOVQ DI, SI
	VPXORD Z3, Z3, Z3
	MOVQ CX, BX
	SHRQ $6, BX
	JZ   exp32test

exp64:
	VMOVUPS (SI), Z17
	VMOVUPS 64(SI), Z20
	VMOVUPS 128(SI), Z23
	VMOVUPS 192(SI), Z26
	EXP16S(Z17, Z18, Z19)
	EXP16S(Z20, Z21, Z22)
	EXP16S(Z23, Z24, Z25)
	EXP16S(Z26, Z27, Z28)
	VMOVUPS Z17, (SI)
	VMOVUPS Z20, 64(SI)
	VMOVUPS Z23, 128(SI)
	VMOVUPS Z26, 192(SI)
	VADDPS  Z17, Z3, Z3
	VADDPS  Z20, Z3, Z3
	VADDPS  Z23, Z3, Z3
	VADDPS  Z26, Z3, Z3
	ADDQ    $256, SI
	DECQ    BX
	JNZ     exp64

exp32test:
	TESTQ $32, CX
	JZ    exp16test
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z4
	EXP16S(Z0, Z1, Z2)
	EXP16S(Z4, Z5, Z6)
	VMOVUPS Z0, (SI)
	VMOVUPS Z4, 64(SI)
	VADDPS  Z0, Z3, Z3
	VADDPS  Z4, Z3, Z3
	ADDQ    $128, SI

exp16test:
	TESTQ $16, CX
	JZ    exptail
	VMOVUPS (SI), Z0
	EXP16S(Z0, Z1, Z2)
	VMOVUPS Z0, (SI)
	VADDPS  Z0, Z3, Z3
	ADDQ    $64, SI

exptail:
	TESTQ $15, CX
	JZ    expdone
	VMOVUPS.Z (SI), K1, Z0
	EXP16S(Z0, Z1, Z2)
	VMOVUPS   Z0, K1, (SI)
	VADDPS    Z0, Z3, K1, Z3

expdone:
	VMOVAPS Z3, Z0
	HSUMS
	// sum, lold = l·α, l = lold + sum.
	VMOVSS X0, (R13)
	VMOVSS (R12), X1
	VMULSS X10, X1, X1
	VMOVSS X1, (R14)
	VADDSS X0, X1, X1
	VMOVSS X1, (R12)
	VUCOMISS softConstZ<>+28(SB), X10
	JEQ    next

	// acc's row ·= α, 16 outputs a step, then the masked tail.
	VBROADCASTSS X10, Z1
	MOVQ R15, SI
	MOVQ dv+88(FP), BX
	SHRQ $4, BX
	JZ   scaletail

scale16:
	VMULPS  (SI), Z1, Z2
	VMOVUPS Z2, (SI)
	ADDQ    $64, SI
	DECQ    BX
	JNZ     scale16

scaletail:
	TESTQ $15, dv+88(FP)
	JZ    next
	VMOVUPS.Z (SI), K3, Z2
	VMULPS    Z2, Z1, Z2
	VMOVUPS   Z2, K3, (SI)
	JMP       next

zerorow:
	// Nothing visible yet: the row's probabilities are 0.
	VPXORD Z0, Z0, Z0
	VMOVSS X0, (R13)
	VMOVSS X0, (R14)
	MOVQ   DI, SI
	MOVQ   CX, BX
	SHRQ   $4, BX
	JZ     zerotail

zero16:
	VMOVUPS Z0, (SI)
	ADDQ    $64, SI
	DECQ    BX
	JNZ     zero16

zerotail:
	TESTQ $15, CX
	JZ    next
	VMOVUPS Z0, K1, (SI)

next:
	ADDQ R8, DI
	ADDQ $4, R10
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	ADDQ $4, R14
	ADDQ DX, R15
	DECQ R9
	JNZ  row

	// Clean the 512-bit state: VZEROUPPER does not reach Z16-Z31.
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VZEROUPPER
	RET
