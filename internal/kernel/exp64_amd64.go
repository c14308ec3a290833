package kernel

// exp64s is Exp64s with len(dst) == len(src): whole vectors of eight in
// exp64sZ on AVX-512, the rest (and everything elsewhere) one at a time.
func exp64s(dst, src []float64) {
	n := 0
	if hasAVX512 {
		n = len(src) &^ 7
		if n > 0 {
			exp64sZ(&dst[0], &src[0], n)
		}
	}
	exp64sGeneric(dst[n:], src[n:])
}

// exp64sZ writes the canonical exponential of src[0..n) to dst, n a
// positive multiple of 8 (exp64_avx512_amd64.s).
//
//go:noescape
func exp64sZ(dst, src *float64, n int)
