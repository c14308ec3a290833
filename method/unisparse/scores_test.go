package unisparse

import (
	"context"
	"fmt"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
)

// TestBlockScores checks the exported scores: Top-P over Mass, with the
// outlier query's Block, gives every row of Plan (for each pooling and
// with head compression, and without the outlier query), and Bound and
// OutlierBound are positive and finite.
func TestBlockScores(t *testing.T) {
	s := shapes[0]
	for _, u := range []Planner{{}, {TopP: 0.7, CQ: 8, CK: 8, Pooling: Max}, {TopP: 0.9, CQ: 4, CK: 2, CH: 2}, {TopP: 0.8, CQ: 4, CK: 4, Pooling: Stochastic, Seed: 7}, {NoOutlier: true}} {
		t.Run(fmt.Sprintf("%v,outlier=%v", u.Pooling, !u.NoOutlier), func(t *testing.T) {
			pr := s.Problem(t, testutil.Rand(t), 1, 1)
			tl := pr.Tiling
			c, err := u.config(tl)
			if err != nil {
				t.Skip(err) // a compression factor this shape's blocks do not take
			}
			ctx := context.Background()
			p, err := u.Plan(ctx, tl, pr.Q, pr.K, nil)
			if err != nil {
				t.Fatal(err)
			}
			dense, _ := plan.Dense(tl)
			g := tl.Geometry
			for b := range g.B {
				for h0 := 0; h0 < g.Hq; h0 += c.ch {
					sc, err := u.BlockScores(ctx, tl, pr.Q, pr.K, b, h0)
					if err != nil {
						t.Fatal(err)
					}
					if !(sc.Bound > 0 && sc.Bound < 1e300) {
						t.Fatalf("head %d: Bound %v", h0, sc.Bound)
					}
					if (sc.Outlier == nil) != u.NoOutlier || !u.NoOutlier && !(sc.OutlierBound > 0 && sc.OutlierBound < 1e300) {
						t.Fatalf("head %d: %d outliers, OutlierBound %v", h0, len(sc.Outlier), sc.OutlierBound)
					}
					for qb := range dense.QBlocks() {
						visible, _ := dense.Entries(dense.Row(b, h0, qb))
						kept := make([]bool, len(visible))
						topP(sc.Mass[qb], c.topP, kept)
						if sc.Outlier != nil && sc.Outlier[qb].Block >= 0 {
							kept[sc.Outlier[qb].Block] = true
						}
						want, _ := p.Entries(p.Row(b, h0, qb))
						var got []int32
						for i, kb := range visible {
							if kept[i] {
								got = append(got, kb)
							}
						}
						if len(got) != len(want) {
							t.Fatalf("head %d q block %d: Top-P over the scores keeps %v, Plan %v", h0, qb, got, want)
						}
						for i := range got {
							if got[i] != want[i] {
								t.Fatalf("head %d q block %d: Top-P over the scores keeps %v, Plan %v", h0, qb, got, want)
							}
						}
					}
				}
			}
		})
	}
}
