package auto

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestTune tunes two calibration inputs per shape (ragged causal GQA,
// bidirectional with batch 2, suffix queries) and checks the choice. Run
// by Planner over the whole layer on every calibration input, the layer's
// rel L1 against the float64 reference stays within Budget·(1−Margin) and
// each head's within HeadCap, plus 1e-4 (the tuner measures against
// float32 dense attention, whose own error against float64 is below 1e-5
// here); each head's recorded rel L1 and sparsity are the executor's; and
// no single head can move to another candidate (the tuner's monotone
// assumption: along a sweep, up to the first knob over the cap) that is
// sparser and keeps the layer within budget.
func TestTune(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	const budget, margin = 0.05, 0.1
	limit := budget * (1 - margin)
	methods := []string{"sparge", "psa", "window", "xattn", "sparge+psa"}
	for _, s := range []plantest.Shape{
		{Name: "ragged-causal-gqa", B: 1, Hq: 4, Hkv: 2, Nq: 200, Nk: 200, D: 32, BlockQ: 16, BlockK: 16, Causal: true},
		{Name: "bidirectional-batch2", B: 2, Hq: 2, Hkv: 2, Nq: 150, Nk: 150, D: 32, BlockQ: 32, BlockK: 16},
		{Name: "suffix-queries", B: 1, Hq: 2, Hkv: 1, Nq: 64, Nk: 160, D: 32, BlockQ: 16, BlockK: 16, Causal: true},
	} {
		t.Run(s.Name, func(t *testing.T) {
			var inputs []Input
			for range 2 {
				p := s.Problem(t, r, 0.3, 0.3)
				local(p.Q, 4, s.Nk-s.Nq)
				local(p.K, 1, 0)
				inputs = append(inputs, Input{p.Q, p.K, p.V})
			}
			c := Config{Budget: budget, Margin: margin, Methods: methods, Causal: s.Causal, BlockQ: s.BlockQ, BlockK: s.BlockK}
			layer, err := Tune(ctx, c, "l", inputs)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("chosen: %+v, layer rel L1 %.4f, sparsity %.3f", layer.Heads, layer.L1, layer.Sparsity)
			if layer.L1 > limit {
				t.Errorf("recorded layer rel L1 %.4f over %.4f", layer.L1, limit)
			}
			tl := s.Tiling()
			for i, in := range inputs {
				p, err := Planner{Heads: layer.Heads}.Plan(ctx, tl, in.Q, in.K, in.V)
				if err != nil {
					t.Fatal(err)
				}
				out, _ := plantest.Run(t, p, in.Q, in.K, in.V)
				ref := plantest.Reference(t, in.Q, in.K, in.V, s.Causal)
				var layerDiff, layerSum float64
				for h, hd := range layer.Heads {
					var diff, sum float64
					for b := range s.B {
						for n := range s.Nq {
							for d := range s.D {
								x := ref.At(b, h, n, d)
								diff += math.Abs(x - float64(out.At(b, h, n, d)))
								sum += math.Abs(x)
							}
						}
					}
					layerDiff, layerSum = layerDiff+diff, layerSum+sum
					if l1 := diff / sum; l1 > 3*budget+1e-4 {
						t.Errorf("input %d head %d (%s %v): rel L1 %.4f over the head cap", i, h, hd.Method, hd.Knob, l1)
					}
				}
				if l1 := layerDiff / layerSum; l1 > limit+1e-4 {
					t.Errorf("input %d: layer rel L1 %.4f over the budget %.4f", i, l1, limit)
				}
			}
			// Brute force: every head's candidates re-measured, then every
			// single-head move tried against the layer budget.
			rc, err := c.resolved()
			if err != nil {
				t.Fatal(err)
			}
			lp := &layerPlans{cfg: rc, inputs: inputs, tiling: tl, plans: map[candidate][]*plan.Plan{}}
			fronts := make([]frontier, len(layer.Heads))
			cur := make([]option, len(layer.Heads))
			for h, hd := range layer.Heads {
				s := &search{cfg: rc, layer: lp, plans: map[candidate][]*plan.Plan{}, inputs: len(inputs)}
				for i, in := range inputs {
					for b := range tl.Geometry.B {
						hc, err := newHeadCase(ctx, rc.Executor, plan.Tiling{Geometry: singleHead(tl), Causal: rc.Causal, BlockQ: rc.BlockQ, BlockK: rc.BlockK}, in, tl.Geometry, b, h)
						if err != nil {
							t.Fatal(err)
						}
						hc.input = i
						s.cases = append(s.cases, hc)
					}
				}
				fronts[h] = frontier{abs: make([]float64, len(inputs))}
				for _, hc := range s.cases {
					fronts[h].abs[hc.input] += hc.denseAbs
				}
				if hd.Method == Dense {
					cur[h] = option{c: candidate{method: Dense}, diff: make([]float64, len(inputs))}
				} else {
					got, ok, err := s.eval(ctx, candidate{hd.Method, hd.Knob})
					if err != nil {
						t.Fatal(err)
					}
					if !ok || math.Abs(got.sparsity-hd.Sparsity) > 1e-12 || got.worst != hd.L1 {
						t.Errorf("head %d: recorded %+v, re-measured %+v (within cap: %v)", h, hd, got, ok)
					}
					cur[h] = got
				}
				for _, m := range methods {
					knobs, _ := Knobs(m)
					for _, k := range knobs {
						o, ok, err := s.eval(ctx, candidate{m, k})
						if err != nil {
							t.Fatal(err)
						}
						if !ok {
							break // the tuner assumes no sparser knob fits the cap
						}
						fronts[h].options = append(fronts[h].options, o)
					}
				}
			}
			var total []float64
			for i := range inputs {
				var w float64
				for _, f := range fronts {
					w += f.abs[i]
				}
				total = append(total, w)
			}
			layerL1 := func(i int) float64 {
				var d float64
				for _, o := range cur {
					d += o.diff[i]
				}
				return d / total[i]
			}
			for h, f := range fronts {
				for _, o := range f.options {
					if o.sparsity <= cur[h].sparsity+1e-12 {
						continue
					}
					fits := true
					for i := range inputs {
						fits = fits && layerL1(i)+(o.diff[i]-cur[h].diff[i])/total[i] <= limit
					}
					if fits {
						t.Errorf("head %d: %s at %v (sparsity %.4f) fits the layer budget, the tuner kept %s %v at %.4f",
							h, o.c.method, o.c.knob, o.sparsity, layer.Heads[h].Method, layer.Heads[h].Knob, cur[h].sparsity)
					}
				}
			}
		})
	}
}

// TestAllocate checks the budget sharing on hand-made frontiers whose best
// allocation is known.
func TestAllocate(t *testing.T) {
	opt := func(diff, sp float64) option { return option{diff: []float64{diff}, sparsity: sp} }
	one := []float64{1}
	for _, tc := range []struct {
		name   string
		fronts []frontier
		limit  float64
		want   []int
	}{{
		// Head 0 buys sparsity cheaply; head 1 dearly. Per head at 0.05,
		// head 0 would stop at 0.5; shared, head 0 spends 0.08 of its own
		// and head 1 0.02 (layer 0.05).
		name: "share",
		fronts: []frontier{
			{abs: one, options: []option{opt(0, 0), opt(0.02, 0.5), opt(0.08, 0.9)}},
			{abs: one, options: []option{opt(0, 0), opt(0.02, 0.1), opt(0.2, 0.3)}},
		},
		limit: 0.0501, want: []int{2, 1},
	}, {
		// The greedy's best rate (head 0's big step) does not fit; the
		// final pass still fills the budget with head 1's smaller one.
		name: "fill",
		fronts: []frontier{
			{abs: one, options: []option{opt(0, 0), opt(0.3, 0.9)}},
			{abs: one, options: []option{opt(0, 0), opt(0.04, 0.2), opt(0.06, 0.25)}},
		},
		limit: 0.025, want: []int{0, 1},
	}, {
		// A dominated option (more error, less sparsity) is never taken,
		// and a cheaper option that is sparser than dense is the start.
		name: "dominated",
		fronts: []frontier{
			{abs: one, options: []option{opt(0, 0), opt(0, 0.1), opt(0.04, 0.05), opt(0.04, 0.6)}},
		},
		limit: 0.05, want: []int{3},
	}, {
		// Heads weigh by their Σ|O|: the heavy head's error counts 9×.
		name: "weights",
		fronts: []frontier{
			{abs: []float64{9}, options: []option{opt(0, 0), opt(0.9, 0.5)}},
			{abs: one, options: []option{opt(0, 0), opt(0.5, 0.5)}},
		},
		limit: 0.06, want: []int{0, 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, l1 := allocate(tc.fronts, tc.limit)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("picks %v, want %v", got, tc.want)
			}
			if l1 > tc.limit {
				t.Errorf("layer rel L1 %v over %v", l1, tc.limit)
			}
		})
	}
}

// local adds scale·(cos(ω_d·(n+off)), sin(ω_d·(n+off)), ...) to every row
// n of x, with frequencies ω_d spread over 0.05..1 rad per token: queries
// and keys then score highest near their own position, so attention is
// local and sparse, as real attention mostly is.
func local(x *tensor.Tensor, scale float64, off int) {
	s := x.Shape()
	row := make([]float32, s.D)
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				x.ReadRow(b, h, n, row)
				for d := 0; d+1 < s.D; d += 2 {
					w := 0.05 + 0.95*float64(d)/float64(s.D)
					row[d] += float32(scale * math.Cos(w*float64(n+off)))
					row[d+1] += float32(scale * math.Sin(w*float64(n+off)))
				}
				x.WriteRow(b, h, n, row)
			}
		}
	}
}

func singleHead(t plan.Tiling) (g tensor.Geometry) {
	g = t.Geometry
	g.B, g.Hq, g.Hkv = 1, 1, 1
	return g
}

// TestTuneErrors checks the typed errors of bad budgets and inputs.
func TestTuneErrors(t *testing.T) {
	s := plantest.Awkward()[0]
	p := s.Problem(t, testutil.Rand(t), 1, 1)
	in := []Input{{p.Q, p.K, p.V}}
	ctx := context.Background()
	for _, c := range []struct {
		cfg    Config
		inputs []Input
		want   error
	}{
		{Config{Budget: 0}, in, ErrBudget},
		{Config{Budget: math.NaN()}, in, ErrBudget},
		{Config{Budget: 1}, in, ErrBudget},
		{Config{Budget: 0.05}, nil, ErrInput},
		{Config{Budget: 0.05, Methods: []string{"s2o"}}, in, ErrProfile},
		{Config{Budget: 0.05, Workers: -1}, in, ErrInput},
		{Config{Budget: 0.05, Margin: 1}, in, ErrBudget},
		{Config{Budget: 0.05, Margin: -0.1}, in, ErrBudget},
		{Config{Budget: 0.05, HeadCap: 2}, in, ErrBudget},
		{Config{Budget: 0.05}, []Input{{p.Q, p.K, nil}}, ErrInput},
	} {
		if _, err := Tune(ctx, c.cfg, "l", c.inputs); !errors.Is(err, c.want) {
			t.Errorf("%+v: got %v, want %v", c.cfg, err, c.want)
		}
	}
}
