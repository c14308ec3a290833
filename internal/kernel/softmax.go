package kernel

import "math"

// OnlineSoftmax takes one step of the online softmax (FlashAttention-2,
// Dao 2023, Algorithm 1, lines 8–10) for the first m rows of a tile: the
// m×n logits s (row stride lds), whose row maxima mloc the caller has
// taken (MaxRows), against the rows' running maxima mrun and normalizers
// l, and their unnormalized output rows acc (m×dv, row stride ldacc).
// For each row i, with mnew = max(mrun[i], mloc[i]):
//
//   - when mnew is -Inf (nothing visible to the row yet), the row of s is
//     set to 0, sum[i] and lold[i] to 0, and mrun[i], l[i] and acc are
//     left alone;
//   - otherwise α = exp(mrun[i]-mnew) (exactly 1 when mnew = mrun[i]),
//     the row of s becomes exp(s-mnew) and sum[i] its sum, as ExpShift
//     computes them (bit for bit), lold[i] = l[i]·α, l[i] = lold[i]+sum[i],
//     mrun[i] = mnew, and acc's row is multiplied by α (as Scale does)
//     unless α = 1.
//
// α is computed by the same float32 exp as ExpShift's, so every
// implementation gives the same bits. sum and lold let the caller compare
// a block's gain in the normalizer against the old one (S2O's stop rule).
// mloc must not hold NaN (MaxRows never returns it) and mrun must not
// hold NaN or +Inf.
//
// It saves the per-row calls (ExpShift, Scale and the scalar exp of α) of
// a tile of short rows. It panics only on programmer error: negative
// dimensions, strides below the row widths, or slices too short.
func OnlineSoftmax(m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int) {
	if m < 0 || n < 0 || dv < 0 {
		panic("kernel: OnlineSoftmax: negative dimension")
	}
	if m == 0 {
		return
	}
	if len(mloc) < m || len(mrun) < m || len(l) < m || len(sum) < m || len(lold) < m {
		panic("kernel: OnlineSoftmax: a per-row slice is shorter than m")
	}
	if n == 0 || dv == 0 {
		// Nothing to exponentiate or to scale: the portable code handles
		// the degenerate shapes.
		onlineSoftmaxGeneric(m, n, s, lds, mloc, mrun, l, sum, lold, acc, ldacc, dv)
		return
	}
	if !fits(m, n, s, lds) {
		panic("kernel: OnlineSoftmax: s is too short or lds < n")
	}
	if !fits(m, dv, acc, ldacc) {
		panic("kernel: OnlineSoftmax: acc is too short or ldacc < dv")
	}
	onlineSoftmax(m, n, s, lds, mloc, mrun, l, sum, lold, acc, ldacc, dv)
}

// onlineSoftmaxWith is OnlineSoftmax on one-row ExpShift and Scale
// functions (the portable and AVX2 code); α is exp's one-element call.
// The float32 conversions keep the compiler from fusing l·α+sum.
func onlineSoftmaxWith(exp func(dst, src []float32, shift float32) float32, scl func(x []float32, a float32),
	m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int) {
	negInf := float32(math.Inf(-1))
	for i := range m {
		var row []float32
		if n > 0 {
			row = s[i*lds : i*lds+n]
		}
		mnew := max(mrun[i], mloc[i])
		if mnew == negInf {
			clear(row)
			sum[i], lold[i] = 0, 0
			continue
		}
		alpha := float32(1)
		if mnew != mrun[i] {
			x := [1]float32{mrun[i]}
			alpha = exp(x[:], x[:], mnew)
		}
		sm := float32(0)
		if n > 0 {
			sm = exp(row, row, mnew)
		}
		lo := float32(l[i] * alpha)
		sum[i], lold[i] = sm, lo
		l[i] = float32(lo + sm)
		mrun[i] = mnew
		if alpha != 1 && dv > 0 {
			scl(acc[i*ldacc:i*ldacc+dv], alpha)
		}
	}
}

// onlineSoftmaxGeneric is the portable OnlineSoftmax.
func onlineSoftmaxGeneric(m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int) {
	onlineSoftmaxWith(expShiftGeneric, scaleGeneric, m, n, s, lds, mloc, mrun, l, sum, lold, acc, ldacc, dv)
}
