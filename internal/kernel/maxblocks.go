package kernel

// MaxBlocks32 sets dst[i] to the largest of x[i·per : (i+1)·per], for each
// whole block of x (len(x)/per of them), per ≥ 1. It serves PSA's sampling
// estimator, whose per-block largest weights are non-negative
// exponentials: for blocks without NaN the value is the one any maximum
// finds, save the sign of a zero maximum; with a NaN it is unspecified
// (callers detect NaN elsewhere and take a scalar path). Blocks of 16
// values run in AVX-512 where the CPU has it.
//
// It panics only on programmer error: per < 1 or dst too short.
func MaxBlocks32(dst, x []float32, per int) {
	if per < 1 || len(dst) < len(x)/per {
		panic("kernel: MaxBlocks32: bad sizes")
	}
	n := len(x) / per
	if n == 0 {
		return
	}
	maxBlocks32(dst[:n], x[:n*per], per)
}

// maxBlocks32Generic is MaxBlocks32 in Go.
func maxBlocks32Generic(dst, x []float32, per int) {
	for i := range dst {
		blk := x[i*per : (i+1)*per]
		m := blk[0]
		for _, v := range blk[1:] {
			m = max(m, v)
		}
		dst[i] = m
	}
}
