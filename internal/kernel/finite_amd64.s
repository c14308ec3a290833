// AVX2 scans for non-finite elements; see finite_amd64.go.

#include "textflag.h"

DATA f32ExpMask<>+0(SB)/4, $0x7f800000
GLOBL f32ExpMask<>(SB), RODATA|NOPTR, $4

// func nonFiniteGroup32(x *float32, n int) int
// An element is NaN or ±Inf when (bits & 0x7f800000) == 0x7f800000.
TEXT ·nonFiniteGroup32(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VPBROADCASTD f32ExpMask<>(SB), Y15
	XORQ         AX, AX

loop32:
	CMPQ     AX, CX
	JGE      done32
	VPAND    (SI)(AX*4), Y15, Y0
	VPAND    32(SI)(AX*4), Y15, Y1
	VPAND    64(SI)(AX*4), Y15, Y2
	VPAND    96(SI)(AX*4), Y15, Y3
	VPCMPEQD Y15, Y0, Y0
	VPCMPEQD Y15, Y1, Y1
	VPCMPEQD Y15, Y2, Y2
	VPCMPEQD Y15, Y3, Y3
	VPOR     Y1, Y0, Y0
	VPOR     Y3, Y2, Y2
	VPOR     Y2, Y0, Y0
	VPTEST   Y0, Y0
	JNZ      done32
	ADDQ     $32, AX
	JMP      loop32

done32:
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET

// func nonFiniteGroup16(x *uint16, n int, expMask uint16) int
TEXT ·nonFiniteGroup16(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVWLZX      expMask+16(FP), BX
	VMOVD        BX, X15
	VPBROADCASTW X15, Y15
	XORQ         AX, AX

loop16:
	CMPQ     AX, CX
	JGE      done16
	VPAND    (SI)(AX*2), Y15, Y0
	VPAND    32(SI)(AX*2), Y15, Y1
	VPAND    64(SI)(AX*2), Y15, Y2
	VPAND    96(SI)(AX*2), Y15, Y3
	VPCMPEQW Y15, Y0, Y0
	VPCMPEQW Y15, Y1, Y1
	VPCMPEQW Y15, Y2, Y2
	VPCMPEQW Y15, Y3, Y3
	VPOR     Y1, Y0, Y0
	VPOR     Y3, Y2, Y2
	VPOR     Y2, Y0, Y0
	VPTEST   Y0, Y0
	JNZ      done16
	ADDQ     $64, AX
	JMP      loop16

done16:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET
