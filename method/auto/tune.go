package auto

import (
	"context"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Default block sizes of a tuning run: those of sparseattn.Options, so that
// a profile tuned at the defaults runs at the tiling it was tuned for.
const (
	DefaultBlockQ = 64
	DefaultBlockK = 64
)

// DefaultMargin is the share of the budget a tuning run leaves unspent
// by default (Config.Margin), headroom for held-out inputs whose error
// drifts past the calibration input's.
const DefaultMargin = 0.1

// DefaultHeadCap is the default bound on one head's rel L1, in multiples of
// the budget. Without a cap the cheapest heads (small |O|) would absorb
// errors that cost the model more than their share of the layer's rel L1
// says: on the LM workload, layer-0 heads at rel L1 0.2 cost 1.1% bits
// per byte where a cap of 3× the budget keeps it at 0.6% (RESULTS.md).
const DefaultHeadCap = 3

// Config sets the budget, candidates and tiling of a tuning run.
type Config struct {
	// Budget bounds the layer's rel L1 against dense attention,
	// Σ_h Σ|O_h − O'_h| / Σ_h Σ|O_h| over all its query heads, on every
	// calibration input, in [1e-6, 1); e.g. 0.05. Heads share it: a head
	// whose error costs little sparsity gives its share to one whose
	// error buys much.
	Budget float64
	// Margin is the share of Budget the run leaves unspent, in [0, 1):
	// it tunes to Budget·(1−Margin). 0 spends it all; callers wanting
	// headroom for held-out inputs pass DefaultMargin or their own.
	Margin float64
	// HeadCap bounds each head's own rel L1 on every calibration input,
	// in [1e-6, 1); 0 means DefaultHeadCap·Budget. HeadCap = Budget gives
	// every head the budget on its own (no sharing).
	HeadCap float64
	// Methods are the candidates, names of Methods(); nil means all.
	// Dense is always a candidate: the fallback of a head nothing else
	// fits.
	Methods []string
	// Causal, Scale, BlockQ and BlockK are the problem's; 0 block sizes
	// mean DefaultBlockQ/K.
	Causal         bool
	Scale          float32
	BlockQ, BlockK int
	Workers        int // CPU executor goroutines; 0 means GOMAXPROCS
	// Executor, when set, runs the single-head passes instead of the CPU
	// executor. It is called from one goroutine at a time.
	Executor plan.Executor
	// Progress, when set, is called after each head with the heads done,
	// the heads in all and the single-head attention runs so far.
	Progress func(done, heads, evals int)
}

// Input is one calibration input of a layer: q [B, Hq, Nq, D], k and v
// [B, Hkv, Nk, D|Dv], all of one geometry.
type Input struct {
	Q, K, V *tensor.Tensor
}

func (c Config) resolved() (Config, error) {
	if err := checkBudget(c.Budget); err != nil {
		return c, fmt.Errorf("%w: %v", ErrBudget, err)
	}
	if !(c.Margin >= 0 && c.Margin < 1) {
		return c, fmt.Errorf("%w: margin %v must be in [0, 1)", ErrBudget, c.Margin)
	}
	if c.HeadCap == 0 {
		c.HeadCap = min(DefaultHeadCap*c.Budget, 0.999)
	}
	if err := checkBudget(c.HeadCap); err != nil {
		return c, fmt.Errorf("%w: head cap: %v", ErrBudget, err)
	}
	if c.BlockQ == 0 {
		c.BlockQ = DefaultBlockQ
	}
	if c.BlockK == 0 {
		c.BlockK = DefaultBlockK
	}
	if c.Methods == nil {
		c.Methods = Methods()
	}
	for _, m := range c.Methods {
		if _, err := lookup(m); err != nil {
			return c, err
		}
	}
	if c.Workers < 0 {
		return c, fmt.Errorf("%w: workers %d must be ≥ 0", ErrInput, c.Workers)
	}
	if c.Executor == nil {
		c.Executor = cpu.Executor{Workers: c.Workers}
	}
	return c, nil
}

// NewProfile returns an empty profile for the config's tiling and budget.
func NewProfile(c Config) (*Profile, error) {
	c, err := c.resolved()
	if err != nil {
		return nil, err
	}
	return &Profile{Version: Version, Method: "auto", BlockQ: c.BlockQ, BlockK: c.BlockK, Causal: c.Causal,
		Budget: c.Budget, Margin: c.Margin, HeadCap: c.HeadCap}, nil
}

// Tune picks, for every query head of one layer, a candidate method and
// knob so that the layer skips the most work (executor counters of
// single-head runs, averaged over heads) while its rel L1 against dense
// stays within Budget·(1−Margin) on every calibration input and each
// head's within HeadCap. It measures every head's candidates from the
// most accurate knob of each method towards the sparsest, up to the first
// over HeadCap, then shares the budget out (see allocate).
func Tune(ctx context.Context, c Config, name string, inputs []Input) (*Layer, error) {
	c, err := c.resolved()
	if err != nil {
		return nil, err
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%w: no calibration inputs", ErrInput)
	}
	var g tensor.Geometry
	for i, in := range inputs {
		gi, err := tensor.Validate(in.Q, in.K, in.V)
		if err != nil {
			return nil, fmt.Errorf("%w: input %d: %w", ErrInput, i, err)
		}
		if i > 0 && gi != g {
			return nil, fmt.Errorf("%w: input %d is %+v, input 0 %+v; tune one layer shape at a time", ErrInput, i, gi, g)
		}
		g = gi
		for _, x := range []*tensor.Tensor{in.Q, in.K, in.V} {
			if err := x.CheckFinite(fmt.Sprintf("input %d", i)); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInput, err)
			}
		}
	}
	t := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: g.Nq, Nk: g.Nk, D: g.D, Dv: g.Dv},
		Causal: c.Causal, BlockQ: c.BlockQ, BlockK: c.BlockK, Scale: c.Scale}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	lp := &layerPlans{cfg: c, inputs: inputs, tiling: t, plans: map[candidate][]*plan.Plan{}}
	lp.tiling.Geometry = g
	fronts := make([]frontier, g.Hq)
	evals := 0
	for h := range g.Hq {
		s := &search{cfg: c, layer: lp, plans: map[candidate][]*plan.Plan{}, inputs: len(inputs)}
		for i, in := range inputs {
			for b := range g.B {
				hc, err := newHeadCase(ctx, c.Executor, t, in, g, b, h)
				if err != nil {
					return nil, err
				}
				hc.input = i
				s.cases = append(s.cases, hc)
			}
		}
		f, err := s.frontier(ctx)
		if err != nil {
			return nil, fmt.Errorf("head %d: %w", h, err)
		}
		fronts[h] = f
		evals += s.evals
		if c.Progress != nil {
			c.Progress(h+1, g.Hq, evals)
		}
	}
	pick, l1 := allocate(fronts, c.Budget*(1-c.Margin))
	layer := &Layer{Name: name, Heads: make([]Head, g.Hq), L1: l1}
	for h, f := range fronts {
		o := f.options[pick[h]]
		layer.Heads[h] = Head{Method: o.c.method, Knob: o.c.knob, L1: o.worst, Sparsity: o.sparsity}
		layer.Sparsity += o.sparsity / float64(g.Hq)
	}
	return layer, nil
}

// headCase is one (input, batch, query head) slice, run alone.
type headCase struct {
	input, b, h int // which input, batch and query head
	t           plan.Tiling
	q, k, v     *tensor.Tensor
	exec        plan.Executor
	dense       []float32
	denseAbs    float64 // Σ|dense|
}

// slice copies head h of batch b of x into a new [1, 1, N, D] tensor.
func slice(x *tensor.Tensor, b, h int) (*tensor.Tensor, error) {
	s := x.Shape()
	out, err := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: s.N, D: s.D})
	if err != nil {
		return nil, err
	}
	data := out.Float32s()
	for n := range s.N {
		x.ReadRow(b, h, n, data[n*s.D:(n+1)*s.D])
	}
	return out, nil
}

func newHeadCase(ctx context.Context, exec plan.Executor, t plan.Tiling, in Input, g tensor.Geometry, b, h int) (*headCase, error) {
	hc := &headCase{b: b, h: h, t: t, exec: exec}
	var err error
	if hc.q, err = slice(in.Q, b, h); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if hc.k, err = slice(in.K, b, g.KVHead(h)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if hc.v, err = slice(in.V, b, g.KVHead(h)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	dense, err := plan.Dense(t)
	if err != nil {
		return nil, err
	}
	out, _, err := exec.Run(ctx, dense, hc.q, hc.k, hc.v, nil)
	if err != nil {
		return nil, err
	}
	hc.dense = out.Float32s()
	for _, x := range hc.dense {
		hc.denseAbs += math.Abs(float64(x))
	}
	return hc, nil
}

// run executes p on the case and returns its rel L1 against dense and the
// executor's counters.
func (hc *headCase) run(ctx context.Context, p *plan.Plan) (float64, plan.Stats, error) {
	out, st, err := hc.exec.Run(ctx, p, hc.q, hc.k, hc.v, nil)
	if err != nil {
		return 0, plan.Stats{}, err
	}
	if hc.denseAbs == 0 {
		return 0, st, nil // an all-zero head: any plan is exact
	}
	var diff float64
	for i, x := range out.Float32s() {
		diff += math.Abs(float64(x) - float64(hc.dense[i]))
	}
	return diff / hc.denseAbs, st, nil
}

// nominal is the sparsity the executor will count for p: entries weighted
// 1/Pool, against the dense causal-aware pass. For plans without a λ
// filter or stop rule, the candidates here, it equals Stats.Sparsity.
func nominal(p *plan.Plan) float64 {
	dense := float64(p.DenseBlocks())
	if dense == 0 {
		return 0
	}
	var work float64
	for i := range p.KVBlock {
		if l := p.LevelAt(i); l != plan.Skip {
			work += 1 / float64(l.Pool())
		}
	}
	return 1 - work/dense
}

// layerPlans plans candidates over whole layers, once per candidate and
// input, for every head's search to take its rows from: a head is tuned
// on exactly the rows Planner will give it (a planner's choice for one
// head may depend on its index, as PSA's sampling does).
type layerPlans struct {
	cfg    Config
	inputs []Input
	tiling plan.Tiling
	plans  map[candidate][]*plan.Plan // one per input
}

func (l *layerPlans) planned(ctx context.Context, c candidate) ([]*plan.Plan, error) {
	if ps, ok := l.plans[c]; ok {
		return ps, nil
	}
	pl, err := NewMethod(c.method, c.knob, 0)
	if err != nil {
		return nil, err
	}
	var ps []*plan.Plan
	for _, in := range l.inputs {
		p, err := pl.Plan(ctx, l.tiling, in.Q, in.K, in.V)
		if err != nil {
			return nil, fmt.Errorf("%s at %v: %w", c.method, c.knob, err)
		}
		if err := simple(c.method, p, l.tiling); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	l.plans[c] = ps
	return ps, nil
}

// headPlan returns the rows of (b, h) of p as a plan of the single-head
// tiling t, with head h's λ.
func headPlan(p *plan.Plan, t plan.Tiling, b, h int) (*plan.Plan, error) {
	bl, err := plan.NewBuilder(t)
	if err != nil {
		return nil, err
	}
	for qb := range p.QBlocks() {
		r := p.Row(b, h, qb)
		for i := p.RowStart[r]; i < p.RowStart[r+1]; i++ {
			bl.Add(qb, int(p.KVBlock[i]), p.LevelAt(i))
		}
	}
	if f := p.Filter; f != nil {
		if l := f.LambdaFor(h); !math.IsInf(float64(l), -1) {
			bl.SetFilter(&plan.Filter{Lambda: l, RowGroup: f.RowGroup})
		}
	}
	return bl.Build()
}
