package unisparse

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
)

// TestScorerTopPMatchesTopP checks the scorer's topP (reused order, pdqsort
// with a key-order tie-break) against the package's topP (stable sort, a
// fresh order per row) on rows of 0 to 300 masses: random, with many ties,
// all zero, with a NaN, for p in (0, 1]. The kept sets must be equal.
func TestScorerTopPMatchesTopP(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	var s scorer
	for n := 0; n <= 300; n += 1 + n/8 {
		for trial := range 6 {
			mass := make([]float64, n)
			for i := range mass {
				switch trial {
				case 0:
					mass[i] = r.Float64()
				case 1:
					mass[i] = float64(r.IntN(4)) / 8 // ties
				case 2: // all zero
				case 3:
					mass[i] = r.ExpFloat64()
					if i == n/2 {
						mass[i] = math.NaN()
					}
				default:
					mass[i] = math.Pow(r.Float64(), 8)
				}
			}
			for _, p := range []float64{0.05, 0.5, 0.9, 0.95, 0.999, 1} {
				want, got := make([]bool, n), make([]bool, n)
				topP(mass, p, want)
				s.topP(mass, p, got)
				if !slices.Equal(got, want) {
					t.Fatalf("n=%d trial %d p=%v: kept %v, want %v", n, trial, p, got, want)
				}
			}
		}
	}
}

// topP is the reference of scorer.topP, with a stable sort and an
// allocation per row: it marks in kept the fewest blocks, heaviest first,
// whose mass reaches p of the row's total (UniSparse §4.3, Eq. 6); ties
// keep key order. p = 1 keeps every block; a row without mass keeps none.
// The total is plan.Sum64's and the running sum adds in the sorted order.
func topP(mass []float64, p float64, kept []bool) {
	clear(kept)
	total := plan.Sum64(mass)
	if total == 0 {
		return
	}
	if p >= 1 {
		for i := range kept {
			kept[i] = true
		}
		return
	}
	order := make([]int, len(mass))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case mass[a] > mass[b]:
			return -1
		case mass[a] < mass[b]:
			return 1
		}
		return 0
	})
	var cum float64
	for _, i := range order {
		kept[i] = true
		cum += mass[i]
		if cum >= p*total {
			return
		}
	}
}
