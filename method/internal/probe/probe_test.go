package probe

import (
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestProbeMatchesFloat64 recomputes the probe softmax, its vertical sums
// and its diagonal sums in float64 from their definitions. Tolerance 1e-6:
// float32 logits of D=48 unit-Gaussian products are off by about 1e-6
// relative, and probabilities are at most 1.
func TestProbeMatchesFloat64(t *testing.T) {
	r := testutil.Rand(t)
	for _, tc := range []struct {
		nq, nk, n int
		causal    bool
	}{{100, 100, 16, true}, {30, 90, 64, true}, {50, 40, 8, false}, {3, 3, 8, true}} {
		g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: tc.nq, Nk: tc.nk, D: 48, Dv: 48}
		q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: tc.nq, D: 48}, 1)
		k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: tc.nk, D: 48}, 1)
		tl := plan.Tiling{Geometry: g, Causal: tc.causal, BlockQ: 16, BlockK: 16}
		p := Last(tl, q, k, 0, 1, tc.n)
		n := min(tc.n, tc.nq)
		vert := make([]float64, tc.nk)
		slash := make([]float64, 2*tc.nk-1)
		for i := range n {
			tok := tc.nq - n + i
			pos := tok + tc.nk - tc.nq
			if p.Pos[i] != pos {
				t.Fatalf("probe %d at position %d, want %d", i, p.Pos[i], pos)
			}
			w := make([]float64, tc.nk)
			var sum float64
			for j := range tc.nk {
				if tc.causal && j > pos {
					continue
				}
				var s float64
				for d := range 48 {
					s += float64(q.At(0, 1, tok, d)) * float64(k.At(0, 0, j, d))
				}
				w[j] = math.Exp(s / math.Sqrt(48))
				sum += w[j]
			}
			for j := range w {
				w[j] /= sum
				if got := p.Row(i, nil)[j]; math.Abs(w[j]-got) > 1e-6 {
					t.Fatalf("%+v: P[%d][%d] = %v, want %v", tc, i, j, got, w[j])
				}
				vert[j] += w[j]
				slash[pos-j+tc.nk-1] += w[j]
			}
		}
		for j, x := range p.Vertical() {
			if math.Abs(x-vert[j]) > 1e-6*float64(n) {
				t.Fatalf("%+v: vertical[%d] = %v, want %v", tc, j, x, vert[j])
			}
		}
		for d, x := range p.Slash() {
			if math.Abs(x-slash[d]) > 1e-6*float64(n) {
				t.Fatalf("%+v: slash[%d] = %v, want %v", tc, d-tc.nk+1, x, slash[d])
			}
		}
	}
}
