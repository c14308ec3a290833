#include "textflag.h"

// func dot64Panel8Z(a *float64, lda int, bt *float32, l int, out *float64)
//
// Z16..Z31 hold the sums of query row r against panel p in Z(16+2r+p); Z8
// and Z9 are eight float32 key elements of each panel widened to float64,
// Z0..Z7 the rows' broadcast element. Each lane adds its products in
// increasing element order, one VFMADD231PD per element (the product of
// two float32 values is exact in float64, so the fused add rounds as a
// separate one would), starting from +0. Row r's element is read at
// a + r·lda: AX and R8..R10 address rows 0-3, R11..R14 rows 4-7.
TEXT ·dot64Panel8Z(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), AX
	MOVQ lda+8(FP), BX
	SHLQ $3, BX
	LEAQ (AX)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*1), R12
	LEAQ (R12)(BX*1), R13
	LEAQ (R13)(BX*1), R14
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
	VPXORQ Z24, Z24, Z24
	VPXORQ Z25, Z25, Z25
	VPXORQ Z26, Z26, Z26
	VPXORQ Z27, Z27, Z27
	VPXORQ Z28, Z28, Z28
	VPXORQ Z29, Z29, Z29
	VPXORQ Z30, Z30, Z30
	VPXORQ Z31, Z31, Z31

loop:
	VCVTPS2PD    (SI), Z8
	VCVTPS2PD    (DI), Z9
	VBROADCASTSD (AX), Z0
	VBROADCASTSD (R8), Z1
	VBROADCASTSD (R9), Z2
	VBROADCASTSD (R10), Z3
	VBROADCASTSD (R11), Z4
	VBROADCASTSD (R12), Z5
	VBROADCASTSD (R13), Z6
	VBROADCASTSD (R14), Z7
	VFMADD231PD  Z8, Z0, Z16
	VFMADD231PD  Z9, Z0, Z17
	VFMADD231PD  Z8, Z1, Z18
	VFMADD231PD  Z9, Z1, Z19
	VFMADD231PD  Z8, Z2, Z20
	VFMADD231PD  Z9, Z2, Z21
	VFMADD231PD  Z8, Z3, Z22
	VFMADD231PD  Z9, Z3, Z23
	VFMADD231PD  Z8, Z4, Z24
	VFMADD231PD  Z9, Z4, Z25
	VFMADD231PD  Z8, Z5, Z26
	VFMADD231PD  Z9, Z5, Z27
	VFMADD231PD  Z8, Z6, Z28
	VFMADD231PD  Z9, Z6, Z29
	VFMADD231PD  Z8, Z7, Z30
	VFMADD231PD  Z9, Z7, Z31
	ADDQ         $32, SI
	ADDQ         $32, DI
	ADDQ         $8, AX
	ADDQ         $8, R8
	ADDQ         $8, R9
	ADDQ         $8, R10
	ADDQ         $8, R11
	ADDQ         $8, R12
	ADDQ         $8, R13
	ADDQ         $8, R14
	DECQ         CX
	JNZ          loop

	MOVQ    out+32(FP), DX
	VMOVUPD Z16, 0(DX)
	VMOVUPD Z17, 64(DX)
	VMOVUPD Z18, 128(DX)
	VMOVUPD Z19, 192(DX)
	VMOVUPD Z20, 256(DX)
	VMOVUPD Z21, 320(DX)
	VMOVUPD Z22, 384(DX)
	VMOVUPD Z23, 448(DX)
	VMOVUPD Z24, 512(DX)
	VMOVUPD Z25, 576(DX)
	VMOVUPD Z26, 640(DX)
	VMOVUPD Z27, 704(DX)
	VMOVUPD Z28, 768(DX)
	VMOVUPD Z29, 832(DX)
	VMOVUPD Z30, 896(DX)
	VMOVUPD Z31, 960(DX)
	VZEROUPPER
	RET
