// Package flexprefill plans FlexPrefill (Lai et al., "FlexPrefill: A
// Context-Aware Sparse Attention Mechanism for Efficient Long-Sequence
// Inference", ICLR 2025), a baseline of the S2O paper.
//
// Per head, the last query block is attended exactly (the probe). Its mean
// attention per key, summed per KV block, is compared with a cheap estimate:
// the softmax of the mean probe query against each block's mean key. When
// the square-root Jensen–Shannon divergence of the two is below Tau, the
// head is query-aware (FlexPrefill §3.2): every query block keeps the
// blocks of a pooled-query × pooled-key attention estimate, heaviest first
// over the whole head, until they cover Gamma of its mass. Otherwise the
// head is vertical-slash: it keeps the KV blocks (verticals) and block
// diagonals (slashes) with the most probe attention, as many of each as
// needed for their token-level lines to cover Gamma of the probe's
// attention (FlexPrefill §3.3, Alg. 2). The first KV block and the main
// diagonal are always kept, as in the reference code.
package flexprefill

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/method/internal/probe"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Defaults: what a zero Gamma and a zero Tau mean, and what the CLI runs
// (the S2O paper's comparison uses γ 0.9, τ 0.1).
//
// γ is a share of the probe's attention, so it holds at every N. The
// probe averages up to BlockQ queries, so a key that one query retrieves
// (the synthetic llm workload's needle, 0.85–0.91 of the last query's
// mass) holds about 1/64 of the probe's mass, and its block ranks near the
// edge of the vertical budget: γ 0.97 lost the needle at 1K, 1.5K and 16K;
// γ 0.985 keeps it at every length tried from 800 to 16K tokens (not at
// 600–700, where γ 0.99 loses it too). τ 0.2 makes more of the real LM's heads
// query-aware than the paper's 0.1, which there is both sparser and more
// accurate. On the LM at 4K (eval's default), γ 0.97 τ 0.1 → γ 0.985 τ
// 0.2: sparsity 0.543 → 0.479, rel L1 0.042 → 0.015, bits per byte +4.26%
// → +0.17% of dense (RESULTS.md, "Defaults and the needle").
const (
	DefaultGamma = 0.985
	DefaultTau   = 0.2
)

// NoQueryAware is the Tau that makes every head vertical-slash: no
// distance is below a negative τ (any negative Tau does the same).
const NoQueryAware = -1.0

// Planner plans FlexPrefill. The zero value runs DefaultGamma and
// DefaultTau, the CLI's default.
type Planner struct {
	// Gamma is γ in (0, 1], the attention share each pattern covers; 0
	// means DefaultGamma.
	Gamma float64
	// Tau is τ, the square-root JS divergence below which a head is
	// query-aware: finite; 0 means DefaultTau, and a negative τ
	// (NoQueryAware) makes every head vertical-slash.
	Tau float64
	// MinBudget and MaxBudget bound the vertical and slash blocks of a
	// head; 0 means 1 and no bound.
	MinBudget, MaxBudget int
}

// Name returns "flexprefill".
func (f Planner) Name() string { return "flexprefill" }

// Resolve returns f with its zero fields set to their defaults (Gamma,
// Tau). Plan, Scores and Decide call it, and so does the device planner
// (package cuda).
func (f Planner) Resolve() Planner {
	if f.Gamma == 0 {
		f.Gamma = DefaultGamma
	}
	if f.Tau == 0 {
		f.Tau = DefaultTau
	}
	return f
}

// Validate reports bad settings of f, resolved or not, with an error
// wrapping plan.ErrInvalid. Plan calls it, and so does the device planner.
func (f Planner) Validate() error {
	f = f.Resolve()
	if !(f.Gamma > 0 && f.Gamma <= 1) {
		return fmt.Errorf("%w: flexprefill γ=%v must be in (0, 1] (0: %v)", plan.ErrInvalid, f.Gamma, DefaultGamma)
	}
	if math.IsNaN(f.Tau) || math.IsInf(f.Tau, 0) {
		return fmt.Errorf("%w: flexprefill τ=%v must be finite (0: %v; negative: every head vertical-slash)", plan.ErrInvalid, f.Tau, DefaultTau)
	}
	if f.MinBudget < 0 || f.MaxBudget < 0 || (f.MaxBudget > 0 && f.MaxBudget < f.MinBudget) {
		return fmt.Errorf("%w: flexprefill budgets %d..%d must be ≥ 0 with MaxBudget ≥ MinBudget (0: no bound)", plan.ErrInvalid, f.MinBudget, f.MaxBudget)
	}
	return nil
}

// Head is one head's decision.
type Head struct {
	Distance   float64 // square-root JS divergence of estimate and probe
	QueryAware bool    // Distance < Tau
	Vertical   []int   // kept KV blocks
	Slash      []int   // kept block diagonals: KV block = diagonal block − s
	// Blocks[qb] are the blocks of the query-aware estimate, nil for a
	// vertical-slash head.
	Blocks [][]int
}

// Plan decides every head's pattern and converts it to blocks.
func (f Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	f = f.Resolve()
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := heads.CheckInputs(t, q, k, "flexprefill"); err != nil {
		return nil, err
	}
	return heads.SelectBlocksWorker(ctx, t, func() func(*plan.Plan, int, int) func(int, []int32) []int32 {
		var sc scratch
		return func(dense *plan.Plan, b, h int) func(int, []int32) []int32 {
			hd := f.decide(dense, q, k, b, h, &sc, nil)
			return func(qb int, visible []int32) []int32 { return hd.Row(dense, qb, visible) }
		}
	})
}

// scratch is one worker's memory, kept from head to head: the probe's and
// its sums'.
type scratch struct {
	probe       probe.Scratch
	vert, slash []float64
}

// Scores are the exact quantities one head's decision is made from, for
// checking a planner that computes them in other arithmetic (the device
// planner's probe runs on tensor cores).
type Scores struct {
	// Vertical[j] and Slash[d+Nk−1] are the probe's mean attention per key
	// and per offset d = position − key: the lines whose γ-cover sets the
	// budgets.
	Vertical, Slash []float64
	// VB[kb] is Vertical pooled per KV block; SB[s] is Slash pooled per
	// block diagonal s, for the candidate diagonals (mass, or s = 0).
	VB []float64
	SB map[int]float64
	// Distance is Head.Distance, compared with Tau.
	Distance float64
	// QueryAware is the query-aware pattern's blocks per query block,
	// whatever the decision.
	QueryAware [][]int
}

// Scores returns head h of batch b's Scores on the dense plan p of the
// tiling, as Decide computes them.
func (f Planner) Scores(p *plan.Plan, q, k *tensor.Tensor, b, h int) Scores {
	var s Scores
	f.Resolve().decide(p, q, k, b, h, new(scratch), &s)
	return s
}

// Decide computes head h of batch b's pattern on the dense plan p of the
// tiling (which gives the block geometry and visibility).
func (f Planner) Decide(p *plan.Plan, q, k *tensor.Tensor, b, h int) Head {
	return f.Resolve().decide(p, q, k, b, h, new(scratch), nil)
}

// decide is Decide in a worker's scratch; the Head it returns does not
// refer to the scratch. When out is not nil it also fills out's Scores.
func (f Planner) decide(p *plan.Plan, q, k *tensor.Tensor, b, h int, sc *scratch, out *Scores) Head {
	g := p.Geometry
	bk, nkb := p.BlockK, p.KBlocks()
	pr := sc.probe.Last(p.Tiling, q, k, b, h, p.BlockQ)
	n := float64(pr.Len())
	sc.vert, sc.slash = pr.VerticalInto(sc.vert), pr.SlashInto(sc.slash)
	vert, slash := sc.vert, sc.slash
	for j := range vert {
		vert[j] /= n
	}
	for i := range slash {
		slash[i] /= n
	}
	// Budgets: the lines needed to cover γ of the probe's attention, in
	// blocks (FlexPrefill Alg. 2).
	nv := f.clamp(coverCount(vert, f.Gamma)/bk+1, nkb)
	ns := f.clamp(coverCount(slash, f.Gamma)/bk+1, nkb)

	// Lines pooled into blocks: KV block kb, and block diagonal s holding
	// offsets [s·BlockK, (s+1)·BlockK), each a plan.Sum64 over the
	// block's lines in increasing order (lane = line − first line mod 32).
	vb := make([]float64, nkb)
	for kb := range nkb {
		vb[kb] = plan.Sum64(vert[kb*bk : min(kb*bk+bk, g.Nk)])
	}
	sb := map[int]float64{0: 0} // the main diagonal always exists
	for s := floorDiv(-(g.Nk - 1), bk); s*bk <= g.Nk-1; s++ {
		lo, hi := max(s*bk, -(g.Nk-1)), min(s*bk+bk-1, g.Nk-1)
		part := make([]float64, hi-s*bk+1) // lanes count from s·BlockK
		mass := false
		for d := lo; d <= hi; d++ {
			x := slash[d+g.Nk-1]
			part[d-s*bk] = x
			mass = mass || x > 0
		}
		if mass || s == 0 {
			sb[s] = plan.Sum64(part)
		}
	}

	// FlexPrefill §3.2: the estimate softmax(mean probe query · block mean
	// keys) against the probe's pooled vertical attention.
	keys := blockMeans(k, b, g.KVHead(h), g.Nk, bk, g.D)
	qmean := make([]float32, g.D)
	for i := range pr.Len() {
		axpy(float32(1/n), pr.Queries[i*g.D:(i+1)*g.D], qmean)
	}
	est := softmaxDots(qmean, keys, g.D, float64(p.SoftmaxScale()), nkb)
	hd := Head{Distance: sqrtJS(est, vb)}
	hd.QueryAware = hd.Distance < f.Tau
	if out != nil {
		*out = Scores{Vertical: slices.Clone(vert), Slash: slices.Clone(slash), VB: slices.Clone(vb), SB: maps.Clone(sb),
			Distance: hd.Distance, QueryAware: f.queryAware(p, q, keys, b, h)}
	}
	if hd.QueryAware {
		nv, ns = f.clamp(0, nkb), f.clamp(0, nkb)
		hd.Blocks = f.queryAware(p, q, keys, b, h)
	}
	blocks := make([]int, nkb)
	for i := range blocks {
		blocks[i] = i
	}
	hd.Vertical = topForced(blocks, func(kb int) float64 { return vb[kb] }, 0, nv)
	diags := make([]int, 0, len(sb))
	for s := range sb {
		diags = append(diags, s)
	}
	slices.Sort(diags)
	hd.Slash = topForced(diags, func(s int) float64 { return sb[s] }, 0, ns)
	return hd
}

// queryAware is FlexPrefill's query-aware pattern: per query block, the
// softmax of its mean query against the block mean keys over its visible
// blocks; over the whole head, the heaviest (query block, KV block) pairs
// whose cumulative mass stays within γ × the number of query blocks.
func (f Planner) queryAware(p *plan.Plan, q *tensor.Tensor, keys []float32, b, h int) [][]int {
	g := p.Geometry
	type pair struct {
		qb, kb int
		w      float64
	}
	var pairs []pair
	row := make([]float32, g.D)
	rows := 0
	for qb := range p.QBlocks() {
		qlo, qhi := p.QueryRange(qb)
		qm := make([]float32, g.D)
		for i := qlo; i < qhi; i++ {
			q.ReadRow(b, h, i, row)
			axpy(1/float32(qhi-qlo), row, qm)
		}
		visible, _ := p.Entries(p.Row(b, h, qb))
		if len(visible) == 0 {
			continue
		}
		rows++
		w := softmaxDots(qm, keys, g.D, float64(p.SoftmaxScale()), p.KBlocks())
		// Renormalize over the visible blocks only (block-causal mask);
		// they are the first len(visible).
		sum := plan.Sum64(w[:len(visible)])
		for _, kb := range visible {
			pairs = append(pairs, pair{qb, int(kb), w[kb] / sum})
		}
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return descending(a.w, b.w) })
	out := make([][]int, p.QBlocks())
	// The cumulative mass is exact: weights (each ≤ 1) in fixed point
	// with 2^shift per unit, so the total of rows unit rows stays below
	// 2^62 and any summation order gives the same count.
	shift := 62 - bits.Len(uint(rows))
	budget := toFixed(f.Gamma*float64(rows), shift)
	var cum uint64
	for _, pr := range pairs {
		cum += toFixed(pr.w, shift)
		if cum > budget {
			break
		}
		out[pr.qb] = append(out[pr.qb], pr.kb)
	}
	return out
}

// Row returns the KV blocks query block qb visits, among its visible
// blocks in key order: kept verticals, blocks on kept diagonals (counted
// from the block holding the query block's last position), and the
// query-aware blocks.
func (hd Head) Row(p *plan.Plan, qb int, visible []int32) []int32 {
	want := make([]bool, p.KBlocks())
	for _, kb := range hd.Vertical {
		want[kb] = true
	}
	_, qhi := p.QueryRange(qb)
	diag := (qhi - 1 + p.Geometry.QueryOffset())
	if diag >= 0 {
		diag /= p.BlockK
		for _, s := range hd.Slash {
			if kb := diag - s; kb >= 0 && kb < len(want) {
				want[kb] = true
			}
		}
	}
	if hd.Blocks != nil {
		for _, kb := range hd.Blocks[qb] {
			want[kb] = true
		}
	}
	var out []int32
	for _, kb := range visible {
		if want[kb] {
			out = append(out, kb)
		}
	}
	return out
}

func (f Planner) clamp(n, blocks int) int {
	lo, hi := max(f.MinBudget, 1), blocks
	if f.MaxBudget > 0 {
		hi = min(hi, f.MaxBudget)
	}
	return min(max(n, lo), max(hi, lo))
}

// coverCount is how many of the largest values have a cumulative sum
// within gamma (FlexPrefill's score_cover_topk, less its +1). The values
// are probe means (each ≤ 1, summing to about 1); the cumulative sum is
// exact, in fixed point with 2^60 per unit, so that the device planner,
// which sums them in another order, finds the same count.
func coverCount(x []float64, gamma float64) int {
	s := slices.Clone(x)
	slices.SortFunc(s, descending)
	g := toFixed(gamma, coverShift)
	var cum uint64
	for i, v := range s {
		cum += toFixed(v, coverShift)
		if cum > g {
			return i
		}
	}
	return len(s)
}

// coverShift is coverCount's fixed-point scale, 2^60 per unit.
const coverShift = 60

// toFixed is x·2^shift truncated to an integer, for x ≥ 0.
func toFixed(x float64, shift int) uint64 {
	return uint64(math.Ldexp(x, shift))
}

// axpy sets y[i] += a·x[i] in float32, product rounded before the sum
// (never fused), as the device planner does.
func axpy(a float32, x, y []float32) {
	for i, v := range x {
		y[i] += float32(a * v)
	}
}

// topForced returns the forced item (if present) then the highest-scoring
// others, n in all, in ranking order.
func topForced(items []int, score func(int) float64, forced, n int) []int {
	ranked := slices.Clone(items)
	slices.SortStableFunc(ranked, func(a, b int) int {
		switch {
		case a == forced && b != forced:
			return -1
		case b == forced && a != forced:
			return 1
		}
		return descending(score(a), score(b))
	})
	return ranked[:min(n, len(ranked))]
}

// blockMeans returns the mean key of every KV block, row-major.
func blockMeans(k *tensor.Tensor, b, kh, nk, bk, d int) []float32 {
	nb := (nk + bk - 1) / bk
	out := make([]float32, nb*d)
	row := make([]float32, d)
	for j := range nk {
		k.ReadRow(b, kh, j, row)
		kb := j / bk
		cnt := min(bk, nk-kb*bk)
		axpy(1/float32(cnt), row, out[kb*d:(kb+1)*d])
	}
	return out
}

// softmaxDots is softmax_j(scale · x·rows[j]) over n rows, in the
// canonical order of plan/canon.go: plan.Dot64 logits, plan.Exp64 and a
// plan.Sum64 normalizer.
func softmaxDots(x, rows []float32, d int, scale float64, n int) []float64 {
	w := make([]float64, n)
	mx := math.Inf(-1)
	for j := range n {
		w[j] = float64(plan.Dot64(x, rows[j*d:(j+1)*d]) * scale)
		mx = max(mx, w[j])
	}
	for j := range w {
		w[j] = plan.Exp64(w[j] - mx)
	}
	sum := plan.Sum64(w)
	for j := range w {
		w[j] /= sum
	}
	return w
}

// sqrtJS is the square root of the Jensen–Shannon divergence (natural log)
// of two distributions: per index the two terms (each 0 where its
// probability is 0) are added, and the per-index values summed by
// plan.Sum64. The device planner takes CUDA's log, which may differ from
// math.Log by one ulp: a head whose distance lies within about 1e-15
// relative of τ may be classified differently on the two sides.
func sqrtJS(p, q []float64) float64 {
	t := make([]float64, len(p))
	for i := range p {
		m := (p[i] + q[i]) / 2
		var a, b float64
		if p[i] > 0 {
			a = float64(float64(0.5*p[i]) * math.Log(p[i]/m))
		}
		if q[i] > 0 {
			b = float64(float64(0.5*q[i]) * math.Log(q[i]/m))
		}
		t[i] = a + b
	}
	return math.Sqrt(max(plan.Sum64(t), 0))
}

func descending(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func floorDiv(a, b int) int {
	if a >= 0 {
		return a / b
	}
	return -((-a + b - 1) / b)
}
