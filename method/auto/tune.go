package auto

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Default block sizes of a tuning run (SpargeAttn's b_q and b_k, the
// CLI's defaults).
const (
	DefaultBlockQ = 128
	DefaultBlockK = 64
)

// Config sets the budget, candidates and tiling of a tuning run.
type Config struct {
	// Budget bounds each head's rel L1 against dense attention on every
	// calibration input, in [1e-6, 1); e.g. 0.05.
	Budget float64
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
	return &Profile{Version: Version, Method: "auto", BlockQ: c.BlockQ, BlockK: c.BlockK, Causal: c.Causal, Budget: c.Budget}, nil
}

// Tune picks, for every query head of one layer, the candidate method and
// knob with the most skipped work (executor counters of single-head runs)
// whose rel L1 against dense stays within the budget on every calibration
// input, and returns the layer's profile entry.
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
	layer := &Layer{Name: name, Heads: make([]Head, g.Hq)}
	lp := &layerPlans{cfg: c, inputs: inputs, tiling: t, plans: map[candidate][]*plan.Plan{}}
	lp.tiling.Geometry = g
	evals := 0
	for h := range g.Hq {
		s := &search{cfg: c, layer: lp, plans: map[candidate][]*plan.Plan{}}
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
		hd, err := s.head(ctx)
		if err != nil {
			return nil, fmt.Errorf("head %d: %w", h, err)
		}
		layer.Heads[h] = hd
		evals += s.evals
		if c.Progress != nil {
			c.Progress(h+1, g.Hq, evals)
		}
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

// candidate is one (method, knob) of a search.
type candidate struct {
	method string
	knob   float64
}

// outcome is one candidate evaluated over the cases.
type outcome struct {
	ok       bool    // every case within the budget
	worst    float64 // the largest rel L1 seen (of the cases run)
	sparsity float64 // mean executor sparsity (when ok)
}

// search tunes one query head.
type search struct {
	cfg   Config
	layer *layerPlans
	cases []*headCase
	plans map[candidate][]*plan.Plan // single-head plans, one per case
	order []int                      // the order cases run in, the hardest first
	evals int
}

// planned returns the candidate's plans of every case and their mean
// nominal sparsity, planning each once.
func (s *search) planned(ctx context.Context, c candidate) ([]*plan.Plan, float64, error) {
	ps, ok := s.plans[c]
	if !ok {
		full, err := s.layer.planned(ctx, c)
		if err != nil {
			return nil, 0, err
		}
		for _, hc := range s.cases {
			p, err := headPlan(full[hc.input], hc.t, hc.b, hc.h)
			if err != nil {
				return nil, 0, fmt.Errorf("%s at %v: %w", c.method, c.knob, err)
			}
			ps = append(ps, p)
		}
		s.plans[c] = ps
	}
	var sp float64
	for _, p := range ps {
		sp += nominal(p)
	}
	return ps, sp / float64(len(ps)), nil
}

// eval runs the candidate's plans, stopping at the first case over the
// budget; that case goes first next time, so failures end sooner.
func (s *search) eval(ctx context.Context, c candidate) (outcome, error) {
	ps, _, err := s.planned(ctx, c)
	if err != nil {
		return outcome{}, err
	}
	if s.order == nil {
		for i := range s.cases {
			s.order = append(s.order, i)
		}
	}
	r := outcome{ok: true}
	for pos, i := range s.order {
		if err := ctx.Err(); err != nil {
			return outcome{}, err
		}
		l1, st, err := s.cases[i].run(ctx, ps[i])
		if err != nil {
			return outcome{}, err
		}
		s.evals++
		r.worst = max(r.worst, l1)
		r.sparsity += st.Sparsity() / float64(len(s.cases))
		if !(l1 <= s.cfg.Budget) {
			copy(s.order[1:pos+1], s.order[:pos])
			s.order[0] = i
			r.ok = false
			break
		}
	}
	return r, nil
}

// head searches every candidate method for one query head. Methods run in
// order of promise (the nominal sparsity of their middle knob); within a
// method, only knobs whose plans could beat the best found so far are
// run, the densest of them first as an early exit, then a binary search
// for the sparsest knob within the budget, assuming that error grows and
// sparsity falls monotonically along the sweep.
func (s *search) head(ctx context.Context) (Head, error) {
	best := Head{Method: Dense}
	dense, err := s.eval(ctx, candidate{method: Dense})
	if err != nil {
		return Head{}, err
	}
	if !dense.ok {
		return Head{}, fmt.Errorf("%w: even dense attention has rel L1 %.3g over the budget %v", ErrBudget, dense.worst, s.cfg.Budget)
	}
	best.L1, best.Sparsity = dense.worst, dense.sparsity
	type ranked struct {
		name    string
		knobs   []float64
		promise float64
	}
	var ms []ranked
	for _, m := range s.cfg.Methods {
		sp, _ := lookup(m)
		if len(sp.knobs) == 0 {
			continue
		}
		_, promise, err := s.planned(ctx, candidate{m, sp.knobs[len(sp.knobs)/2]})
		if err != nil {
			return Head{}, err
		}
		ms = append(ms, ranked{m, sp.knobs, promise})
	}
	slices.SortStableFunc(ms, func(a, b ranked) int { return cmp.Compare(b.promise, a.promise) })
	for _, m := range ms {
		// The knobs that could win: from the sparsest end back to the
		// first whose plans cannot beat the best.
		lo := len(m.knobs)
		for lo > 0 {
			_, sp, err := s.planned(ctx, candidate{m.name, m.knobs[lo-1]})
			if err != nil {
				return Head{}, err
			}
			if sp <= best.Sparsity+1e-12 {
				break
			}
			lo--
		}
		if lo == len(m.knobs) {
			continue
		}
		r, err := s.eval(ctx, candidate{m.name, m.knobs[lo]})
		if err != nil {
			return Head{}, err
		}
		if !r.ok {
			continue
		}
		hi := len(m.knobs) - 1 // the sparsest feasible lies in [lo, hi]
		for lo < hi {
			mid := (lo + hi + 1) / 2
			rm, err := s.eval(ctx, candidate{m.name, m.knobs[mid]})
			if err != nil {
				return Head{}, err
			}
			if rm.ok {
				lo, r = mid, rm
			} else {
				hi = mid - 1
			}
		}
		if r.sparsity > best.Sparsity {
			best = Head{Method: m.name, Knob: m.knobs[lo], L1: r.worst, Sparsity: r.sparsity}
		}
	}
	return best, nil
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
