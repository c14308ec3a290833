package blocksoftmax

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
)

// TestAddMatchesPlan checks Scratch.Add against plan.AddBlockSoftmax bit
// for bit (tolerance none: the device planners repeat the latter's
// arithmetic), one Scratch reused across calls of every size, on rows of 0
// to 300 logits in blocks of 1, 3, 4, 16 and 64 (ragged last blocks
// included), onto masses that already hold values, with logits of the
// planners' range, wide spreads whose shifts fall below Exp64's −708
// cut-off, ties, zeros of both signs (and blocks whose maximum is one),
// −Inf (a masked logit), and rows holding a NaN or +Inf (NaN results only
// need to agree on being NaN).
func TestAddMatchesPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	var s Scratch
	for _, per := range []int{1, 3, 4, 16, 64} {
		for n := 0; n <= 300; n += 1 + n/16 {
			for trial := range 6 {
				l := make([]float64, n)
				for j := range l {
					switch r.IntN(12) {
					case 0:
						l[j] = math.Inf(-1)
					case 1:
						l[j] = math.Copysign(0, -1)
					case 2:
						l[j] = 0
					case 3:
						l[j] = -1000 * r.Float64()
					default:
						l[j] = 8 * r.NormFloat64()
					}
					switch trial {
					case 3:
						l[j] = 1.5 // all tied
					case 4: // zero maxima of either sign
						l[j] = [...]float64{0, math.Copysign(0, -1), -1}[r.IntN(3)]
					case 5: // a NaN or +Inf somewhere
						if j == n/2 {
							l[j] = [...]float64{math.NaN(), math.Inf(1)}[r.IntN(2)]
						}
					}
				}
				nb := (n + per - 1) / per
				want, got := make([]float64, nb), make([]float64, nb)
				for kb := range want {
					want[kb] = r.Float64()
					got[kb] = want[kb]
				}
				plan.AddBlockSoftmax(want, l, per, make([]float64, nb), make([]float64, nb))
				s.Add(got, l, per)
				for kb := range want {
					if math.Float64bits(got[kb]) != math.Float64bits(want[kb]) && !(math.IsNaN(got[kb]) && math.IsNaN(want[kb])) {
						t.Fatalf("per=%d n=%d trial %d: mass[%d] = %v, plan.AddBlockSoftmax %v", per, n, trial, kb, got[kb], want[kb])
					}
				}
			}
		}
	}
}
