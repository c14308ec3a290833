package selftest

import (
	"context"
	"fmt"
	"slices"

	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// unisparsePlanners are the unisparse configurations the device planner is
// checked with: the defaults (average pooling, c_q 16, c_k 4, Top-P 0.95),
// a lower Top-P with max pooling and balanced 8×8 compression, head
// compression over two heads, and seeded stochastic pooling.
func unisparsePlanners() []plan.Planner {
	return []plan.Planner{
		unisparse.Planner{},
		unisparse.Planner{TopP: 0.7, CQ: 8, CK: 8, Pooling: unisparse.Max},
		unisparse.Planner{TopP: 0.9, CQ: 4, CK: 2, CH: 2},
		unisparse.Planner{TopP: 0.8, CQ: 4, CK: 4, Pooling: unisparse.Stochastic, Seed: 7},
	}
}

// unisparseTieBreak judges unisparse rows that differ from the CPU's: the
// device's composite tokens are the CPU's bit for bit, but it scores them
// in float32 on the tensor cores (each composite split into bf16 halves),
// so its row must be the Top-P set of the CPU's exact float64 masses under
// a perturbation of the block shares by tensorCoreShareTol, with rows of
// 3·D products. With the outlier query (unisparse's default) the row is
// that set with one more block: the outlier token is the CPU's bit for bit
// too, and its block masses come from tensor-core logits against the
// individual keys, so the block must be within tensorCoreShareTol (rows of
// 3·D products of split operands, Nk columns) of the heaviest of the
// CPU's. That bound also covers the device's two other roundings there:
// for one head per group and 16-bit inputs it multiplies the unscaled
// token by the exact keys (D exact products, the scale applied to the sum,
// where the CPU rounds the scaled token to float32: 2⁻²⁴ of the bound),
// and it compares blocks of different column slices through float64
// log2 masses with 2⁻³⁶ of their magnitude dropped. Top-P 1 keeps every
// block on both sides: no tie there.
func unisparseTieBreak(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) rowJudge {
	u, ok := p.(unisparse.Planner)
	if !ok {
		return nil
	}
	g := t.Geometry
	cfg, err := u.Resolve(t)
	qBlocks := (g.Nq + t.BlockQ - 1) / t.BlockQ
	scores := map[int]unisparse.Scores{} // by b·Hq + the group's first head
	return func(ctx context.Context, row int, cpuRow, gpuRow []int32) error {
		if err != nil {
			return err
		}
		if cfg.TopP >= 1 {
			return fmt.Errorf("Top-P %v keeps every block on both sides", cfg.TopP)
		}
		bh, qb := row/qBlocks, row%qBlocks
		b, h0 := bh/g.Hq, bh%g.Hq/cfg.CH*cfg.CH
		key := b*g.Hq + h0
		s, ok := scores[key]
		if !ok {
			var err error
			if s, err = u.BlockScores(ctx, t, q, k, b, h0); err != nil {
				return err
			}
			scores[key] = s
		}
		sh := shares(s.Mass[qb])
		if sh == nil {
			return fmt.Errorf("query block %d has no mass, yet the plans differ", qb)
		}
		cols := (g.Nk + cfg.CK - 1) / cfg.CK
		tol := tensorCoreShareTol(s.Bound, 3*g.D, cols, true)
		if s.Outlier == nil {
			return thresholdWithin(sh, gpuRow, nil, cfg.TopP, tol)
		}
		return outlierRowWithin(sh, s.Outlier[qb], gpuRow, cfg.TopP, tol, tensorCoreShareTol(s.OutlierBound, 3*g.D, g.Nk, true))
	}
}

// outlierRowWithin accepts row when it is a Top-P set of the shares sh
// within tol (thresholdWithin) together with a block e whose share of the
// outlier query's mass is within otol of the heaviest: e inside the set,
// or the set being row without e.
func outlierRowWithin(sh []float64, o unisparse.Outlier, row []int32, topP, tol, otol float64) error {
	if len(o.Mass) == 0 {
		return fmt.Errorf("no outlier mass (token %d), yet the plans differ", o.Token)
	}
	top := slices.Max(o.Mass)
	var last error
	for i, e := range row {
		if int(e) >= len(o.Mass) || o.Mass[e] < top-otol {
			continue
		}
		if last = thresholdWithin(sh, row, nil, topP, tol); last == nil {
			return nil
		}
		if last = thresholdWithin(sh, slices.Delete(slices.Clone(row), i, i+1), nil, topP, tol); last == nil {
			return nil
		}
	}
	if last == nil {
		return fmt.Errorf("no kept block within %.3g of the outlier query's heaviest (block %d, share %.6f)", otol, o.Block, top)
	}
	return fmt.Errorf("neither the row nor the row less an outlier block is a Top-P set: %w", last)
}
