package xattn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestSelectorMatchesSelect checks the worker's selector (arena, reused
// buffers, pdqsort with a key-order tie-break) against Select (fresh
// slices, stable sort) on every row of causal and non-causal tilings with
// ragged blocks: random masses, many ties, zeros, a NaN, for thresholds
// from 0.05 to 1. The kept lists must be equal, and earlier rows' lists
// must survive later calls (they share the arena).
func TestSelectorMatchesSelect(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	for _, causal := range []bool{true, false} {
		g := tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 1000, Nk: 1100, D: 8, Dv: 8}
		dense, err := plan.Dense(plan.Tiling{Geometry: g, Causal: causal, BlockQ: 16, BlockK: 16})
		if err != nil {
			t.Fatal(err)
		}
		for trial := range 4 {
			for _, th := range []float64{0.05, 0.5, 0.9, 0.95, 1} {
				var sl selector
				var got, want [][]int32
				for qb := range dense.QBlocks() {
					visible, _ := dense.Entries(dense.Row(0, 0, qb))
					mass := make([]float64, dense.KBlocks())
					for i := range mass {
						switch trial {
						case 0:
							mass[i] = r.Float64()
						case 1:
							mass[i] = float64(r.IntN(3)) / 4 // ties and zeros
						case 2:
							mass[i] = math.Pow(r.Float64(), 10)
						default:
							mass[i] = r.Float64()
							if i == qb {
								mass[i] = math.NaN()
							}
						}
					}
					got = append(got, sl.pick(dense, qb, visible, mass, th))
					want = append(want, Select(dense, qb, visible, mass, th))
				}
				for qb := range want {
					if !slices.Equal(got[qb], want[qb]) {
						t.Fatalf("%s: row %d kept %v, want %v", fmt.Sprintf("causal=%v trial %d threshold %v", causal, trial, th), qb, got[qb], want[qb])
					}
				}
			}
		}
	}
}
