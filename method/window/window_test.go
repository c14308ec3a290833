package window

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestPlanMatchesTokenRule checks every block decision against the token
// rule it implements: a block is kept when some causally visible pair in it
// is a sink pair (key < Sink) or a window pair (|query position − key| ≤ Window,
// keys after the query only when not causal).
func TestPlanMatchesTokenRule(t *testing.T) {
	for _, tc := range []struct {
		nq, nk, bq, bk, sink, window int
		causal                       bool
	}{
		{256, 256, 32, 32, 16, 64, true},
		{200, 200, 64, 16, 0, 50, true},
		{1, 500, 64, 64, 64, 100, true},
		{100, 100, 16, 16, 8, 20, false},
		{50, 300, 32, 32, 4, 40, true},
		{64, 64, 16, 16, 0, math.MaxInt, false}, // a window wider than everything keeps everything
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: tc.nq, Nk: tc.nk, D: 8, Dv: 8}, Causal: tc.causal, BlockQ: tc.bq, BlockK: tc.bk}
			p, err := Planner{Sink: tc.sink, Window: tc.window}.Plan(context.Background(), tl, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			off := tc.nk - tc.nq
			for qb := range p.QBlocks() {
				blocks, _ := p.Entries(p.Row(0, 1, qb))
				got := map[int]bool{}
				for _, kb := range blocks {
					got[int(kb)] = true
				}
				for kb := range p.KBlocks() {
					want := false
					qlo, qhi := p.QueryRange(qb)
					klo, khi := p.KeyRange(kb)
					for i := qlo; i < qhi && !want; i++ {
						for j := klo; j < khi && !want; j++ {
							pos := i + off
							if tc.causal && j > pos {
								continue
							}
							want = j < tc.sink || (j >= pos-min(tc.window, 1000) && j <= pos+min(tc.window, 1000))
						}
					}
					if got[kb] != want {
						t.Errorf("q block %d, k block %d: kept %v, want %v", qb, kb, got[kb], want)
					}
				}
			}
		})
	}
	if _, err := (Planner{Sink: -1}).Plan(context.Background(), plan.Tiling{}, nil, nil, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("negative sink: %v", err)
	}
}
