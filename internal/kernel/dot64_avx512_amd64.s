#include "textflag.h"

// func dot64PanelZ(a *float64, lda int, bt *float32, l int, out *float64)
//
// Z16..Z23 hold the sums of query row r (Z0..Z3 its broadcast element)
// against panel p (Z8, Z9: eight float32 key elements widened to float64):
// row r, panel p in Z(16+2r+p). Each lane adds its products in increasing
// element order, one VFMADD231PD per element, starting from +0.
TEXT ·dot64PanelZ(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), AX
	MOVQ lda+8(FP), BX
	SHLQ $3, BX
	LEAQ (AX)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	MOVQ bt+16(FP), SI
	MOVQ l+24(FP), CX
	MOVQ CX, DX
	SHLQ $5, DX
	LEAQ (SI)(DX*1), DI
	VPXORQ Z16, Z16, Z16
	VPXORQ Z17, Z17, Z17
	VPXORQ Z18, Z18, Z18
	VPXORQ Z19, Z19, Z19
	VPXORQ Z20, Z20, Z20
	VPXORQ Z21, Z21, Z21
	VPXORQ Z22, Z22, Z22
	VPXORQ Z23, Z23, Z23

loop:
	VCVTPS2PD    (SI), Z8
	VCVTPS2PD    (DI), Z9
	VBROADCASTSD (AX), Z0
	VBROADCASTSD (R8), Z1
	VBROADCASTSD (R9), Z2
	VBROADCASTSD (R10), Z3
	VFMADD231PD  Z8, Z0, Z16
	VFMADD231PD  Z9, Z0, Z17
	VFMADD231PD  Z8, Z1, Z18
	VFMADD231PD  Z9, Z1, Z19
	VFMADD231PD  Z8, Z2, Z20
	VFMADD231PD  Z9, Z2, Z21
	VFMADD231PD  Z8, Z3, Z22
	VFMADD231PD  Z9, Z3, Z23
	ADDQ         $32, SI
	ADDQ         $32, DI
	ADDQ         $8, AX
	ADDQ         $8, R8
	ADDQ         $8, R9
	ADDQ         $8, R10
	DECQ         CX
	JNZ          loop

	MOVQ    out+32(FP), DX
	VMOVUPD Z16, (DX)
	VMOVUPD Z17, 64(DX)
	VMOVUPD Z18, 128(DX)
	VMOVUPD Z19, 192(DX)
	VMOVUPD Z20, 256(DX)
	VMOVUPD Z21, 320(DX)
	VMOVUPD Z22, 384(DX)
	VMOVUPD Z23, 448(DX)
	VZEROUPPER
	RET
