#include "textflag.h"

// func prefetchT1(p *float32, rows, n, ld int)
// For each row: PREFETCHT1 at every 64-byte step of its n bytes, and at its
// last byte (the line that a run not aligned to 64 bytes ends in).
TEXT ·prefetchT1(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ rows+8(FP), CX
	MOVQ n+16(FP), DX
	MOVQ ld+24(FP), R8
	LEAQ -1(DX), R9   // offset of the last byte
row:
	XORQ AX, AX
line:
	PREFETCHT1 (SI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, DX
	JLT  line
	PREFETCHT1 (SI)(R9*1)
	ADDQ R8, SI
	DECQ CX
	JNZ  row
	RET
