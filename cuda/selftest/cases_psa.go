package selftest

import (
	"context"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// psaPlanners are the psa configurations the device planner is checked
// with: the CLI's default (sampling with a quarter of the draws led by
// outlier score, threshold, Scale psa.DefaultScale), the quantile rule
// with odd sample counts and a seed, every query draw by score and one key
// draw, the paper's all-random draw (psa.NoOutliers), the antidiagonal
// estimator with the similarity cap, and a two-level antidiagonal pyramid
// of stride 16 under the quantile rule.
func psaPlanners() []plan.Planner {
	return []plan.Planner{
		psa.Planner{Scale: psa.DefaultScale},
		psa.Planner{Rule: psa.Quantile, SampleQ: 13, SampleK: 5, Seed: 0x5eed, Scale: 1},
		psa.Planner{SampleQ: 7, SampleK: 9, OutlierQ: 7, OutlierK: 1, Seed: 3, Scale: psa.DefaultScale},
		psa.Planner{OutlierQ: psa.NoOutliers, OutlierK: psa.NoOutliers, Scale: psa.DefaultScale},
		psa.Planner{Estimator: psa.Antidiagonal, Similarity: []float64{0.2, 0.1, 0.0}, Scale: 1},
		psa.Planner{Estimator: psa.Antidiagonal, Stride: 16, Rule: psa.Quantile, Quantiles: []float64{0.3, 0.6}, Scale: 1.1},
	}
}

// levelJudge accepts a plan row in which the device and CPU planners
// differ in blocks or levels, given the device row's blocks and levels,
// or says why the difference is not a documented tie-break.
type levelJudge func(ctx context.Context, row int, gpuBlocks []int32, gpuLevels []plan.Level) error

// levelTieBreakFor returns the level judge of planners whose plans carry
// levels (psa), or nil.
func levelTieBreakFor(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) levelJudge {
	return psaTieBreak(p, t, q, k)
}

// psaTieBreak judges psa rows that differ from the CPU's. The device draws
// the same tokens (the outlier scores that lead Sampling's draws in the
// CPU's float32 arithmetic, bit for bit, so the judge takes the CPU's
// draws as they are), caps and assigns levels with the CPU's float64
// arithmetic, but its logits are float32 tensor-core sums (of bf16 halves
// for other input types) where the CPU's are float32 kernel.MatMul sums,
// and its softmax terms are 2^{(x − m)·lscale·log2 e} by ex2.approx (one
// FFMA for the scaled shift, as in the block-mass kernel, whose rounding
// and exp2 error tensorCoreShareTol's δ counts): tensorCoreShareTol's η
// bounds how far either side's block share
// (importance over the row's total) lies, relatively, from the exact one,
// for Sampling's largest weight as for Antidiagonal's summed weight (both
// move by the weights' factor e^{±2δ} and the row sum's rounding), so the
// two differ by at most 2η, the tolerance it returns. The judge accepts a
// row when each visible block's device level lies in the range that the
// CPU's shares perturbed by that much allow (psaLevelRanges), after the
// cap and the causal rule.
func psaTieBreak(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) levelJudge {
	x, ok := p.(psa.Planner)
	if !ok {
		return nil
	}
	g := t.Geometry
	s, err := x.Settings(t)
	var caps []plan.Level
	if err == nil {
		caps, err = x.Caps(t, k)
	}
	dense, derr := plan.Dense(t)
	if err == nil {
		err = derr
	}
	split := q.DType() != tensor.BFloat16 || k.DType() != tensor.BFloat16
	width, perBlock := g.D, s.SampleK
	if s.Estimator == psa.Antidiagonal {
		width, perBlock = s.Stride*g.D, (t.BlockK+s.Stride-1)/s.Stride
	}
	n := width
	if split {
		n *= 3
	}
	qBlocks := (g.Nq + t.BlockQ - 1) / t.BlockQ
	kBlocks := (g.Nk + t.BlockK - 1) / t.BlockK
	imps := map[int][][]float64{} // by b·Hq + h
	bounds := map[int]float64{}
	return func(ctx context.Context, row int, gpuBlocks []int32, gpuLevels []plan.Level) error {
		if err != nil {
			return err
		}
		bh, qb := row/qBlocks, row%qBlocks
		b, h := bh/g.Hq, bh%g.Hq
		imp, ok := imps[bh]
		if !ok {
			var err error
			if imp, err = x.Importance(ctx, t, q, k, b, h); err != nil {
				return err
			}
			imps[bh] = imp
			bounds[bh] = float64(t.SoftmaxScale()) * maxNorm(q, b, h, g.Nq, g.D) * maxNorm(k, b, g.KVHead(h), g.Nk, g.D)
		}
		visible, _ := dense.Entries(row)
		sh := shares(imp[qb])
		// The device folds each 64-column tile into a running row sum,
		// rescaled to the new maximum (psa_running): up to one more shift
		// (B·2⁻²⁴) and exp2 (2⁻²²) per tile on each weight, counted as nt
		// more products and 2·nt more sums.
		cols := len(visible) * perBlock
		nt := (cols + 63) / 64
		r := tensorCoreShareTol(bounds[bh], n+nt, cols+2*nt, split)
		lo, hi := psaLevelRanges(s, imp[qb], sh, r)
		got := make([]plan.Level, len(visible))
		for i, kb := range gpuBlocks {
			if int(kb) >= len(visible) || kb < 0 {
				return fmt.Errorf("block %d listed of %d visible", kb, len(visible))
			}
			got[kb] = gpuLevels[i]
			if got[kb] == plan.Skip {
				return fmt.Errorf("block %d listed at level 0", kb)
			}
		}
		H := len(s.Cuts)
		for kb := range visible {
			post := func(rank int) int {
				if rank > H {
					return rank
				}
				if _, partial := dense.BlockVisibility(qb, kb); partial {
					return 1
				}
				if caps != nil {
					rank = min(rank, int(caps[(b*g.Hkv+g.KVHead(h))*kBlocks+kb]))
				}
				return rank
			}
			want := levelRank(got[kb], H)
			if l, u := post(lo[kb]), post(hi[kb]); want < l || want > u {
				return fmt.Errorf("block %d at level %d, where shares perturbed by %.3g allow %d..%d (H+1 = skip)", kb, got[kb], r, l, u)
			}
		}
		return nil
	}
}

// levelRank orders levels by coarseness: 1..H, and H+1 for Skip.
func levelRank(l plan.Level, h int) int {
	if l == plan.Skip {
		return h + 1
	}
	return int(l)
}

// psaLevelRanges returns, per block of a row with importance imp (shares
// sh, nil when the row has no mass), the coarseness ranks (levelRank) that
// psa's level rule may give it when every share may be off by a relative
// r: a block certainly ranks after the blocks whose share exceeds its own
// under every such perturbation and possibly after those that may; its
// level follows from the mass (Threshold) or count (Quantile) of those,
// and the rules are monotone in both. A row without mass is uniform, in
// key order, each 1/n.
func psaLevelRanges(s psa.Settings, imp, sh []float64, r float64) (lo, hi []int) {
	n := len(imp)
	H := len(s.Cuts)
	lo, hi = make([]int, n), make([]int, n)
	byMass := func(before float64) int {
		for t, tau := range s.Cuts {
			if tau >= 1 || before < tau {
				return t + 1
			}
		}
		return H + 1
	}
	byCount := func(p int) int {
		for t, share := range s.Cuts {
			if p < int(math.Ceil(share*float64(n)-1e-9)) {
				return t + 1
			}
		}
		return H + 1
	}
	for e := range n {
		if sh == nil {
			// Uniform: blocks in key order, each 1/n.
			if s.Rule == psa.Quantile {
				lo[e], hi[e] = byCount(e), byCount(e)
			} else {
				const slack = 1e-12 // 1/n added e times
				lo[e], hi[e] = byMass(float64(e)/float64(n)-slack), byMass(float64(e)/float64(n)+slack)
			}
			continue
		}
		var sure, maybe float64
		var nSure, nMaybe int
		for f := range n {
			if f == e {
				continue
			}
			if sh[f]*(1-r) > sh[e]*(1+r) {
				sure += sh[f] * (1 - r)
				nSure++
			}
			if sh[f]*(1+r) >= sh[e]*(1-r) {
				maybe += sh[f] * (1 + r)
				nMaybe++
			}
		}
		if s.Rule == psa.Quantile {
			lo[e], hi[e] = byCount(nSure), byCount(nMaybe)
		} else {
			const slack = 1e-12 // float64 sums in another order
			lo[e], hi[e] = byMass(sure-slack), byMass(maybe+slack)
		}
	}
	return lo, hi
}

// maxNorm is the largest Euclidean norm of the n rows of head h of batch
// b of x.
func maxNorm(x *tensor.Tensor, b, h, n, d int) float64 {
	row := make([]float32, d)
	var m float64
	for i := range n {
		x.ReadRow(b, h, i, row)
		var s float64
		for _, v := range row {
			s += float64(v) * float64(v)
		}
		m = max(m, math.Sqrt(s))
	}
	return m
}
