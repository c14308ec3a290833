// AVX-512F DotRows kernels; see dotRowsAVX512 in kernel_amd64.go. Go
// operand order: "VFMADD231PS Z16, Z20, Z0" is Z0 += Z20·Z16.

#include "textflag.h"

// FOLD halves a 16-lane accumulator into its low 8 lanes (Z16 scratch).
#define FOLD(z, y) VEXTRACTF64X4 $1, z, Y16; VADDPS Z16, z, z

// SUM4 leaves in xa the four sums of ya, yb, yc, yd (8 lanes each):
// [Σya, Σyb, Σyc, Σyd].
#define SUM4(ya, yb, yc, yd, xa, xb) \
	VHADDPS      yb, ya, ya; \
	VHADDPS      yd, yc, yc; \
	VHADDPS      yc, ya, ya; \
	VEXTRACTF128 $1, ya, xb; \
	VADDPS       xb, xa, xa

// KEY4 adds key kp's products with the 4 query rows into z0..z3, reading
// the key's chunks in ascending order (used in dotRows4Z only). It
// prefetches the same chunk of the key 16 rows ahead (R15), so that a
// decode's stream of keys keeps enough loads in flight while the core
// computes; a prefetch past the end of the keys never faults.
#define KEY4(kp, z0, z1, z2, z3, label) \
	MOVQ        dBytes+56(FP), AX; \
	NEGQ        AX; \
	MOVQ        ldk+24(FP), R15; \
	SHLQ        $4, R15; \
	ADDQ        kp, R15; \
label: \
	PREFETCHT0  (R15)(AX*1); \
	VMOVUPS     (kp)(AX*1), Z16; \
	VFMADD231PS (R8)(AX*1), Z16, z0; \
	VFMADD231PS (R9)(AX*1), Z16, z1; \
	VFMADD231PS (R10)(AX*1), Z16, z2; \
	VFMADD231PS (R11)(AX*1), Z16, z3; \
	ADDQ        $64, AX; \
	JNZ         label

// func dotRows4Z(q *float32, ldq int, k *float32, ldk int, s *float32, lds int, n4, dBytes int)
//
// Register use:
//   R8-R11  the 4 query rows, advanced by dBytes (the d loop runs AX from -dBytes to 0)
//   SI, DI, DX, R12  keys j..j+3, likewise advanced
//   CX      key groups left     R13  s, row 0, column j     BX  scratch
//   Z(4r+c) row r · key c       Z16-Z19 key chunks          Z20 query chunk
TEXT ·dotRows4Z(SB), NOSPLIT, $0-64
	MOVQ dBytes+56(FP), AX
	MOVQ q+0(FP), R8
	ADDQ AX, R8
	MOVQ ldq+8(FP), BX
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	MOVQ k+16(FP), SI
	ADDQ AX, SI
	MOVQ ldk+24(FP), BX
	LEAQ (SI)(BX*1), DI
	LEAQ (DI)(BX*1), DX
	LEAQ (DX)(BX*1), R12
	MOVQ s+32(FP), R13
	MOVQ n4+48(FP), CX

group4:
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	VXORPS Z12, Z12, Z12
	VXORPS Z13, Z13, Z13
	VXORPS Z14, Z14, Z14
	VXORPS Z15, Z15, Z15
	KEY4(SI, Z0, Z4, Z8, Z12, key4a)
	KEY4(DI, Z1, Z5, Z9, Z13, key4b)
	KEY4(DX, Z2, Z6, Z10, Z14, key4c)
	KEY4(R12, Z3, Z7, Z11, Z15, key4d)

	FOLD(Z0, Y0)
	FOLD(Z1, Y1)
	FOLD(Z2, Y2)
	FOLD(Z3, Y3)
	FOLD(Z4, Y4)
	FOLD(Z5, Y5)
	FOLD(Z6, Y6)
	FOLD(Z7, Y7)
	FOLD(Z8, Y8)
	FOLD(Z9, Y9)
	FOLD(Z10, Y10)
	FOLD(Z11, Y11)
	FOLD(Z12, Y12)
	FOLD(Z13, Y13)
	FOLD(Z14, Y14)
	FOLD(Z15, Y15)
	SUM4(Y0, Y1, Y2, Y3, X0, X1)
	SUM4(Y4, Y5, Y6, Y7, X4, X5)
	SUM4(Y8, Y9, Y10, Y11, X8, X9)
	SUM4(Y12, Y13, Y14, Y15, X12, X13)
	MOVQ    lds+40(FP), BX
	VMOVUPS X0, (R13)
	VMOVUPS X4, (R13)(BX*1)
	VMOVUPS X8, (R13)(BX*2)
	LEAQ    (BX)(BX*2), BX
	VMOVUPS X12, (R13)(BX*1)
	ADDQ    $16, R13

	MOVQ ldk+24(FP), BX
	SHLQ $2, BX
	ADDQ BX, SI
	ADDQ BX, DI
	ADDQ BX, DX
	ADDQ BX, R12
	DECQ CX
	JNZ  group4

	VZEROUPPER
	RET

// func dotRows1Z(q *float32, k *float32, ldk int, s *float32, n4, dBytes int)
//
// R11 holds -dBytes. One query row (R8) against keys j..j+3 (SI, DI, DX, R12), one key after
// the other so that memory is read in ascending order; key c sums its even
// chunks in Z(c) and its odd ones in Z(c+4).
#define KEY1(kp, ze, zo, label, labeldone) \
	MOVQ        R11, AX; \
	TESTQ       $64, AX; \
	JZ          label; \
	VMOVUPS     (R8)(AX*1), Z20; \
	VFMADD231PS (kp)(AX*1), Z20, ze; \
	ADDQ        $64, AX; \
	JZ          labeldone; \
label: \
	VMOVUPS     (R8)(AX*1), Z20; \
	VMOVUPS     64(R8)(AX*1), Z21; \
	VFMADD231PS (kp)(AX*1), Z20, ze; \
	VFMADD231PS 64(kp)(AX*1), Z21, zo; \
	ADDQ        $128, AX; \
	JNZ         label; \
labeldone:

TEXT ·dotRows1Z(SB), NOSPLIT, $0-48
	MOVQ dBytes+40(FP), AX
	MOVQ AX, R11
	NEGQ R11
	MOVQ q+0(FP), R8
	ADDQ AX, R8
	MOVQ k+8(FP), SI
	ADDQ AX, SI
	MOVQ ldk+16(FP), BX
	LEAQ (SI)(BX*1), DI
	LEAQ (DI)(BX*1), DX
	LEAQ (DX)(BX*1), R12
	SHLQ $2, BX
	MOVQ s+24(FP), R13
	MOVQ n4+32(FP), CX

group1:
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	KEY1(SI, Z0, Z4, key0, key0done)
	KEY1(DI, Z1, Z5, key1, key1done)
	KEY1(DX, Z2, Z6, key2, key2done)
	KEY1(R12, Z3, Z7, key3, key3done)
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	FOLD(Z0, Y0)
	FOLD(Z1, Y1)
	FOLD(Z2, Y2)
	FOLD(Z3, Y3)
	SUM4(Y0, Y1, Y2, Y3, X0, X1)
	VMOVUPS X0, (R13)
	ADDQ    $16, R13
	ADDQ    BX, SI
	ADDQ    BX, DI
	ADDQ    BX, DX
	ADDQ    BX, R12
	DECQ    CX
	JNZ     group1

	VZEROUPPER
	RET
