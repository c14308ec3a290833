package cpu

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestDiagonalTrim checks that computing diagonal blocks by row panels
// over their visible keys (diag.go) gives what full tiles give: bit for
// bit with the AVX-512 kernels, whose panels and strips the cuts follow,
// and within 2⁻¹⁸ of the largest output otherwise (other kernels' panels
// differ, so the order of a few float32 sums of at most BlockK terms may
// change). Every awkward shape, plus blocks of unequal sizes, chunked
// prefill offsets and ragged ends, dense, stop-rule and λ-filter plans,
// with the input check on, and the work counters the same.
func TestDiagonalTrim(t *testing.T) {
	r := testutil.Rand(t)
	shapes := append([]problem{
		{"bq64-bk32", 1, 2, 1, 200, 200, 64, 64, 64, 32, true, tensor.Float32, tensor.BHND},
		{"bq32-bk64-ragged", 1, 2, 2, 150, 150, 64, 64, 32, 64, true, tensor.Float32, tensor.BHND},
		{"chunk-offset", 1, 2, 2, 90, 217, 96, 96, 64, 64, true, tensor.Float32, tensor.BHND},
		{"bq48-bk40-d128", 1, 1, 1, 131, 131, 128, 128, 48, 40, true, tensor.Float32, tensor.BHND},
	}, problems...)
	exact := kernel.Accelerated() == "avx512"
	kinds := map[string]func(p *plan.Plan){
		"dense":  func(*plan.Plan) {},
		"stop":   func(p *plan.Plan) { p.Stop = &plan.StopRule{Tau: 0.5, After: 1} },
		"filter": func(p *plan.Plan) { p.Filter = &plan.Filter{Lambda: -2, RowGroup: 1} },
	}
	for _, pr := range shapes {
		q, k, v := pr.inputs(t, r)
		for name, set := range kinds {
			p, err := plan.Dense(pr.tiling())
			if err != nil {
				t.Fatal(err)
			}
			set(p)
			want, ws, err := Executor{Workers: 2, noTrim: true, CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatalf("%s/%s: %v", pr.name, name, err)
			}
			got, gs, err := Executor{Workers: 2, CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatalf("%s/%s: %v", pr.name, name, err)
			}
			gf, wf := got.Float32s(), want.Float32s()
			top := 0.0
			for _, x := range wf {
				top = max(top, math.Abs(float64(x)))
			}
			for i := range wf {
				if exact && math.Float32bits(gf[i]) != math.Float32bits(wf[i]) ||
					math.Abs(float64(gf[i]-wf[i])) > 0x1p-18*top {
					t.Fatalf("%s/%s: out[%d] = %g, with full diagonal tiles %g (exact: %v)", pr.name, name, i, gf[i], wf[i], exact)
				}
			}
			// The counters are float sums in the workers' order, which varies.
			if gs.Stopped != ws.Stopped || gs.DenseBlocks != ws.DenseBlocks ||
				math.Abs(gs.QKBlocks-ws.QKBlocks) > 1e-9*ws.QKBlocks || math.Abs(gs.PVBlocks-ws.PVBlocks) > 1e-9*ws.PVBlocks {
				t.Errorf("%s/%s: stats %+v, with full diagonal tiles %+v", pr.name, name, gs, ws)
			}
		}
	}
}

// TestDiagonalTrimCheckFinite checks that a NaN or Inf in a value that no
// row of a diagonal tile folds (past every row's last visible key) is
// still reported, at every key: with 32-query and 64-key blocks, a plan
// whose even query blocks list only their diagonal block and odd ones
// nothing, so that half the keys of every listed block are never folded.
func TestDiagonalTrimCheckFinite(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 1, 1, 128, 128, 16, 16, 32, 64, true, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	d, err := plan.Dense(pr.tiling())
	if err != nil {
		t.Fatal(err)
	}
	bld, err := plan.NewBuilder(pr.tiling())
	if err != nil {
		t.Fatal(err)
	}
	for row := range d.Rows() {
		if qb := row % d.QBlocks(); qb%2 == 0 {
			bld.Add(row, qb/2, plan.Full)
		}
	}
	p, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	vf := v.Float32s()
	for at := range pr.nk {
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
			vf[at*pr.dv+5] = bad
			_, _, err := Executor{Workers: 2, CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
			var nf *tensor.NonFiniteError
			if !errors.As(err, &nf) {
				t.Fatalf("%g in value row %d: error %v, want a *tensor.NonFiniteError", bad, at, err)
			}
			vf[at*pr.dv+5] = 0
		}
	}
}
