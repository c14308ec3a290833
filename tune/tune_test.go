package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

func llmInputs(t testing.TB, n int, seeds ...uint64) []Input {
	t.Helper()
	var out []Input
	for _, s := range seeds {
		w, err := workload.Generate(context.Background(), workload.Config{Kind: workload.LLM, Seed: s, B: 1, Hq: 4, Hkv: 2, N: n, D: 64})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Input{w.Q, w.K, w.V})
	}
	return out
}

func sampleProfile() *Profile {
	return &Profile{Version: Version, Method: "sparge", BlockQ: 128, BlockK: 64, RowGroup: 32, Causal: true, L1: 0.05, L2: 0.06,
		Layers: []Layer{
			{Name: "layers.0.attn", Heads: []Head{{CDF: 0.9, Theta: 0.3, Lambda: -6, L1Mask: 0.04, L1: 0.055, SparsityMask: 0.3, Sparsity: 0.4}, {CDF: 1, Theta: -1}}},
			{Name: "layers.1.attn", Heads: []Head{{CDF: 0.5, Theta: 0.6, L1Mask: 0.01, L1: 0.01, Sparsity: 0.1}}},
		}}
}

func TestProfileRoundTrip(t *testing.T) {
	p := sampleProfile()
	path := filepath.Join(t.TempDir(), "profile.json")
	if err := SaveFile(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip changed the profile:\n got %+v\nwant %+v", got, p)
	}
	opts, err := got.Options("layers.0.attn")
	if err != nil {
		t.Fatal(err)
	}
	want := []sparge.Params{{CDF: 0.9, Theta: 0.3, Lambda: -6}, {CDF: 1, Theta: -1}}
	if pl, ok := opts.Planner.(sparge.Planner); !ok || !reflect.DeepEqual(pl.Heads, want) || pl.RowGroup != 32 || opts.BlockQ != 128 || opts.BlockK != 64 || !opts.Causal {
		t.Errorf("options %+v", opts)
	}
	if _, err := got.Options("nope"); !errors.Is(err, ErrProfile) {
		t.Errorf("unknown layer: %v", err)
	}
}

func TestLoadRejects(t *testing.T) {
	good := func() string {
		var b bytes.Buffer
		if err := Save(&b, sampleProfile()); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}()
	edit := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("sample lacks %q", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	for _, tc := range []struct{ name, data string }{
		{"empty", ""},
		{"not-json", "hello"},
		{"array", "[1,2,3]"},
		{"truncated", good[:len(good)/2]},
		{"trailing", good + "{}"},
		{"unknown-field", edit(`"method"`, `"evil": 1, "method"`)},
		{"wrong-method", edit(`"method": "sparge"`, `"method": "psa"`)},
		{"string-number", edit(`"block_q": 128`, `"block_q": "128"`)},
		{"huge-block", edit(`"block_q": 128`, `"block_q": 1e12`)},
		{"zero-block", edit(`"block_k": 64`, `"block_k": 0`)},
		{"row-group", edit(`"row_group": 32`, `"row_group": 7`)},
		{"l2-below-l1", edit(`"l2": 0.06`, `"l2": 0.01`)},
		{"cdf-range", edit(`"cdf": 0.9`, `"cdf": 7`)},
		{"cdf-zero", edit(`"cdf": 0.9`, `"cdf": 0`)},
		{"lambda-positive", edit(`"lambda": -6`, `"lambda": 6`)},
		{"theta-range", edit(`"theta": 0.3`, `"theta": -3`)},
		{"negative-sparsity", edit(`"sparsity": 0.4`, `"sparsity": -0.4`)},
		{"margin", edit(`"l2": 0.06`, `"l2": 0.06, "margin": 1.5`)},
		{"no-heads", edit(`"heads": [`, `"heads": [], "x": [`)},
		{"duplicate-layer", edit(`"layers.1.attn"`, `"layers.0.attn"`)},
		{"null-layers-heads", edit(`"heads": [`, `"heads": null, "y": [`)},
		{"too-big", `{"version": 1, "method": "` + strings.Repeat("x", MaxProfileBytes) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tc.data))
			if !errors.Is(err, ErrProfile) {
				t.Fatalf("error %v, want ErrProfile", err)
			}
		})
	}
	for _, v := range []string{`"version": 2`, `"version": 0`, `"version": -1`} {
		_, err := Load(strings.NewReader(edit(`"version": 1`, v)))
		var ve *VersionError
		if !errors.As(err, &ve) || !errors.Is(err, ErrProfile) {
			t.Errorf("%s: error %v, want a *VersionError wrapping ErrProfile", v, err)
		}
	}
}

func TestBadBudgets(t *testing.T) {
	in := llmInputs(t, 128, 1)
	for _, tc := range []struct {
		name string
		c    Config
		want error
	}{
		{"l1-zero", Config{L1: 0, L2: 0.1}, ErrBudget},
		{"l1-tiny", Config{L1: 1e-9, L2: 0.1}, ErrBudget},
		{"l2-below-l1", Config{L1: 0.1, L2: 0.05}, ErrBudget},
		{"l1-one", Config{L1: 1, L2: 1}, ErrBudget},
		{"l2-one", Config{L1: 0.05, L2: 1.5}, ErrBudget},
		{"nan", Config{L1: math.NaN(), L2: 0.1}, ErrBudget},
		{"margin", Config{L1: 0.05, L2: 0.06, Margin: 1}, ErrBudget},
		{"cdf-grid", Config{L1: 0.05, L2: 0.06, CDFs: []float64{0.5, 1.5}}, sparge.ErrParams},
		{"theta-grid", Config{L1: 0.05, L2: 0.06, Thetas: []float64{0}}, sparge.ErrParams},
		{"lambda-grid", Config{L1: 0.05, L2: 0.06, Lambdas: []float64{3}}, sparge.ErrParams},
		{"row-group", Config{L1: 0.05, L2: 0.06, RowGroup: 5}, sparge.ErrParams},
		{"block", Config{L1: 0.05, L2: 0.06, BlockQ: -1}, plan.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := TuneLayer(context.Background(), tc.c, "x", in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
	c := Config{L1: 0.05, L2: 0.06}
	if _, err := TuneLayer(context.Background(), c, "x", nil); !errors.Is(err, ErrInput) {
		t.Errorf("no inputs: %v", err)
	}
	other := llmInputs(t, 256, 2)
	if _, err := TuneLayer(context.Background(), c, "x", append(in, other...)); !errors.Is(err, ErrInput) {
		t.Errorf("mixed shapes: %v", err)
	}
}

// headL1 returns the rel L1 of head h of got against ref, over all batches.
func headL1(ref, got *tensor.Tensor, h int) float64 {
	s := ref.Shape()
	a, b := make([]float32, s.D), make([]float32, s.D)
	var num, den float64
	for bb := range s.B {
		for n := range s.N {
			ref.ReadRow(bb, h, n, a)
			got.ReadRow(bb, h, n, b)
			for d := range a {
				num += math.Abs(float64(a[d] - b[d]))
				den += math.Abs(float64(a[d]))
			}
		}
	}
	return num / den
}

// TestTuneMeetsBounds tunes a small causal GQA layer and re-checks, through
// the public API, that every head meets l1 with M_g alone and l2 with λ on
// every calibration input, and that the stage-1 choice is the best of the
// grid when feasibility is monotone in τ (what binary search assumes).
func TestTuneMeetsBounds(t *testing.T) {
	ctx := context.Background()
	in := llmInputs(t, 512, 11, 12)
	c := Config{L1: 0.05, L2: 0.07, Causal: true, BlockQ: 64, BlockK: 32,
		CDFs: []float64{0.5, 0.7, 0.9, 0.95, 0.99}, Thetas: []float64{-1, 0.3, 0.5}, Lambdas: []float64{-12, -8, -5, -3}}
	var calls int
	c.Progress = func(p Progress) { calls++ }
	layer, err := TuneLayer(ctx, c, "l0", in)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 4 {
		t.Errorf("progress called %d times for 4 heads", calls)
	}
	prof, err := NewProfile(c)
	if err != nil {
		t.Fatal(err)
	}
	prof.Set(*layer)
	if err := prof.Validate(); err != nil {
		t.Fatal(err)
	}
	opts, err := prof.Options("l0")
	if err != nil {
		t.Fatal(err)
	}
	var sparsity float64
	for i, x := range in {
		dense, err := sparseattn.Attention(ctx, x.Q, x.K, x.V, sparseattn.Options{Causal: true, BlockQ: 64, BlockK: 32, Planner: sparge.Planner{Params: sparge.Params{CDF: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		var masks sparge.Planner
		for _, hd := range layer.Heads {
			p := hd.Params()
			p.Lambda = 0
			masks.Heads = append(masks.Heads, p)
		}
		maskOnly := opts
		maskOnly.Planner = masks
		for _, o := range []struct {
			opts  sparseattn.Options
			bound float64
		}{{maskOnly, c.L1}, {opts, c.L2}} {
			res, err := sparseattn.Attention(ctx, x.Q, x.K, x.V, o.opts)
			if err != nil {
				t.Fatal(err)
			}
			for h := range layer.Heads {
				if l1 := headL1(dense.Out, res.Out, h); !(l1 < o.bound) {
					t.Errorf("input %d head %d: rel L1 %.4f ≥ %v", i, h, l1, o.bound)
				}
			}
			sparsity = res.Stats.Sparsity()
		}
	}
	t.Logf("heads %+v; layer sparsity %.3f", layer.Heads, sparsity)
	if sparsity <= 0 {
		t.Errorf("no head found any sparsity under l1=%v", c.L1)
	}

	// Exhaustive stage 1 for head 0: the best feasible (τ, θ).
	cases := []*headCase{}
	cr, _ := c.resolved()
	for _, x := range in {
		hc, err := newHeadCase(ctx, cr, x, tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 512, Nk: 512, D: 64, Dv: 64}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, hc)
	}
	s := &search{cfg: cr, cases: cases, memo: map[uint64]result{}}
	bestSp, monotone := 0.0, true
	for _, theta := range cr.Thetas {
		wasOK := false
		for _, cdf := range cr.CDFs {
			ms, _ := s.masks(cdf, theta)
			r, err := s.eval(ctx, ms, 0, c.L1)
			if err != nil {
				t.Fatal(err)
			}
			if wasOK && !r.ok {
				monotone = false
			}
			wasOK = wasOK || r.ok
			if r.ok {
				bestSp = max(bestSp, r.sparsity)
			}
		}
	}
	// Stage 2 only adds sparsity, so the tuned head is at least as sparse.
	if monotone && layer.Heads[0].Sparsity < bestSp-1e-12 {
		t.Errorf("head 0 sparsity %.4f below the exhaustive stage-1 best %.4f", layer.Heads[0].Sparsity, bestSp)
	}
	t.Logf("exhaustive stage-1 best %.4f (feasibility monotone in τ: %v)", bestSp, monotone)
}

// TestMargin: with a margin the calibration errors stay below the
// tightened bounds.
func TestMargin(t *testing.T) {
	in := llmInputs(t, 256, 5)
	c := Config{L1: 0.05, L2: 0.06, Margin: 0.5, Causal: true, BlockQ: 32, BlockK: 32}
	layer, err := TuneLayer(context.Background(), c, "x", in)
	if err != nil {
		t.Fatal(err)
	}
	for h, hd := range layer.Heads {
		if !(hd.L1Mask < 0.025 && hd.L1 < 0.03) {
			t.Errorf("head %d: %+v above l·(1−margin)", h, hd)
		}
	}
	p, _ := NewProfile(c)
	if p.Margin != 0.5 {
		t.Errorf("profile margin %v", p.Margin)
	}
}

// TestTinyBudgetFallsBackToDense: a bound no sparse mask meets leaves every
// head dense rather than failing.
func TestTinyBudgetFallsBackToDense(t *testing.T) {
	in := llmInputs(t, 256, 3)
	// λ −2 only: the default grid's −30 … −8 skip PV products worth less
	// than e^−8 of a row, which the workload's sharpest (slash) heads meet
	// within MinL1.
	layer, err := TuneLayer(context.Background(), Config{L1: MinL1, L2: MinL1, Causal: true, BlockQ: 32, BlockK: 32,
		Thetas: []float64{-1}, CDFs: []float64{0.5, 0.9}, Lambdas: []float64{-2}}, "x", in)
	if err != nil {
		t.Fatal(err)
	}
	for h, hd := range layer.Heads {
		if hd.CDF != 1 || hd.Lambda != 0 || hd.Sparsity != 0 {
			t.Errorf("head %d: %+v, want the dense fallback", h, hd)
		}
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := TuneLayer(ctx, Config{L1: 0.05, L2: 0.06, Causal: true}, "x", llmInputs(t, 256, 1))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func ExampleTuneLayer() {
	ctx := context.Background()
	var inputs []Input
	for seed := range uint64(2) {
		w, err := workload.Generate(ctx, workload.Config{Kind: workload.LLM, Seed: seed, B: 1, Hq: 2, Hkv: 1, N: 512, D: 64})
		if err != nil {
			fmt.Println(err)
			return
		}
		inputs = append(inputs, Input{w.Q, w.K, w.V})
	}
	cfg := Config{L1: 0.05, L2: 0.06, Causal: true, BlockQ: 64, BlockK: 32}
	layer, err := TuneLayer(ctx, cfg, "layers.0.self_attn", inputs)
	if err != nil {
		fmt.Println(err)
		return
	}
	prof, _ := NewProfile(cfg)
	prof.Set(*layer)
	var buf bytes.Buffer
	if err := Save(&buf, prof); err != nil {
		fmt.Println(err)
		return
	}
	loaded, err := Load(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	opts, _ := loaded.Options("layers.0.self_attn")
	res, err := sparseattn.Attention(ctx, inputs[0].Q, inputs[0].K, inputs[0].V, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	dense, _ := sparseattn.Attention(ctx, inputs[0].Q, inputs[0].K, inputs[0].V, sparseattn.Options{Causal: true, BlockQ: 64, BlockK: 32, Planner: sparge.Planner{Params: sparge.Params{CDF: 1}}})
	e, _ := metrics.CompareTensors(dense.Out, res.Out)
	fmt.Println("heads tuned:", len(layer.Heads))
	fmt.Println("layer rel L1 below l2:", e.RelL1 < cfg.L2)
	// Output:
	// heads tuned: 2
	// layer rel L1 below l2: true
}

// TestLambdaStageNonCausal: without causal masking the safest λ skips
// nothing, yet the search must go on to the λ values that do (a
// regression: it used to stop at the first).
func TestLambdaStageNonCausal(t *testing.T) {
	var in []Input
	for seed := range uint64(2) {
		w, err := workload.Generate(context.Background(), workload.Config{Kind: workload.Video, Seed: seed, B: 1, Hq: 2, Hkv: 2, Frames: 4, Height: 8, Width: 8, D: 64})
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, Input{w.Q, w.K, w.V})
	}
	layer, err := TuneLayer(context.Background(), Config{L1: 0.05, L2: 0.2, BlockQ: 32, BlockK: 32, Lambdas: []float64{-40, -3, -1}}, "v", in)
	if err != nil {
		t.Fatal(err)
	}
	for h, hd := range layer.Heads {
		if hd.Lambda == 0 || !(hd.Sparsity > 0) {
			t.Errorf("head %d: %+v; want a λ from the grid under the loose l2", h, hd)
		}
	}
}

// countingExecutor is the CPU executor behind Config.Executor, counting
// its calls.
type countingExecutor struct {
	cpu   cpu.Executor
	calls int
}

func (c *countingExecutor) Run(ctx context.Context, p *plan.Plan, q, k, v, out *tensor.Tensor) (*tensor.Tensor, plan.Stats, error) {
	c.calls++
	return c.cpu.Run(ctx, p, q, k, v, out)
}

// TestExecutor: Config.Executor runs every single-head pass (one per
// evaluation and one dense pass per head case), and an executor that
// computes what the CPU computes gives the same tuned heads.
func TestExecutor(t *testing.T) {
	in := llmInputs(t, 256, 9)
	c := Config{L1: 0.05, L2: 0.06, Causal: true, BlockQ: 32, BlockK: 32}
	want, err := TuneLayer(context.Background(), c, "x", in)
	if err != nil {
		t.Fatal(err)
	}
	ex := &countingExecutor{}
	c.Executor = ex
	evals := 0
	c.Progress = func(p Progress) { evals = p.Evals }
	got, err := TuneLayer(context.Background(), c, "x", in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with Config.Executor: %+v, want %+v", got, want)
	}
	if heads := 4; ex.calls != evals+heads*len(in) {
		t.Errorf("executor ran %d passes, want %d evaluations + %d dense passes", ex.calls, evals, heads*len(in))
	}
}
