package selftest

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// xattnPlanners are the xattn configurations the device planner is checked
// with: S2O's comparison setting (stride 16, threshold 0.9), XAttention's
// stride 8 at a lower threshold, and threshold 1.
func xattnPlanners() []plan.Planner {
	return []plan.Planner{
		xattn.Planner{Stride: 16, Threshold: 0.9},
		xattn.Planner{Stride: 8, Threshold: 0.6},
		xattn.Planner{Stride: 16, Threshold: 1},
	}
}

// xattnTieBreak judges xattn rows that differ from the CPU's: the device
// scores antidiagonals in float32 on the tensor cores, so its row must be
// the threshold selection (causal: first and diagonal block forced) of the
// CPU's exact float64 scores under a perturbation of the block shares by
// tensorCoreShareTol, with rows of S·D products (three per element for
// float32 inputs, split into bf16 halves).
func xattnTieBreak(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) rowJudge {
	x, ok := p.(xattn.Planner)
	if !ok {
		return nil
	}
	g := t.Geometry
	split := q.DType() == tensor.Float32 || k.DType() != q.DType()
	n := x.Stride * g.D
	if split {
		n *= 3
	}
	cols := (g.Nk + x.Stride - 1) / x.Stride
	qBlocks := (g.Nq + t.BlockQ - 1) / t.BlockQ
	dense, err := plan.Dense(t)
	scores := map[int]xattn.Scores{} // by b·Hq + h
	return func(ctx context.Context, row int, cpuRow, gpuRow []int32) error {
		if err != nil {
			return err
		}
		bh, qb := row/qBlocks, row%qBlocks
		s, ok := scores[bh]
		if !ok {
			var err error
			if s, err = x.BlockScores(ctx, t, q, k, bh/g.Hq, bh%g.Hq); err != nil {
				return err
			}
			scores[bh] = s
		}
		visible, _ := dense.Entries(row)
		sh := shares(s.Mass[qb][:len(visible)])
		if sh == nil {
			return fmt.Errorf("query block %d has no estimated mass, yet the plans differ", qb)
		}
		var forced []int32
		if t.Causal && len(visible) > 0 {
			forced = []int32{0, int32(len(visible) - 1)}
		}
		return thresholdWithin(sh, gpuRow, forced, x.Threshold, tensorCoreShareTol(s.Bound, n, cols, split))
	}
}
