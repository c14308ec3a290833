package oracle

import (
	"context"
	"errors"
	"math"
	"sort"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestKeepsSmallestSetReachingCDF recomputes the block masses in float64
// and checks that each row keeps the heaviest blocks, that they reach the
// threshold, and that one block fewer would not.
func TestKeepsSmallestSetReachingCDF(t *testing.T) {
	r := testutil.Rand(t)
	for _, causal := range []bool{true, false} {
		g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 100, Nk: 100, D: 32, Dv: 32}
		q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 100, D: 32}, 2)
		k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 100, D: 32}, 1)
		tl := plan.Tiling{Geometry: g, Causal: causal, BlockQ: 16, BlockK: 16}
		const cdf = 0.8
		p, err := Planner{CDF: cdf}.Plan(context.Background(), tl, q, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Misshapen inputs are an error, not a panic.
		if _, err := (Planner{CDF: cdf}).Plan(context.Background(), tl, k, q, nil); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("swapped q and k: %v, want plan.ErrInvalid", err)
		}
		if _, err := (Planner{CDF: cdf}).Plan(context.Background(), tl, nil, k, nil); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("nil q: %v, want plan.ErrInvalid", err)
		}
		for h := range 2 {
			for qb := range p.QBlocks() {
				qlo, qhi := p.QueryRange(qb)
				mass := make([]float64, p.KBlocks())
				for i := qlo; i < qhi; i++ {
					logits := make([]float64, g.Nk)
					mx := math.Inf(-1)
					for j := range g.Nk {
						logits[j] = math.Inf(-1)
						if !p.Visible(i, j) {
							continue
						}
						var s float64
						for d := range g.D {
							s += float64(q.At(0, h, i, d)) * float64(k.At(0, 0, j, d))
						}
						logits[j] = s / math.Sqrt(float64(g.D))
						mx = math.Max(mx, logits[j])
					}
					var sum float64
					for _, s := range logits {
						sum += math.Exp(s - mx)
					}
					for j, s := range logits {
						mass[j/16] += math.Exp(s-mx) / sum / float64(qhi-qlo)
					}
				}
				blocks, _ := p.Entries(p.Row(0, h, qb))
				var kept float64
				var keptMasses []float64
				for _, kb := range blocks {
					kept += mass[kb]
					keptMasses = append(keptMasses, mass[kb])
				}
				sort.Float64s(keptMasses)
				if kept < cdf-1e-4 {
					t.Errorf("h%d qb%d: kept mass %.4f < %v", h, qb, kept, cdf)
				}
				if len(keptMasses) > 1 && kept-keptMasses[0] >= cdf+1e-4 {
					t.Errorf("h%d qb%d: dropping the lightest kept block still leaves %.4f ≥ %v", h, qb, kept-keptMasses[0], cdf)
				}
				for kb, m := range mass {
					if m > keptMasses[0]+1e-4 && !contains(blocks, kb) {
						t.Errorf("h%d qb%d: block %d (mass %.4f) dropped while lighter %.4f kept", h, qb, kb, m, keptMasses[0])
					}
				}
			}
		}
	}
	if _, err := (Planner{CDF: 1.5}).Plan(context.Background(), plan.Tiling{}, nil, nil, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("CDF 1.5: %v", err)
	}
}

func contains(blocks []int32, kb int) bool {
	for _, b := range blocks {
		if int(b) == kb {
			return true
		}
	}
	return false
}
