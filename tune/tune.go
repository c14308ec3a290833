// Package tune finds SpargeAttn hyperparameters per layer and head
// (SpargeAttn §3.6): for each query head, a search over (τ, θ) for the
// largest sparsity whose relative L1 error stays below l1 on every
// calibration input, then a search over λ for the largest sparsity below l2.
// The result is a versioned JSON Profile whose Options run it through
// sparseattn.Attention.
//
// The reference tuner's users report days per model. This one is fast by
// construction:
//   - per-head execution: each query head is sliced out and run alone, so
//     one evaluation costs one head's attention, not the layer's;
//   - the planner's two stages: the expensive estimate (pooling, block
//     similarities, compressed logits) is computed once per input and head,
//     and only the cheap mask stage is re-run per (τ, θ);
//   - binary search over the sorted τ and λ grids (sparsity is monotone in
//     each), restricted to candidates whose mask could beat the best
//     sparsity found so far, which the mask alone tells before running;
//   - early exits: an evaluation stops at the first input over the bound,
//     and identical masks are evaluated once.
package tune

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Default search grids. τ runs from sparse to dense and always ends at 1
// (the dense fallback); θ < 0 is "no judge"; λ runs from safe to aggressive.
var (
	DefaultCDFs    = []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999, 1}
	DefaultThetas  = []float64{-1, 0.2, 0.3, 0.4, 0.5, 0.6}
	DefaultLambdas = []float64{-30, -20, -15, -12, -10, -8, -7, -6, -5, -4, -3, -2}
)

// MinL1 is the smallest error bound accepted: below it float32 rounding
// alone, not the sparsity, decides.
const MinL1 = 1e-6

// Config sets the error bounds, grids and tiling of a tuning run.
type Config struct {
	// L1 bounds the rel L1 error of M_g alone, L2 that with the λ filter
	// too; 0 < L1 ≤ L2 < 1. The paper uses e.g. 0.05 and 0.06.
	L1, L2 float64
	// Margin in [0, 1) tunes against the tighter bounds L1·(1−Margin) and
	// L2·(1−Margin), headroom for inputs the calibration set did not show.
	Margin float64
	// Grids; nil means the defaults.
	CDFs, Thetas, Lambdas []float64
	// Causal, Scale, BlockQ, BlockK, RowGroup and Sink are the problem's
	// and the planner's; 0 block sizes mean sparseattn.DefaultBlockQ/K,
	// Attention's tiling (the CLI tunes at sparge.PaperBlockQ/K unless
	// told otherwise).
	Causal         bool
	Scale          float32
	BlockQ, BlockK int
	RowGroup       int
	Sink           bool
	Workers        int // executor goroutines; 0 means GOMAXPROCS
	// Executor, when set, runs the single-head attention passes instead of
	// the CPU executor: a GPU executor that keeps its uploads for the whole
	// run, say. It is called from one goroutine at a time.
	Executor plan.Executor
	// Progress, when set, is called after each head.
	Progress func(Progress)
}

// Progress reports how far a tuning run is.
type Progress struct {
	Head, Heads int           // heads done and in all
	Evals       int           // single-head attention runs so far
	Elapsed     time.Duration // since the start
	ETA         time.Duration // estimated time left
}

// Input is one calibration input of a layer: q [B, Hq, Nq, D], k and v
// [B, Hkv, Nk, D|Dv], all of the same geometry.
type Input struct {
	Q, K, V *tensor.Tensor
}

// checkBudget rejects error bounds that cannot be met or make no sense.
func checkBudget(l1, l2 float64) error {
	switch {
	case math.IsNaN(l1) || math.IsNaN(l2):
		return fmt.Errorf("l1=%v and l2=%v must be numbers", l1, l2)
	case l1 < MinL1 || l1 >= 1:
		return fmt.Errorf("l1=%v must be in [%g, 1): below %g float32 rounding decides, and rel L1 1 is an all-zero output", l1, MinL1, MinL1)
	case l2 < l1:
		return fmt.Errorf("l2=%v must be ≥ l1=%v: the λ filter only adds error on top of M_g's", l2, l1)
	case l2 >= 1:
		return fmt.Errorf("l2=%v must be below 1 (rel L1 1 is an all-zero output)", l2)
	}
	return nil
}

// resolved returns the config with defaults filled in and grids checked
// and sorted.
func (c Config) resolved() (Config, error) {
	if err := checkBudget(c.L1, c.L2); err != nil {
		return c, fmt.Errorf("%w: %v", ErrBudget, err)
	}
	if math.IsNaN(c.Margin) || c.Margin < 0 || c.Margin >= 1 {
		return c, fmt.Errorf("%w: margin %v must be in [0, 1)", ErrBudget, c.Margin)
	}
	if c.BlockQ == 0 {
		c.BlockQ = sparseattn.DefaultBlockQ
	}
	if c.BlockK == 0 {
		c.BlockK = sparseattn.DefaultBlockK
	}
	pick := func(g, def []float64) []float64 {
		if g == nil {
			g = def
		}
		g = slices.Clone(g)
		slices.Sort(g)
		return slices.Compact(g)
	}
	c.CDFs, c.Thetas, c.Lambdas = pick(c.CDFs, DefaultCDFs), pick(c.Thetas, DefaultThetas), pick(c.Lambdas, DefaultLambdas)
	for _, x := range c.CDFs {
		if !(x > 0 && x <= 1) {
			return c, fmt.Errorf("%w: τ grid value %v must be in (0, 1]", sparge.ErrParams, x)
		}
	}
	if c.CDFs[len(c.CDFs)-1] != 1 {
		c.CDFs = append(c.CDFs, 1) // the dense fallback
	}
	for _, x := range c.Thetas {
		if err := (sparge.Params{Theta: x}).Validate(); err != nil || x == 0 {
			return c, fmt.Errorf("%w: θ grid value %v must be in [-1, 1] and not 0 (negative: no judge)", sparge.ErrParams, x)
		}
	}
	for _, x := range c.Lambdas {
		if err := (sparge.Params{Lambda: x}).Validate(); err != nil || x == 0 {
			return c, fmt.Errorf("%w: λ grid value %v must be negative and finite", sparge.ErrParams, x)
		}
	}
	if c.Workers < 0 {
		return c, fmt.Errorf("%w: workers %d must be ≥ 0", sparge.ErrParams, c.Workers)
	}
	if _, err := (sparge.Planner{Params: sparge.Params{Lambda: -1}, RowGroup: c.RowGroup}).Assemble(plan.Tiling{
		Geometry: tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 1, Nk: 1, D: 1, Dv: 1}, BlockQ: c.BlockQ, BlockK: c.BlockK,
	}, []*sparge.HeadMask{{RowStart: []int{0, 0}}}); err != nil {
		return c, err // block sizes or row group out of range
	}
	return c, nil
}

// NewProfile returns an empty profile for the config's tiling and bounds.
func NewProfile(c Config) (*Profile, error) {
	c, err := c.resolved()
	if err != nil {
		return nil, err
	}
	return &Profile{Version: Version, Method: "sparge", BlockQ: c.BlockQ, BlockK: c.BlockK, RowGroup: c.RowGroup,
		Causal: c.Causal, L1: c.L1, L2: c.L2, Margin: c.Margin}, nil
}

// TuneLayer tunes every query head of one layer on the calibration inputs
// and returns the layer's profile entry.
func TuneLayer(ctx context.Context, c Config, name string, inputs []Input) (*Layer, error) {
	c, err := c.resolved()
	if err != nil {
		return nil, err
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%w: no calibration inputs", ErrInput)
	}
	g, err := tensor.Validate(inputs[0].Q, inputs[0].K, inputs[0].V)
	if err != nil {
		return nil, fmt.Errorf("%w: input 0: %w", ErrInput, err)
	}
	for i, in := range inputs[1:] {
		gi, err := tensor.Validate(in.Q, in.K, in.V)
		if err != nil {
			return nil, fmt.Errorf("%w: input %d: %w", ErrInput, i+1, err)
		}
		if gi != g {
			return nil, fmt.Errorf("%w: input %d is %+v, input 0 %+v; calibrate one layer shape at a time", ErrInput, i+1, gi, g)
		}
	}
	for i, in := range inputs {
		for _, x := range []*tensor.Tensor{in.Q, in.K, in.V} {
			if err := x.CheckFinite(fmt.Sprintf("input %d", i)); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInput, err)
			}
		}
	}
	heads := g.B * g.Hq
	layer := &Layer{Name: name, Heads: make([]Head, g.Hq)}
	start := time.Now()
	evals := 0
	// Batches are folded into the head's inputs: head h is tuned on every
	// (input, batch) slice.
	for h := range g.Hq {
		var cases []*headCase
		for _, in := range inputs {
			for b := range g.B {
				hc, err := newHeadCase(ctx, c, in, g, b, h)
				if err != nil {
					return nil, err
				}
				cases = append(cases, hc)
			}
		}
		s := &search{cfg: c, cases: cases, memo: map[uint64]result{}}
		hd, err := s.head(ctx)
		if err != nil {
			return nil, fmt.Errorf("head %d: %w", h, err)
		}
		layer.Heads[h] = hd
		evals += s.evals
		if c.Progress != nil {
			done := (h + 1) * g.B
			el := time.Since(start)
			c.Progress(Progress{Head: h + 1, Heads: g.Hq, Evals: evals, Elapsed: el,
				ETA: time.Duration(float64(el) / float64(done) * float64(heads-done))})
		}
	}
	return layer, nil
}

// headCase is one (input, batch, query head) slice, run alone.
type headCase struct {
	t        plan.Tiling // single-head tiling
	q, k, v  *tensor.Tensor
	est      *sparge.HeadEstimate
	dense    []float32 // the dense output
	denseAbs float64   // Σ|O|
	exec     plan.Executor
}

// slice copies head h of batch b of x into a new [1, 1, N, D] tensor.
func slice(x *tensor.Tensor, b, h int) *tensor.Tensor {
	s := x.Shape()
	out, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: s.N, D: s.D})
	data := out.Float32s()
	for n := range s.N {
		x.ReadRow(b, h, n, data[n*s.D:(n+1)*s.D])
	}
	return out
}

func newHeadCase(ctx context.Context, c Config, in Input, g tensor.Geometry, b, h int) (*headCase, error) {
	hc := &headCase{
		q: slice(in.Q, b, h), k: slice(in.K, b, g.KVHead(h)), v: slice(in.V, b, g.KVHead(h)),
		exec: c.Executor,
	}
	if hc.exec == nil {
		hc.exec = cpu.Executor{Workers: c.Workers}
	}
	hc.t = plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: g.Nq, Nk: g.Nk, D: g.D, Dv: g.Dv},
		Causal: c.Causal, BlockQ: c.BlockQ, BlockK: c.BlockK, Scale: c.Scale}
	hc.est = sparge.EstimateGroup(hc.t, hc.q, hc.k, 0, 0)[0]
	dense, err := plan.Dense(hc.t)
	if err != nil {
		return nil, err
	}
	out, _, err := hc.exec.Run(ctx, dense, hc.q, hc.k, hc.v, nil)
	if err != nil {
		return nil, err
	}
	hc.dense = out.Float32s()
	for _, x := range hc.dense {
		hc.denseAbs += math.Abs(float64(x))
	}
	return hc, nil
}

// run executes one mask (and λ) on the case and returns its rel L1 and
// the executor's counters.
func (hc *headCase) run(ctx context.Context, c Config, m *sparge.HeadMask, lambda float64) (float64, plan.Stats, error) {
	p, err := sparge.Planner{Params: sparge.Params{Lambda: lambda}, RowGroup: c.RowGroup}.Assemble(hc.t, []*sparge.HeadMask{m})
	if err != nil {
		return 0, plan.Stats{}, err
	}
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

// result is the outcome of one (masks, λ) evaluation over the cases.
type result struct {
	ok       bool    // every case below the bound
	worst    float64 // largest rel L1 seen (of the cases run)
	sparsity float64 // mean executor sparsity over the cases (when ok)
}

// search tunes one query head.
type search struct {
	cfg   Config
	cases []*headCase
	memo  map[uint64]result
	order []int // the order cases are run in, hardest first
	evals int
}

// masks derives the cases' masks for (τ, θ) and their mean mask sparsity.
func (s *search) masks(cdf, theta float64) ([]*sparge.HeadMask, float64) {
	ms := make([]*sparge.HeadMask, len(s.cases))
	var sp float64
	for i, hc := range s.cases {
		ms[i] = hc.est.Mask(sparge.Params{CDF: cdf, Theta: theta}, sparge.MaskOptions{Sink: s.cfg.Sink})
		sp += ms[i].Sparsity(hc.est)
	}
	return ms, sp / float64(len(ms))
}

// eval runs the masks with λ on every case, stopping at the first case at
// or above bound. Identical (masks, λ, bound) are evaluated once.
func (s *search) eval(ctx context.Context, ms []*sparge.HeadMask, lambda, bound float64) (result, error) {
	h := fnv.New64a()
	var buf [8]byte
	put := func(x uint64) {
		for i := range buf {
			buf[i] = byte(x >> (8 * i))
		}
		h.Write(buf[:])
	}
	put(math.Float64bits(lambda))
	put(math.Float64bits(bound))
	for _, m := range ms {
		put(uint64(len(m.KVBlock)))
		for _, x := range m.RowStart {
			put(uint64(x))
		}
		for _, x := range m.KVBlock {
			put(uint64(x))
		}
	}
	key := h.Sum64()
	if r, ok := s.memo[key]; ok {
		return r, nil
	}
	r := result{ok: true}
	if s.order == nil {
		s.order = make([]int, len(s.cases))
		for i := range s.order {
			s.order[i] = i
		}
	}
	for pos, i := range s.order {
		if err := ctx.Err(); err != nil {
			return result{}, err
		}
		l1, st, err := s.cases[i].run(ctx, s.cfg, ms[i], lambda)
		if err != nil {
			return result{}, err
		}
		s.evals++
		r.worst = max(r.worst, l1)
		r.sparsity += st.Sparsity() / float64(len(s.cases))
		if !(l1 < bound) {
			// The hardest input goes first next time: failures end sooner.
			copy(s.order[1:pos+1], s.order[:pos])
			s.order[0] = i
			r.ok = false
			break
		}
	}
	s.memo[key] = r
	return r, nil
}

// head runs both stages for one query head.
func (s *search) head(ctx context.Context) (Head, error) {
	c := s.cfg
	c.L1, c.L2 = c.L1*(1-c.Margin), c.L2*(1-c.Margin) // the bounds searched against
	// The dense fallback: τ = 1 with the judge off keeps every block.
	best := Head{CDF: 1, Theta: -1}
	dense, _ := s.masks(1, -1)
	r, err := s.eval(ctx, dense, 0, c.L1)
	if err != nil {
		return Head{}, err
	}
	if !r.ok {
		return Head{}, fmt.Errorf("%w: even dense attention has rel L1 %.3g ≥ l1=%v here; raise l1", ErrBudget, r.worst, c.L1)
	}
	bestMasks := dense
	// Stage 1 (§3.6): (τ, θ) with the largest sparsity and L1 < l1.
	for _, theta := range c.Thetas {
		type cand struct {
			cdf float64
			ms  []*sparge.HeadMask
			sp  float64
		}
		var cands []cand
		for _, cdf := range c.CDFs {
			ms, sp := s.masks(cdf, theta)
			if sp <= best.Sparsity+1e-12 {
				break // sparsity only falls as τ grows: nothing further can win
			}
			cands = append(cands, cand{cdf, ms, sp})
		}
		if len(cands) == 0 {
			continue
		}
		// Binary search for the smallest feasible τ, assuming feasibility is
		// monotone in τ; the densest candidate first, as an early exit.
		r, err := s.eval(ctx, cands[len(cands)-1].ms, 0, c.L1)
		if err != nil {
			return Head{}, err
		}
		if !r.ok {
			continue
		}
		lo, hi, hiRes := 0, len(cands)-1, r // cands[hi] is feasible
		for lo < hi {
			mid := (lo + hi) / 2
			r, err := s.eval(ctx, cands[mid].ms, 0, c.L1)
			if err != nil {
				return Head{}, err
			}
			if r.ok {
				hi, hiRes = mid, r
			} else {
				lo = mid + 1
			}
		}
		if hiRes.sparsity > best.Sparsity {
			best = Head{CDF: cands[hi].cdf, Theta: theta, L1Mask: hiRes.worst, L1: hiRes.worst, SparsityMask: hiRes.sparsity, Sparsity: hiRes.sparsity}
			bestMasks = cands[hi].ms
		}
	}
	// Stage 2 (§3.6): λ with the largest sparsity and L1 < l2, on the
	// chosen mask. The grid runs from safe to aggressive.
	ls := c.Lambdas
	r, err = s.eval(ctx, bestMasks, ls[0], c.L2)
	if err != nil {
		return Head{}, err
	}
	if !r.ok {
		return best, nil // even the safest λ breaks l2: leave the filter off
	}
	lo, hi, loRes := 0, len(ls)-1, r // ls[lo] is feasible
	for lo < hi {
		mid := (lo + hi + 1) / 2
		r, err := s.eval(ctx, bestMasks, ls[mid], c.L2)
		if err != nil {
			return Head{}, err
		}
		if r.ok {
			lo, loRes = mid, r
		} else {
			hi = mid - 1
		}
	}
	if loRes.sparsity <= best.Sparsity {
		return best, nil // λ skips nothing here: leave the filter off
	}
	best.Lambda, best.L1, best.Sparsity = ls[lo], loRes.worst, loRes.sparsity
	return best, nil
}
