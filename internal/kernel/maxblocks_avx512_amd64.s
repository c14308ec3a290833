#include "textflag.h"

// func maxBlocks16Z(dst, x *float32, n int)
//
// Each block of 16 values: one load, reduced 16 → 8 → 4 → 2 → 1 lanes with
// VMAXPS, the lowest lane stored. Two blocks per iteration when possible.
TEXT ·maxBlocks16Z(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $2
	JLT  one

two:
	VMOVUPS       (SI), Z0
	VMOVUPS       64(SI), Z4
	VEXTRACTF32X8 $1, Z0, Y1
	VEXTRACTF32X8 $1, Z4, Y5
	VMAXPS        Y1, Y0, Y0
	VMAXPS        Y5, Y4, Y4
	VEXTRACTF128  $1, Y0, X1
	VEXTRACTF128  $1, Y4, X5
	VMAXPS        X1, X0, X0
	VMAXPS        X5, X4, X4
	VPERMILPS     $0x4e, X0, X1
	VPERMILPS     $0x4e, X4, X5
	VMAXPS        X1, X0, X0
	VMAXPS        X5, X4, X4
	VPERMILPS     $0xb1, X0, X1
	VPERMILPS     $0xb1, X4, X5
	VMAXPS        X1, X0, X0
	VMAXPS        X5, X4, X4
	VMOVSS        X0, (DI)
	VMOVSS        X4, 4(DI)
	ADDQ          $128, SI
	ADDQ          $8, DI
	SUBQ          $2, CX
	CMPQ          CX, $2
	JGE           two

one:
	TESTQ         CX, CX
	JZ            done
	VMOVUPS       (SI), Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSS        X0, (DI)

done:
	VZEROUPPER
	RET
