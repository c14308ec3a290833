package main

import (
	"flag"
	"fmt"

	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/plan"
)

// unisparseMethod is UniSparse: composite tokens pooled from c_q queries and
// c_k keys (optionally c_h heads), compressed attention summed per block
// pair, and Top-P block selection, plus (unless --unisparse-outlier=false)
// each query block's outlier query's heaviest block, this project's
// extension.
func unisparseMethod() *method {
	var topP float64
	var cq, ck, ch int
	var pool string
	var seed uint64
	var outlier bool
	build := func(topP float64) (plan.Planner, error) {
		u := unisparse.Planner{TopP: topP, CQ: cq, CK: ck, CH: ch, Seed: seed, NoOutlier: !outlier}
		switch pool {
		case "average":
			u.Pooling = unisparse.Average
		case "max":
			u.Pooling = unisparse.Max
		case "stochastic":
			u.Pooling = unisparse.Stochastic
		default:
			return nil, fmt.Errorf("%w: --unisparse-pool must be average, max or stochastic, not %q", errUsage, pool)
		}
		switch {
		case !(topP > 0 && topP <= 1):
			return nil, fmt.Errorf("%w: --unisparse-top-p %v must be in (0, 1]", errUsage, topP)
		case cq < 1 || ck < 1:
			return nil, fmt.Errorf("%w: --unisparse-cq and --unisparse-ck must be ≥ 1 and divide --block-q and --block-k", errUsage)
		case ch < 1:
			return nil, fmt.Errorf("%w: --unisparse-ch must be ≥ 1 (1 = no head compression) and divide the query heads", errUsage)
		}
		return u, nil
	}
	return &method{
		name: "unisparse",
		flags: func(fs *flag.FlagSet) {
			fs.Float64Var(&topP, "unisparse-top-p", unisparse.DefaultTopP, "unisparse: share of each query block's compressed attention mass its kept KV blocks reach, in (0,1]")
			fs.IntVar(&cq, "unisparse-cq", unisparse.DefaultCQ, "unisparse: queries per composite token c_q (divides --block-q)")
			fs.IntVar(&ck, "unisparse-ck", unisparse.DefaultCK, "unisparse: keys per composite token c_k (divides --block-k)")
			fs.IntVar(&ch, "unisparse-ch", 1, "unisparse: query heads averaged per mask c_h (divides the query heads; 1 = none)")
			fs.StringVar(&pool, "unisparse-pool", "average", "unisparse: composite pooling, average (UniSparse), max or stochastic (the paper's ablation)")
			fs.Uint64Var(&seed, "unisparse-seed", 0, "unisparse: seed of stochastic pooling")
			fs.BoolVar(&outlier, "unisparse-outlier", true, "unisparse: also keep each query block's outlier query's heaviest KV block (our extension; false: the paper's Top-P alone)")
		},
		planner: func() (plan.Planner, error) { return build(topP) },
		knob: &knob{
			name:    "top-p",
			values:  []float64{0.999, 0.99, 0.98, 0.95, 0.9, 0.8},
			planner: build,
		},
	}
}
