package main

import (
	"flag"
	"fmt"

	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/plan"
)

// oracleMethod keeps, per query block, the fewest KV blocks whose exact
// attention mass reaches a cumulative fraction: the upper bound any
// predictor can reach at a given sparsity. It is a reference: its plan costs
// about a dense pass, so its help says so and issue 16's planning-cost bound
// (10% of a dense pass) exempts it.
func oracleMethod() *method {
	var cdf float64
	build := func(cdf float64) (plan.Planner, error) {
		if !(cdf > 0 && cdf <= 1) {
			return nil, fmt.Errorf("%w: --oracle-cdf %v must be in (0, 1]", errUsage, cdf)
		}
		return oracle.Planner{CDF: cdf}, nil
	}
	return &method{
		name: "oracle",
		flags: func(fs *flag.FlagSet) {
			fs.Float64Var(&cdf, "oracle-cdf", oracle.DefaultCDF, "oracle (a reference, not a speedup: it plans from the exact attention map, which costs about one dense pass, 0.8-1.4x on the CPU at 16K): cumulative attention mass each query block keeps, in (0,1]")
		},
		planner: func() (plan.Planner, error) { return build(cdf) },
		knob: &knob{
			name:    "cdf",
			values:  []float64{0.999, 0.99, 0.98, 0.95, 0.9, 0.8},
			planner: build,
		},
	}
}
