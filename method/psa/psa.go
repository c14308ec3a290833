// Package psa plans Pyramid Sparse Attention (PSA, Li et al. 2025): instead
// of keeping or dropping each KV block, every query block reads each KV block
// at one of H pyramid levels — level 1 exactly, level h > 1 with keys and
// values mean-pooled by 2^(h-1) tokens and a logit bias of (h−1)·ln 2 — or
// skips it. Important blocks get fine levels, less important ones coarse
// levels, so a query sees far more of the context than a binary block mask
// of the same compute budget allows.
//
// The planner estimates a block importance map (PSA §3.3.1: sampled tokens,
// or XAttention's antidiagonal scores with an intra-block similarity cap;
// by default a quarter of the sampled tokens are each block's most
// outlying ones rather than random draws, our extension of §3.3.1 so that
// a lone query–key pair is drawn: see OutlierQ and outliers.go),
// turns each row into levels (PSA §3.3.2: cumulative thresholds, Algorithm 2,
// or fixed per-level quantiles), and emits a plan.Plan whose Level entries
// the cpu executor runs as Algorithm 1. Budget, PlanBudget and Coverage
// report the compute budget the way the paper does: as the fraction of
// blocks an equal-cost binary mask would keep.
package psa

import (
	"context"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Estimator selects how block importance is estimated (PSA §3.3.1).
type Estimator uint8

const (
	// Sampling draws SampleQ query and SampleK key tokens per block and
	// scores a block pair by the largest softmax weight among its sampled
	// pairs, the softmax running over every sampled key of the row (PSA
	// Eq. 4; the paper's estimator for video generation). The first
	// OutlierQ and OutlierK of each block's draws are its most outlying
	// tokens (our extension; the paper's draws are all random).
	Sampling Estimator = iota
	// Antidiagonal sums each Stride×Stride tile of QKᵀ along its
	// antidiagonal, takes the softmax over those sums, and adds them up per
	// block (XAttention's scoring, PSA's estimator for video understanding).
	Antidiagonal
)

// String returns "sampling" or "antidiagonal".
func (e Estimator) String() string {
	switch e {
	case Sampling:
		return "sampling"
	case Antidiagonal:
		return "antidiagonal"
	}
	return fmt.Sprintf("Estimator(%d)", e)
}

// Rule selects how importance rows become levels (PSA §3.3.2).
type Rule uint8

const (
	// Threshold assigns levels by cumulative importance (PSA Algorithm 2):
	// with a row's blocks sorted by importance, level t holds the blocks
	// that the smallest prefix reaching mass τ_t adds after level t−1's, and
	// blocks beyond τ_H are skipped. How many blocks a level gets adapts to
	// each row's distribution.
	Threshold Rule = iota
	// Quantile assigns levels by fixed per-level shares of a row's blocks:
	// the top ⌈q_1·n⌉ blocks get level 1, the next up to ⌈q_2·n⌉ level 2,
	// and so on; the rest are skipped (the quantile-based rule of PSA §4.5).
	Quantile
)

// String returns "threshold" or "quantile".
func (r Rule) String() string {
	switch r {
	case Threshold:
		return "threshold"
	case Quantile:
		return "quantile"
	}
	return fmt.Sprintf("Rule(%d)", r)
}

// defaultThresholds backs DefaultThresholds; never modified.
var defaultThresholds = []float64{0.7, 0.8, 0.9, 0.9}

// DefaultThresholds returns PSA's multi-level thresholds {0.7, 0.8, 0.9,
// 0.9} (§4.5, Table 4): 70% of a row's estimated mass at full resolution, the
// next 10% pooled 2×, the next 10% pooled 4×.
func DefaultThresholds() []float64 { return append([]float64(nil), defaultThresholds...) }

// DefaultScale is what a zero Scale means, and what the CLI's psa method
// runs: with the paper's thresholds at Scale 1 the real LM workload's rel
// L1 is 0.082 at 4K; scaled by 1.2 (capped at 1) it is 0.036 at sparsity
// 0.55. Scale 1 runs the paper's thresholds as they are.
const DefaultScale = 1.2

// DefaultQuantiles returns the cumulative block shares of the authors'
// released default for the quantile rule: the top 5% of blocks at level 1,
// up to 15% at level 2, 25% at level 3 and 50% at level 4, the rest skipped.
func DefaultQuantiles() []float64 { return []float64{0.05, 0.15, 0.25, 0.5} }

// Planner builds PSA plans. The zero value is PSA with H = 4 levels, the
// sampling estimator with a quarter of its draws led by outlier score (our
// extension: OutlierQ, OutlierK), the threshold rule with
// DefaultThresholds scaled by DefaultScale and no similarity cap: the
// CLI's default. A Planner is safe for concurrent use.
type Planner struct {
	// Rule selects Threshold (default) or Quantile level assignment.
	Rule Rule
	// Thresholds are the cumulative importance thresholds τ_1 ≤ … ≤ τ_H in
	// [0, 1] of the Threshold rule; their count is the number of pyramid
	// levels H (1 to plan.MaxLevel). Nil means DefaultThresholds. Equal
	// values collapse levels: {τ} or {τ, τ, τ, τ} is a binary block mask.
	Thresholds []float64
	// Quantiles are the cumulative block shares q_1 ≤ … ≤ q_H in [0, 1] of
	// the Quantile rule; their count is H. Nil means DefaultQuantiles.
	Quantiles []float64
	// Scale multiplies every threshold or quantile, each capped at 1: the
	// one knob that trades compute for accuracy. Values ≥ 1/τ_1 put every
	// block at level 1 (dense). 0 means DefaultScale; 1 runs the
	// thresholds or quantiles as given.
	Scale float64

	// Estimator selects Sampling (default) or Antidiagonal importance.
	Estimator Estimator
	// SampleQ and SampleK are the tokens Sampling draws per query and KV
	// block; 0 means a quarter of the block (at least 1), as the authors'
	// code does. Blocks with fewer tokens use them all.
	SampleQ, SampleK int
	// OutlierQ and OutlierK are how many of Sampling's SampleQ and SampleK
	// tokens per block are the block's most outlying tokens (the largest
	// squared deviations from the block's mean in units of its spread per
	// dimension; see outlierScores) rather than random draws: our
	// extension of PSA §3.3.1, whose draws are all random, so that a
	// needle — a lone key that one query retrieves — is drawn. 0 means a
	// quarter of the sample, rounded up (4 of the default 16); NoOutliers
	// (−1) draws every token at random, as the paper does; values above
	// the sample take the whole sample by score. Blocks whose tokens are
	// all sampled are unaffected.
	OutlierQ, OutlierK int
	// Stride is Antidiagonal's tile edge; 0 means 8.
	Stride int
	// Similarity holds the H−1 cosine thresholds τ_s^(2) … τ_s^(H) of the
	// intra-block similarity cap (PSA App. B.1, Algorithm 3): a KV block may
	// be read at level h only if the mean cosine similarity between the
	// first and last key of its pooling groups of 2^(h-1) tokens exceeds
	// τ_s^(h) for that h or a coarser one. Nil disables the cap; −1
	// everywhere allows every level, 1 everywhere forces level 1.
	Similarity []float64
	// Seed selects the Sampling draw; plans are deterministic given it.
	Seed uint64
}

// Name returns "psa".
func (p Planner) Name() string { return "psa" }

// config is a validated Planner with defaults filled in.
type config struct {
	rule      Rule
	cuts      []float64 // scaled thresholds or quantiles, capped at 1
	levels    int       // H
	estimator Estimator
	sampleQ   int
	sampleK   int
	outQ      int // Sampling: outlier-led draws per query block (0: none)
	outK      int // and per KV block
	stride    int
	sim       []float64
	seed      uint64
}

func (p Planner) config(t plan.Tiling) (config, error) {
	c := config{rule: p.Rule, estimator: p.Estimator, seed: p.Seed, sim: p.Similarity}
	var cuts []float64
	var what string
	switch p.Rule {
	case Threshold:
		cuts, what = p.Thresholds, "Thresholds"
		if cuts == nil {
			cuts = defaultThresholds
		}
	case Quantile:
		cuts, what = p.Quantiles, "Quantiles"
		if cuts == nil {
			cuts = DefaultQuantiles()
		}
	default:
		return c, fmt.Errorf("%w: psa rule %d must be Threshold or Quantile", plan.ErrInvalid, p.Rule)
	}
	if len(cuts) < 1 || len(cuts) > int(plan.MaxLevel) {
		return c, fmt.Errorf("%w: psa %s has %d levels; give 1 to %d values", plan.ErrInvalid, what, len(cuts), plan.MaxLevel)
	}
	scale := p.Scale
	if scale == 0 {
		scale = DefaultScale
	}
	if !(scale > 0) || math.IsInf(scale, 0) {
		return c, fmt.Errorf("%w: psa Scale %v must be positive and finite (0: %v)", plan.ErrInvalid, p.Scale, DefaultScale)
	}
	c.levels = len(cuts)
	c.cuts = make([]float64, len(cuts))
	for i, x := range cuts {
		if !(x >= 0 && x <= 1) {
			return c, fmt.Errorf("%w: psa %s[%d] = %v must be in [0, 1]", plan.ErrInvalid, what, i, x)
		}
		if i > 0 && x < cuts[i-1] {
			return c, fmt.Errorf("%w: psa %s must be non-decreasing, but %v follows %v", plan.ErrInvalid, what, x, cuts[i-1])
		}
		c.cuts[i] = min(1, x*scale)
	}
	if p.Similarity != nil && len(p.Similarity) != c.levels-1 {
		return c, fmt.Errorf("%w: psa Similarity has %d thresholds; a %d-level pyramid needs %d (levels 2..%d)", plan.ErrInvalid, len(p.Similarity), c.levels, c.levels-1, c.levels)
	}
	for i, x := range p.Similarity {
		if !(x >= -1 && x <= 1) {
			return c, fmt.Errorf("%w: psa Similarity[%d] = %v must be a cosine in [-1, 1]", plan.ErrInvalid, i, x)
		}
	}
	switch p.Estimator {
	case Sampling:
		if p.SampleQ < 0 || p.SampleK < 0 {
			return c, fmt.Errorf("%w: psa SampleQ %d and SampleK %d must be ≥ 0 (0 means a quarter of the block)", plan.ErrInvalid, p.SampleQ, p.SampleK)
		}
		c.sampleQ, c.sampleK = p.SampleQ, p.SampleK
		if c.sampleQ == 0 {
			c.sampleQ = max(1, t.BlockQ/4)
		}
		if c.sampleK == 0 {
			c.sampleK = max(1, t.BlockK/4)
		}
		c.sampleQ, c.sampleK = min(c.sampleQ, t.BlockQ), min(c.sampleK, t.BlockK)
		if p.OutlierQ < NoOutliers || p.OutlierK < NoOutliers {
			return c, fmt.Errorf("%w: psa OutlierQ %d and OutlierK %d must be ≥ %d (0 means a quarter of the sample, %d none)", plan.ErrInvalid, p.OutlierQ, p.OutlierK, NoOutliers, NoOutliers)
		}
		c.outQ, c.outK = outliers(p.OutlierQ, c.sampleQ), outliers(p.OutlierK, c.sampleK)
	case Antidiagonal:
		c.stride = p.Stride
		if c.stride == 0 {
			c.stride = 8
		}
		if c.stride < 1 || c.stride > min(t.BlockQ, t.BlockK) {
			return c, fmt.Errorf("%w: psa Stride %d must be in 1..min(BlockQ, BlockK) = %d (0 means 8)", plan.ErrInvalid, p.Stride, min(t.BlockQ, t.BlockK))
		}
	default:
		return c, fmt.Errorf("%w: psa estimator %d must be Sampling or Antidiagonal", plan.ErrInvalid, p.Estimator)
	}
	return c, nil
}

// outliers resolves OutlierQ or OutlierK x for a sample of s tokens: 0
// means ⌈s/4⌉, NoOutliers none, and at most s.
func outliers(x, s int) int {
	switch x {
	case 0:
		return (s + 3) / 4
	case NoOutliers:
		return 0
	}
	return min(x, s)
}

// prepare checks the parameters and inputs and returns the dense plan of
// t (visibility and the causally visible blocks of each row) and p's
// configuration for it.
func (p Planner) prepare(t plan.Tiling, q, k *tensor.Tensor) (*plan.Plan, config, error) {
	dense, err := plan.Dense(t)
	if err != nil {
		return nil, config{}, err
	}
	c, err := p.config(t)
	if err != nil {
		return nil, config{}, err
	}
	if err := heads.CheckInputs(t, q, k, "psa"); err != nil {
		return nil, config{}, err
	}
	return dense, c, nil
}

// Plan estimates block importance, assigns pyramid levels and returns the
// plan. Causally partial (diagonal) blocks are never pooled: a pooled key
// would average visible and future tokens, so such a block assigned a coarse
// level is read at level 1 instead.
func (p Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	dense, c, err := p.prepare(t, q, k)
	if err != nil {
		return nil, err
	}
	g := t.Geometry
	var caps []plan.Level // per (b, KV head, KV block): coarsest admissible level
	if c.sim != nil {
		caps = similarityCaps(dense, k, c.sim)
	}
	levels := make([]plan.Level, len(dense.KVBlock)) // aligned with dense's entries
	err = heads.ForEachWorker(ctx, g.B*g.Hq, func() func(int) {
		est := newEstimator(dense, c, q, k)
		var imp []float64
		var qbs []int
		var rowBlocks [][]int32
		return func(i int) {
			b, h := i/g.Hq, i%g.Hq
			est.head(b, h)
			qbs = qbs[:0]
			for qb := range dense.QBlocks() {
				if len(qbs) == 0 || qbs[0]+len(qbs) <= qb {
					// The next group of query blocks: their logits at once.
					qbs, rowBlocks = qbs[:0], rowBlocks[:0]
					for x := qb; x < min(qb+est.groupSize(), dense.QBlocks()); x++ {
						blocks, _ := dense.Entries(dense.Row(b, h, x))
						qbs, rowBlocks = append(qbs, x), append(rowBlocks, blocks)
					}
					est.group(qbs, rowBlocks)
				}
				r := dense.Row(b, h, qb)
				blocks := rowBlocks[qb-qbs[0]]
				imp = est.rank(&est.slots[qb-qbs[0]], imp[:0])
				lv := levels[dense.RowStart[r]:dense.RowStart[r+1]]
				assign(c, imp, lv)
				for e, kb := range blocks {
					if lv[e] == plan.Skip {
						continue
					}
					if caps != nil {
						lv[e] = min(lv[e], caps[(b*g.Hkv+g.KVHead(h))*dense.KBlocks()+int(kb)])
					}
					if _, partial := dense.BlockVisibility(qb, int(kb)); partial {
						lv[e] = plan.Full
					}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	bld, err := plan.NewBuilder(t)
	if err != nil {
		return nil, err
	}
	for r := range dense.Rows() {
		for e := dense.RowStart[r]; e < dense.RowStart[r+1]; e++ {
			if levels[e] != plan.Skip {
				bld.Add(r, int(dense.KVBlock[e]), levels[e])
			}
		}
	}
	return bld.Build()
}
