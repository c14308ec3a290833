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

// func dotRows4Z(q *float32, ldq int, k *float32, ldk int, s *float32, lds int, n4, dBytes int)
//
// Four query rows against four keys at a time, chunk by chunk: each step
// loads one 16-float chunk of the four keys and of the four rows and does
// the 16 FMAs between them, so a load serves four FMAs (the rows held in
// registers would need 32 of them). The sum of (row r, key c) runs over
// the chunks in order in Z(4r+c), as one dot product does; the sixteen
// accumulators are then summed together by 128-bit lane shuffles and a
// 4×4 transpose-add (48 shuffles and adds for 16 sums, against 68 for a
// fold and horizontal adds each).
// The keys are read chunk by chunk across four rows, not in address
// order, so each step prefetches the next four lines of keys j+16..j+19
// in address order, row after row (R12, jumping over the stride's gap at
// each row's end, R13): the lines are first asked for in ascending
// addresses, which the hardware's stream prefetchers follow. A prefetch
// past the end of the keys never faults.
//
// Register use (the chunk loop advances SI and R8 by 64 bytes a step):
//   SI  key j, chunk c      BX, DX  ldk, 3·ldk      R11  16·ldk
//   R8  row 0, chunk c      R9, R10 ldq, 3·ldq      R15  ldk − dBytes
//   R12, R13  prefetch line, end of its row
//   DI  s, row 0, column j  AX  key groups left     CX  chunks left, scratch
//   Z(4r+c) row r · key c   Z16-Z19 row chunks      Z20-Z23 key chunks
TEXT ·dotRows4Z(SB), NOSPLIT, $0-64
	MOVQ q+0(FP), R8
	MOVQ ldq+8(FP), R9
	LEAQ (R9)(R9*2), R10
	MOVQ k+16(FP), SI
	MOVQ ldk+24(FP), BX
	LEAQ (BX)(BX*2), DX
	MOVQ BX, R11
	SHLQ $4, R11
	MOVQ BX, R15
	SUBQ dBytes+56(FP), R15
	MOVQ s+32(FP), DI
	MOVQ n4+48(FP), AX

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
	MOVQ   dBytes+56(FP), CX
	LEAQ   (SI)(R11*1), R12
	LEAQ   (R12)(CX*1), R13
	SHRQ   $6, CX

chunk4:
	VMOVUPS     (SI), Z20
	VMOVUPS     (SI)(BX*1), Z21
	VMOVUPS     (SI)(BX*2), Z22
	VMOVUPS     (SI)(DX*1), Z23
	VMOVUPS     (R8), Z16
	VMOVUPS     (R8)(R9*1), Z17
	VMOVUPS     (R8)(R9*2), Z18
	VMOVUPS     (R8)(R10*1), Z19
	PREFETCHT0  (R12)
	PREFETCHT0  64(R12)
	PREFETCHT0  128(R12)
	PREFETCHT0  192(R12)
	ADDQ        $256, R12
	CMPQ        R12, R13
	JB          samerow4
	ADDQ        R15, R12
	ADDQ        BX, R13

samerow4:
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z21, Z16, Z1
	VFMADD231PS Z22, Z16, Z2
	VFMADD231PS Z23, Z16, Z3
	VFMADD231PS Z20, Z17, Z4
	VFMADD231PS Z21, Z17, Z5
	VFMADD231PS Z22, Z17, Z6
	VFMADD231PS Z23, Z17, Z7
	VFMADD231PS Z20, Z18, Z8
	VFMADD231PS Z21, Z18, Z9
	VFMADD231PS Z22, Z18, Z10
	VFMADD231PS Z23, Z18, Z11
	VFMADD231PS Z20, Z19, Z12
	VFMADD231PS Z21, Z19, Z13
	VFMADD231PS Z22, Z19, Z14
	VFMADD231PS Z23, Z19, Z15
	ADDQ        $64, SI
	ADDQ        $64, R8
	DECQ        CX
	JNZ         chunk4

	// Sum each accumulator's 16 lanes, all 16 at once: lanes 0-3 and 8-11
	// with 4-7 and 12-15 of rows 0 and 1 (2 and 3) of key j in Z(16+j)
	// (Z(20+j)); then lanes 0 and 1 of those, each 128-bit lane of Z(j)
	// four partial sums of row r = lane, key j; then a 4×4 transpose-add
	// leaves in lane r of Z0 the sums of row r, keys 0-3.
	VSHUFF32X4 $0x44, Z4, Z0, Z24
	VSHUFF32X4 $0xEE, Z4, Z0, Z25
	VADDPS     Z25, Z24, Z16
	VSHUFF32X4 $0x44, Z12, Z8, Z26
	VSHUFF32X4 $0xEE, Z12, Z8, Z27
	VADDPS     Z27, Z26, Z20
	VSHUFF32X4 $0x44, Z5, Z1, Z24
	VSHUFF32X4 $0xEE, Z5, Z1, Z25
	VADDPS     Z25, Z24, Z17
	VSHUFF32X4 $0x44, Z13, Z9, Z26
	VSHUFF32X4 $0xEE, Z13, Z9, Z27
	VADDPS     Z27, Z26, Z21
	VSHUFF32X4 $0x44, Z6, Z2, Z24
	VSHUFF32X4 $0xEE, Z6, Z2, Z25
	VADDPS     Z25, Z24, Z18
	VSHUFF32X4 $0x44, Z14, Z10, Z26
	VSHUFF32X4 $0xEE, Z14, Z10, Z27
	VADDPS     Z27, Z26, Z22
	VSHUFF32X4 $0x44, Z7, Z3, Z24
	VSHUFF32X4 $0xEE, Z7, Z3, Z25
	VADDPS     Z25, Z24, Z19
	VSHUFF32X4 $0x44, Z15, Z11, Z26
	VSHUFF32X4 $0xEE, Z15, Z11, Z27
	VADDPS     Z27, Z26, Z23
	VSHUFF32X4 $0x88, Z20, Z16, Z28
	VSHUFF32X4 $0xDD, Z20, Z16, Z29
	VADDPS     Z29, Z28, Z0
	VSHUFF32X4 $0x88, Z21, Z17, Z28
	VSHUFF32X4 $0xDD, Z21, Z17, Z29
	VADDPS     Z29, Z28, Z1
	VSHUFF32X4 $0x88, Z22, Z18, Z28
	VSHUFF32X4 $0xDD, Z22, Z18, Z29
	VADDPS     Z29, Z28, Z2
	VSHUFF32X4 $0x88, Z23, Z19, Z28
	VSHUFF32X4 $0xDD, Z23, Z19, Z29
	VADDPS     Z29, Z28, Z3
	VUNPCKLPS  Z1, Z0, Z24
	VUNPCKHPS  Z1, Z0, Z25
	VADDPS     Z25, Z24, Z26
	VUNPCKLPS  Z3, Z2, Z27
	VUNPCKHPS  Z3, Z2, Z28
	VADDPS     Z28, Z27, Z29
	VUNPCKLPD  Z29, Z26, Z24
	VUNPCKHPD  Z29, Z26, Z25
	VADDPS     Z25, Z24, Z0
	MOVQ          lds+40(FP), CX
	VMOVUPS       X0, (DI)
	VEXTRACTF32X4 $1, Z0, X1
	VMOVUPS       X1, (DI)(CX*1)
	VEXTRACTF32X4 $2, Z0, X2
	VMOVUPS       X2, (DI)(CX*2)
	VEXTRACTF32X4 $3, Z0, X3
	LEAQ          (CX)(CX*2), CX
	VMOVUPS       X3, (DI)(CX*1)
	ADDQ    $16, DI

	// Next four keys: back over the row, down four rows; R8 back to chunk 0.
	MOVQ dBytes+56(FP), CX
	SUBQ CX, R8
	SUBQ CX, SI
	LEAQ (SI)(BX*4), SI
	DECQ AX
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
