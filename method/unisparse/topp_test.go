package unisparse

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
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
