package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot64PanelIsCanonical checks Dot64Panel against the canonical
// sequential float64 dot product (plan.Dot64's loop: float32 operands
// widened, products added in increasing order from +0) bit for bit, on
// lengths from 1 to beyond the caches, row strides above the length, and
// operands with zeros of both signs, subnormals, huge values and
// infinities. NaN results only need to agree on being NaN (payloads are
// not part of the canonical value).
func TestDot64PanelIsCanonical(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-40, 3e38, -3e38, float32(math.Inf(1)), float32(math.Inf(-1))}
	draw := func(special bool) float32 {
		if special && r.IntN(16) == 0 {
			return specials[r.IntN(len(specials))]
		}
		return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(40)-20)))
	}
	for _, l := range []int{0, 1, 2, 7, 128, 2048, 3001} {
		for _, special := range []bool{false, true} {
			lda := l + r.IntN(3)
			a := make([]float64, 3*lda+l)
			for i := range a {
				a[i] = float64(draw(special))
			}
			bt := make([]float32, 2*Dot64Lanes*l)
			for i := range bt {
				bt[i] = draw(special)
			}
			out := make([]float64, 64)
			for i := range out {
				out[i] = math.NaN() // must be overwritten
			}
			Dot64Panel(a, lda, l, bt, out)
			for row := range 4 {
				for j := range 2 * Dot64Lanes {
					p, c := j/Dot64Lanes, j%Dot64Lanes
					var s float64
					for e := range l {
						s += a[row*lda+e] * float64(bt[p*Dot64Lanes*l+e*Dot64Lanes+c])
					}
					got := out[row*2*Dot64Lanes+j]
					if math.Float64bits(got) != math.Float64bits(s) && !(math.IsNaN(got) && math.IsNaN(s)) {
						t.Fatalf("l=%d special=%v row %d key %d: %v (%#x), want %v (%#x)", l, special, row, j, got, math.Float64bits(got), s, math.Float64bits(s))
					}
				}
			}
		}
	}
}
