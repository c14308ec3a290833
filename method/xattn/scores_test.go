package xattn

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/plan"
)

// TestBlockScores checks the exported scores: Select over Mass gives every
// row of Plan, and Bound is at least the largest |logit| computed from the
// float64 definition (naiveLogitBound).
func TestBlockScores(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, _, tl := inputs(t, s)
			x := Planner{Stride: s.stride, Threshold: 0.8}
			ctx := context.Background()
			p, err := x.Plan(ctx, tl, q, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			dense, _ := plan.Dense(tl)
			g := tl.Geometry
			for b := range g.B {
				for h := range g.Hq {
					sc, err := x.BlockScores(ctx, tl, q, k, b, h)
					if err != nil {
						t.Fatal(err)
					}
					for qb := range dense.QBlocks() {
						visible, _ := dense.Entries(dense.Row(b, h, qb))
						want, _ := p.Entries(p.Row(b, h, qb))
						if got := Select(dense, qb, visible, sc.Mass[qb], x.Threshold); !slices.Equal(got, want) {
							t.Fatalf("head %d q block %d: Select over the scores keeps %v, Plan %v", h, qb, got, want)
						}
					}
					// The largest |Σ q·k| · scale/S over every pair of groups.
					scale := 1 / math.Sqrt(float64(g.D)) / float64(s.stride)
					var most float64
					for i := 0; i < g.Nq; i += s.stride {
						for j := 0; j < g.Nk; j += s.stride {
							var a float64
							for u := range s.stride {
								qi, kj := i+s.stride-1-u, j+u
								if qi >= g.Nq || kj >= g.Nk {
									continue
								}
								for d := range g.D {
									a += math.Abs(float64(q.At(b, h, qi, d)) * float64(k.At(b, g.KVHead(h), kj, d)))
								}
							}
							most = max(most, a*scale)
						}
					}
					if !(sc.Bound >= most*(1-1e-12)) {
						t.Fatalf("head %d: Bound %v below the largest Σ|q·k|·scale/S %v", h, sc.Bound, most)
					}
				}
			}
		})
	}
}
