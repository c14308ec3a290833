package kernel

// maxBlocks32 is MaxBlocks32 on whole blocks: maxBlocks16Z for blocks of
// 16 on AVX-512, the Go loop otherwise.
func maxBlocks32(dst, x []float32, per int) {
	if hasAVX512 && per == 16 {
		maxBlocks16Z(&dst[0], &x[0], len(dst))
		return
	}
	maxBlocks32Generic(dst, x, per)
}

// maxBlocks16Z writes the largest of each of n ≥ 1 blocks of 16 float32
// values (maxblocks_avx512_amd64.s).
//
//go:noescape
func maxBlocks16Z(dst, x *float32, n int)
