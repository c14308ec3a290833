package selftest

import (
	"context"
	"fmt"

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
// 3·D products. Top-P 1 keeps every block on both sides: no tie there.
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
		return thresholdWithin(sh, gpuRow, nil, cfg.TopP, tensorCoreShareTol(s.Bound, 3*g.D, cols, true))
	}
}
