package selftest

import (
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/method/psa"
)

// TestPSALevelRanges checks the psa judge's level ranges on hand-made rows:
// exact rows give the rule's one level per block, and a perturbation
// widens a range only where a block's preceding mass or rank straddles a
// cut.
func TestPSALevelRanges(t *testing.T) {
	thr := psa.Settings{Rule: psa.Threshold, Cuts: []float64{0.7, 0.9}}
	qnt := psa.Settings{Rule: psa.Quantile, Cuts: []float64{0.5}}
	for _, c := range []struct {
		name   string
		s      psa.Settings
		imp    []float64
		r      float64
		lo, hi []int
	}{
		// Sorted 0.5, 0.375, 0.125: preceding masses 0, 0.5, 0.875, all
		// clear of the cuts: one level each.
		{"threshold exact", thr, []float64{0.5, 0.125, 0.375}, 0, []int{1, 2, 1}, []int{1, 2, 1}},
		// Preceding mass on a cut (0.6 + 0.3 against τ2 = 0.9): the 1e-12
		// slack for float64 sums in another order allows either side.
		{"threshold on τ2", thr, []float64{0.6, 0.1, 0.3}, 0, []int{1, 2, 1}, []int{1, 3, 1}},
		// ±1%: the last block's preceding mass spans 0.891..0.909, across
		// τ2: level 2 or skipped; the others keep their levels.
		{"threshold straddling τ2", thr, []float64{0.6, 0.1, 0.3}, 0.01, []int{1, 2, 1}, []int{1, 3, 1}},
		// 0.5 precedes 0.3 under ±1%, so nothing moves.
		{"threshold clear", thr, []float64{0.5, 0.3, 0.2}, 0.01, []int{1, 1, 2}, []int{1, 1, 2}},
		// An exact tie under the quantile rule (quota 1 of 2): either
		// block may rank first.
		{"quantile tie", qnt, []float64{0.5, 0.5}, 0, []int{1, 1}, []int{2, 2}},
		{"quantile clear", qnt, []float64{0.7, 0.3}, 0.01, []int{1, 2}, []int{1, 2}},
		// No mass: uniform in key order, 1/2 each, exactly.
		{"no mass", thr, []float64{0, 0}, 0.01, []int{1, 1}, []int{1, 1}},
		{"no mass quantile", qnt, []float64{0, 0}, 0.01, []int{1, 2}, []int{1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lo, hi := psaLevelRanges(c.s, c.imp, shares(c.imp), c.r)
			if !slices.Equal(lo, c.lo) || !slices.Equal(hi, c.hi) {
				t.Errorf("ranges %v..%v, want %v..%v", lo, hi, c.lo, c.hi)
			}
		})
	}
}
