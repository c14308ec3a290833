package kernel

func onlineSoftmax(m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int) {
	switch {
	case hasAVX512:
		onlineSoftmaxAVX512(m, n, s, lds, mloc, mrun, l, sum, lold, acc, ldacc, dv)
	case hasAVX2:
		onlineSoftmaxWith(expShiftAVX2, scaleAVX2, m, n, s, lds, mloc, mrun, l, sum, lold, acc, ldacc, dv)
	default:
		onlineSoftmaxGeneric(m, n, s, lds, mloc, mrun, l, sum, lold, acc, ldacc, dv)
	}
}

// onlineSoftmaxAVX512 is OnlineSoftmax on softmaxRowsZ; m, n, dv ≥ 1 and
// the slices checked.
func onlineSoftmaxAVX512(m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int) {
	softmaxRowsZ(&s[0], lds*4, m, n, &mloc[0], &mrun[0], &l[0], &sum[0], &lold[0], &acc[0], ldacc*4, dv)
}

// softmaxRowsZ is OnlineSoftmax for m, n, dv ≥ 1, strides in bytes
// (softmax_avx512_amd64.s).
//
//go:noescape
func softmaxRowsZ(s *float32, lds, m, n int, mloc, mrun, l, sum, lold, acc *float32, ldacc, dv int)
