package kernel

// dot64Panel8 is Dot64Panel8 for l ≥ 1: dot64Panel8Z on AVX-512.
func dot64Panel8(a []float64, lda, l int, bt []float32, out []float64) {
	if hasAVX512 {
		dot64Panel8Z(&a[0], lda, &bt[0], l, &out[0])
		return
	}
	dot64Panel8Generic(a, lda, l, bt, out)
}

// dot64Panel8Z is Dot64Panel8 for l ≥ 1 on sixteen AVX-512 double
// accumulators (8 query rows × 2 panels), dot64x8_avx512_amd64.s.
//
//go:noescape
func dot64Panel8Z(a *float64, lda int, bt *float32, l int, out *float64)
