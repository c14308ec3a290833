package kernel

// Dot64Lanes is the number of key rows an interleaved panel of Dot64Panel
// holds.
const Dot64Lanes = 8

// Dot64Panel computes the 4×16 float64 dot products of 4 query rows a_r
// (float64, row r at a[r·lda:], length l) with the 16 key rows of two
// interleaved panels: key row p·8+c holds bt[p·8·l + e·8 + c] at element e.
// out[r·16 + p·8 + c] receives
//
//	s = +0; for e := 0; e < l; e++ { s += a_r[e] · float64(key[e]) }
//
// in that order, each product and sum rounded to float64 (plan.Dot64's
// canonical order). The query rows must hold float32 values converted to
// float64, so each product is exact and a fused multiply-add rounds as the
// separate multiply and add do: the vector code gives these bits exactly.
//
// It panics only on programmer error: l < 0, lda < l, or slices too short.
func Dot64Panel(a []float64, lda, l int, bt []float32, out []float64) {
	if l < 0 || lda < l || len(out) < 64 || len(bt) < 2*Dot64Lanes*l || (l > 0 && len(a) < 3*lda+l) {
		panic("kernel: Dot64Panel: bad sizes")
	}
	if l == 0 {
		clear(out[:64])
		return
	}
	dot64Panel(a, lda, l, bt, out)
}

func dot64PanelGeneric(a []float64, lda, l int, bt []float32, out []float64) {
	for r := range 4 {
		ar := a[r*lda : r*lda+l]
		for j := range 2 * Dot64Lanes {
			p, c := j/Dot64Lanes, j%Dot64Lanes
			panel := bt[p*Dot64Lanes*l:]
			var s float64
			for e, x := range ar {
				s += x * float64(panel[e*Dot64Lanes+c])
			}
			out[r*2*Dot64Lanes+j] = s
		}
	}
}
