package kernel

// Dot64Panel8 is Dot64Panel on 8 query rows: the 8×16 float64 dot products
// of rows a_r (row r at a[r·lda:], length l, float32 values widened) with
// the 16 key rows of two interleaved panels, out[r·16 + p·8 + c], each
// added from +0 in increasing element order as plan.Dot64 does: the bits
// of two Dot64Panel calls on rows 0–3 and 4–7. Each key element is
// widened once for 8 rows (16 accumulators) instead of 4, which is where
// the 4-row kernel spends issue slots.
//
// It panics only on programmer error: l < 0, lda < l, or slices too short.
func Dot64Panel8(a []float64, lda, l int, bt []float32, out []float64) {
	if l < 0 || lda < l || len(out) < 128 || len(bt) < 2*Dot64Lanes*l || (l > 0 && len(a) < 7*lda+l) {
		panic("kernel: Dot64Panel8: bad sizes")
	}
	if l == 0 {
		clear(out[:128])
		return
	}
	dot64Panel8(a, lda, l, bt, out)
}

// dot64Panel8Generic is Dot64Panel8 as two Dot64Panel calls.
func dot64Panel8Generic(a []float64, lda, l int, bt []float32, out []float64) {
	dot64Panel(a, lda, l, bt, out[:64])
	dot64Panel(a[4*lda:], lda, l, bt, out[64:128])
}
