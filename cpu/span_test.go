package cpu

import (
	"context"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestSpans checks that folding consecutive in-place KV blocks in spans
// (span.go) gives what folding them one by one does, within float32
// rounding (2⁻¹⁸ of the largest output: a span takes one row maximum
// where the blocks take one each, so the exponentials and their sums
// round differently), that both match the float64 reference, and that the
// work counters are the same. Decode and short chunks (the runs that read
// K and V in place), MHA and GQA, blocks narrower and wider than a span,
// ragged ends, causal and not, BHND and BNHD, dense plans and random
// sparse ones (whose gaps end spans), with the input check on.
func TestSpans(t *testing.T) {
	r := testutil.Rand(t)
	shapes := []problem{
		{"decode-mha", 1, 4, 4, 1, 1000, 128, 128, 64, 64, true, tensor.Float32, tensor.BHND},
		{"decode-gqa", 1, 8, 2, 1, 1000, 128, 128, 64, 64, true, tensor.Float32, tensor.BHND},
		{"decode-gqa-d64-bk16", 1, 8, 2, 1, 333, 64, 64, 64, 16, true, tensor.Float32, tensor.BHND},
		{"decode-bk-over-span", 1, 2, 2, 1, 700, 64, 64, 64, 300, false, tensor.Float32, tensor.BHND},
		{"decode-bnhd", 2, 4, 2, 1, 517, 96, 96, 64, 32, true, tensor.Float32, tensor.BNHD},
		{"chunk-4", 1, 2, 2, 4, 777, 64, 64, 64, 32, true, tensor.Float32, tensor.BHND},
		{"chunk-9-noncausal", 1, 2, 1, 9, 401, 80, 48, 64, 64, false, tensor.Float32, tensor.BHND},
	}
	for _, pr := range shapes {
		q, k, v := pr.inputs(t, r)
		for _, keep := range []float64{1, 0.6} {
			p, kept := randomPlan(t, r, pr.tiling(), keep)
			want, ws, err := Executor{Workers: 2, noSpans: true, CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatalf("%s keep %v: %v", pr.name, keep, err)
			}
			got, gs, err := Executor{Workers: 2, CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatalf("%s keep %v: %v", pr.name, keep, err)
			}
			gf, wf := got.Float32s(), want.Float32s()
			top := 0.0
			for _, x := range wf {
				top = max(top, math.Abs(float64(x)))
			}
			for i := range wf {
				if math.Abs(float64(gf[i]-wf[i])) > 0x1p-18*top {
					t.Fatalf("%s keep %v: out[%d] = %g, block by block %g", pr.name, keep, i, gf[i], wf[i])
				}
			}
			if gs.DenseBlocks != ws.DenseBlocks || math.Abs(gs.QKBlocks-ws.QKBlocks) > 1e-9*ws.QKBlocks ||
				math.Abs(gs.PVBlocks-ws.PVBlocks) > 1e-9*ws.PVBlocks {
				t.Errorf("%s keep %v: stats %+v, block by block %+v", pr.name, keep, gs, ws)
			}
			ref, err := reference.Attention(context.Background(), q, k, v, pr.causal, 0, func(b, h, i, j int) float64 {
				if kept[[4]int{b, h, i / pr.bq, j / pr.bk}] {
					return 1
				}
				return 0
			})
			if err != nil {
				t.Fatal(err)
			}
			checkClose(t, ref, got)
		}
	}
}

// TestSpanCover checks which plan entries span takes together: only
// consecutive, whole, fully visible blocks at level Full, at most
// spanKeys keys and as many as the tile holds for the rows.
func TestSpanCover(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 1, Nk: 1000, D: 16, Dv: 16}
	cases := []struct {
		name   string
		bk, nq int
		blocks []int32
		levels []plan.Level
		want   int
	}{
		{"consecutive", 64, 1, seq(0, 12), nil, spanKeys / 64},
		{"gap", 64, 1, []int32{0, 1, 3, 4}, nil, 2},
		{"skip-level", 64, 1, []int32{0, 1, 2}, []plan.Level{plan.Full, plan.Skip, plan.Full}, 1},
		{"ragged-last", 64, 1, []int32{14, 15}, nil, 2},
		{"tile-rows", 64, 32, seq(0, 4), nil, 2},
		{"narrow-blocks", 16, 1, seq(0, 62), nil, spanKeys / 16},
		{"wide-blocks", 300, 1, []int32{0, 1}, nil, 1},
	}
	for _, c := range cases {
		p, err := plan.Dense(plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: c.bk})
		if err != nil {
			t.Fatal(err)
		}
		kv, err := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: g.Nk, D: g.D})
		if err != nil {
			t.Fatal(err)
		}
		q, err := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 1, D: g.D})
		if err != nil {
			t.Fatal(err)
		}
		r := &run{p: p, g: g, q: q, k: kv, v: kv, maxLevel: plan.Full, stack: 1}
		r.readInPlace()
		r.pack(0, 1, 1)
		blk := r.block(0, 0, 0, int(c.blocks[0]), plan.Full)
		got, n := r.span(0, 0, 0, c.nq, blk, c.blocks, c.levels)
		r.release()
		if n != c.want {
			t.Errorf("%s: span covers %d entries, want %d", c.name, n, c.want)
		}
		keys := 0
		for _, kb := range c.blocks[:n] {
			keys += min(c.bk, g.Nk-int(kb)*c.bk)
		}
		if got.n != keys {
			t.Errorf("%s: span has %d keys, want %d", c.name, got.n, keys)
		}
	}
}

// seq is the block indices lo..hi-1.
func seq(lo, hi int32) []int32 {
	var s []int32
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

// TestSpanning checks when a run folds spans: keys and values read in
// place and no block-by-block plan feature, in the plan or its Init plan.
func TestSpanning(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 1, Nk: 300, D: 16, Dv: 16}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64}
	dense := func() *plan.Plan {
		p, err := plan.Dense(tl)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	kv, err := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: g.Nk, D: g.D})
	if err != nil {
		t.Fatal(err)
	}
	half, err := tensor.New(tensor.Float16, tensor.BHND, tensor.Shape{B: 1, H: 1, N: g.Nk, D: g.D})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		set     func(p *plan.Plan)
		k       *tensor.Tensor
		noSpans bool
		want    bool
	}{
		{"dense", func(*plan.Plan) {}, kv, false, true},
		{"off", func(*plan.Plan) {}, kv, true, false},
		{"packed-keys", func(*plan.Plan) {}, half, false, false},
		{"stop", func(p *plan.Plan) { p.Stop = &plan.StopRule{Tau: 0.5, After: 1} }, kv, false, false},
		{"filter", func(p *plan.Plan) { p.Filter = &plan.Filter{Lambda: -2, RowGroup: 1} }, kv, false, false},
		{"init-stop", func(p *plan.Plan) {
			p.Init = dense()
			p.Init.Stop = &plan.StopRule{Tau: 0.5, After: 1}
		}, kv, false, false},
		{"init-dense", func(p *plan.Plan) { p.Init = dense() }, kv, false, true},
	}
	for _, c := range cases {
		p := dense()
		c.set(p)
		r := &run{p: p, g: g, k: c.k, v: kv, maxLevel: plan.Full, stack: 1}
		r.readInPlace()
		if got := r.spanning(c.noSpans); got != c.want {
			t.Errorf("%s: spanning = %v, want %v", c.name, got, c.want)
		}
	}
}
