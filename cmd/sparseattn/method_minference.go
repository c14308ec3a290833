package main

import (
	"flag"
	"fmt"

	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/plan"
)

// minferenceMethod is MInference's vertical-slash pattern, probed with the
// last queries and converted to blocks.
func minferenceMethod() *method {
	var lastQ, vertical, slash int
	build := func(budget float64) (plan.Planner, error) {
		if lastQ < 1 || vertical < 0 || slash < 0 {
			return nil, fmt.Errorf("%w: --minference-last-q must be ≥ 1, --minference-vertical and --minference-slash ≥ 0", errUsage)
		}
		if !(budget > 0 && budget <= 1) {
			return nil, fmt.Errorf("%w: --minference-budget %v must be in (0, 1]", errUsage, budget)
		}
		// 0 lines: the package default for the input's length, which the
		// budget (the sweep knob) then scales.
		return minference.Planner{LastQ: lastQ, Vertical: vertical, Slash: slash, Budget: budget}, nil
	}
	var budget float64
	return &method{
		name: "minference",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&lastQ, "minference-last-q", minference.DefaultLastQ, "minference: probe queries (the last ones)")
			fs.IntVar(&vertical, "minference-vertical", 0, "minference: vertical lines (keys) kept per head; 0 = MInference's 1000 at 128K tokens, scaled to the input's length, at least --minference-last-q")
			fs.IntVar(&slash, "minference-slash", 0, "minference: slash lines (diagonals) kept per head; 0 = MInference's 6096 at 128K tokens, scaled to the input's length")
			fs.Float64Var(&budget, "minference-budget", 1, "minference: fraction in (0,1] of --minference-vertical and --minference-slash kept (the sweep knob)")
		},
		planner: func() (plan.Planner, error) { return build(budget) },
		knob: &knob{
			name:    "budget",
			values:  []float64{1, 0.5, 0.25, 0.1, 0.05, 0.02},
			planner: build,
		},
	}
}
