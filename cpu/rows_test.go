package cpu

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestRowGroupsMatchRows checks that running several query blocks of a
// head together (rows) gives exactly, bit for bit, what running them one
// by one (row) gives, with the same work counters: on every awkward shape
// of problems plus long ones, for dense, random block-sparse, stop-rule,
// λ-filter and pooled-level plans, with the input check on, and group
// sizes that do and do not divide the query blocks.
func TestRowGroupsMatchRows(t *testing.T) {
	r := testutil.Rand(t)
	shapes := append([]problem{
		{"long-causal", 1, 2, 1, 200, 200, 64, 64, 16, 16, true, tensor.Float32, tensor.BHND},
		{"long-noncausal-ragged", 1, 2, 2, 150, 170, 40, 24, 16, 32, false, tensor.Float32, tensor.BHND},
	}, problems...)
	kinds := map[string]func(t *testing.T, r *rand.Rand, tl plan.Tiling) *plan.Plan{
		"dense": func(t *testing.T, _ *rand.Rand, tl plan.Tiling) *plan.Plan {
			p, err := plan.Dense(tl)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		"sparse": func(t *testing.T, r *rand.Rand, tl plan.Tiling) *plan.Plan {
			p, _ := randomPlan(t, r, tl, 0.5)
			return p
		},
		"stop": func(t *testing.T, _ *rand.Rand, tl plan.Tiling) *plan.Plan {
			p, _ := plan.Dense(tl)
			p.Stop = &plan.StopRule{Tau: 0.5, After: 1}
			return p
		},
		"filter": func(t *testing.T, _ *rand.Rand, tl plan.Tiling) *plan.Plan {
			p, _ := plan.Dense(tl)
			p.Filter = &plan.Filter{Lambda: -2, RowGroup: 1}
			return p
		},
		"pooled": func(t *testing.T, r *rand.Rand, tl plan.Tiling) *plan.Plan {
			p0, _ := plan.Dense(tl)
			bld, _ := plan.NewBuilder(tl)
			for row := range p0.Rows() {
				qb := row % p0.QBlocks()
				blocks, _ := p0.Entries(row)
				for _, kb := range blocks {
					lv := plan.Full
					if _, partial := p0.BlockVisibility(qb, int(kb)); !partial {
						lv = plan.Level(1 + r.IntN(3))
					}
					bld.Add(row, int(kb), lv)
				}
			}
			p, err := bld.Build()
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
	}
	for _, pr := range shapes {
		q, k, v := pr.inputs(t, r)
		for name, mk := range kinds {
			p := mk(t, r, pr.tiling())
			want, ws, err := Executor{Workers: 2, rowGroup: 1, CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatalf("%s/%s: %v", pr.name, name, err)
			}
			for _, gq := range []int{3, 4} {
				got, gs, err := Executor{Workers: 2, rowGroup: gq, CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
				if err != nil {
					t.Fatalf("%s/%s/group %d: %v", pr.name, name, gq, err)
				}
				gf, wf := got.Float32s(), want.Float32s()
				for i := range wf {
					if math.Float32bits(gf[i]) != math.Float32bits(wf[i]) {
						t.Fatalf("%s/%s/group %d: out[%d] = %g, one block at a time %g", pr.name, name, gq, i, gf[i], wf[i])
					}
				}
				if gs.Stopped != ws.Stopped || math.Abs(gs.QKBlocks-ws.QKBlocks) > 1e-9*ws.QKBlocks ||
					math.Abs(gs.PVBlocks-ws.PVBlocks) > 1e-9*ws.PVBlocks || gs.DenseBlocks != ws.DenseBlocks {
					t.Errorf("%s/%s/group %d: stats %+v, one block at a time %+v", pr.name, name, gq, gs, ws)
				}
			}
		}
	}
}

// TestRowGroupsCheckFinite checks that grouped rows still reject a NaN in
// a value read in place, wherever it sits.
func TestRowGroupsCheckFinite(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 2, 1, 200, 200, 32, 32, 16, 16, true, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	p, _ := plan.Dense(pr.tiling())
	for _, at := range []int{0, 77, 199} {
		v.Float32s()[at*pr.dv+3] = float32(math.NaN())
		_, _, err := Executor{Workers: 2, rowGroup: 4, CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
		var nf *tensor.NonFiniteError
		if !errors.As(err, &nf) {
			t.Errorf("NaN in value row %d: error %v, want a *tensor.NonFiniteError", at, err)
		}
		v.Float32s()[at*pr.dv+3] = 0
	}
}
