package kernel

// blockMaxShift is BlockMaxShift on checked sizes: blockMaxShiftZ for
// blocks of a multiple of 8 values on AVX-512, the Go loop otherwise.
func blockMaxShift(x, l []float64, per int, mb []float64) {
	if hasAVX512 && per%8 == 0 {
		blockMaxShiftZ(&x[0], &l[0], per, len(mb), &mb[0])
		return
	}
	blockMaxShiftGeneric(x, l, per, mb)
}

// blockMaxShiftZ is BlockMaxShift for per a positive multiple of 8 and
// nb ≥ 1 blocks (blockmax_avx512_amd64.s).
//
//go:noescape
func blockMaxShiftZ(x, l *float64, per, nb int, mb *float64)
