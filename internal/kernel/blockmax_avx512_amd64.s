#include "textflag.h"

// func blockMaxShiftZ(x, l *float64, per, nb int, mb *float64)
//
// For each of nb blocks of per values (a multiple of 8): VMAXPD over the
// block's vectors into Z0 (from the first vector), reduced 8 → 4 → 2 → 1
// lanes, stored to mb and broadcast to Z1; then each vector of the block
// minus Z1 (VSUBPD: the scalar subtraction's rounding) to x.
TEXT ·blockMaxShiftZ(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), DI
	MOVQ l+8(FP), SI
	MOVQ per+16(FP), DX
	SHRQ $3, DX
	MOVQ nb+24(FP), CX
	MOVQ mb+32(FP), R8

block:
	VMOVUPD (SI), Z0
	LEAQ    64(SI), R9
	MOVQ    DX, R10
	DECQ    R10
	JZ      reduce

maxloop:
	VMAXPD (R9), Z0, Z0
	ADDQ   $64, R9
	DECQ   R10
	JNZ    maxloop

reduce:
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPD        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPD        X1, X0, X0
	VPERMILPD     $1, X0, X1
	VMAXPD        X1, X0, X0
	VMOVSD        X0, (R8)
	VBROADCASTSD  X0, Z1
	MOVQ          DX, R10

subloop:
	VMOVUPD (SI), Z2
	VSUBPD  Z1, Z2, Z2
	VMOVUPD Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    R10
	JNZ     subloop

	ADDQ $8, R8
	DECQ CX
	JNZ  block

	VZEROUPPER
	RET
