package auto

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestTune tunes two calibration inputs per shape (ragged causal GQA,
// bidirectional with batch 2, suffix queries) and checks each head's
// choice: run by Planner over the whole layer on every calibration input,
// the head's rel L1 against the float64 reference stays within the budget
// plus 1e-4 (the tuner measures against float32 dense attention, whose own
// error against float64 is below 1e-5 here); its recorded sparsity is the
// executor's; and no candidate whose knobs are all within budget up to
// it (the tuner's monotone assumption) is sparser.
func TestTune(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	const budget = 0.05
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
			c := Config{Budget: budget, Methods: methods, Causal: s.Causal, BlockQ: s.BlockQ, BlockK: s.BlockK}
			layer, err := Tune(ctx, c, "l", inputs)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("chosen: %+v", layer.Heads)
			tl := s.Tiling()
			for _, in := range inputs {
				p, err := Planner{Heads: layer.Heads}.Plan(ctx, tl, in.Q, in.K, in.V)
				if err != nil {
					t.Fatal(err)
				}
				out, _ := plantest.Run(t, p, in.Q, in.K, in.V)
				ref := plantest.Reference(t, in.Q, in.K, in.V, s.Causal)
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
					if l1 := diff / sum; l1 > budget+1e-4 {
						t.Errorf("head %d (%s %v): rel L1 %.4f over the budget", h, hd.Method, hd.Knob, l1)
					}
				}
			}
			// Brute force: every candidate on every head and case.
			lp := &layerPlans{cfg: c, inputs: inputs, tiling: tl, plans: map[candidate][]*plan.Plan{}}
			for h, hd := range layer.Heads {
				s := &search{cfg: c, layer: lp, plans: map[candidate][]*plan.Plan{}}
				if s.cfg, err = c.resolved(); err != nil {
					t.Fatal(err)
				}
				for i, in := range inputs {
					for b := range tl.Geometry.B {
						hc, err := newHeadCase(ctx, s.cfg.Executor, plan.Tiling{Geometry: singleHead(tl), Causal: s.cfg.Causal, BlockQ: s.cfg.BlockQ, BlockK: s.cfg.BlockK}, in, tl.Geometry, b, h)
						if err != nil {
							t.Fatal(err)
						}
						hc.input = i
						s.cases = append(s.cases, hc)
					}
				}
				got, err := s.eval(ctx, candidate{hd.Method, hd.Knob})
				if err != nil {
					t.Fatal(err)
				}
				if !got.ok || math.Abs(got.sparsity-hd.Sparsity) > 1e-12 || got.worst != hd.L1 {
					t.Errorf("head %d: recorded %+v, re-measured %+v", h, hd, got)
				}
				for _, m := range methods {
					knobs, _ := Knobs(m)
					for _, k := range knobs {
						o, err := s.eval(ctx, candidate{m, k})
						if err != nil {
							t.Fatal(err)
						}
						if !o.ok {
							break // the tuner assumes no sparser knob fits
						}
						if o.sparsity > hd.Sparsity+1e-12 {
							t.Errorf("head %d: %s at %v reaches sparsity %.4f within budget, the tuner chose %s %v at %.4f", h, m, k, o.sparsity, hd.Method, hd.Knob, hd.Sparsity)
						}
					}
				}
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
		{Config{Budget: 0.05}, []Input{{p.Q, p.K, nil}}, ErrInput},
	} {
		if _, err := Tune(ctx, c.cfg, "l", c.inputs); !errors.Is(err, c.want) {
			t.Errorf("%+v: got %v, want %v", c.cfg, err, c.want)
		}
	}
}
