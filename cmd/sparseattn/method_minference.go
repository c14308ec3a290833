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
		if lastQ < 1 || vertical < 1 || slash < 1 {
			return nil, fmt.Errorf("%w: --minference-last-q, --minference-vertical and --minference-slash must be ≥ 1", errUsage)
		}
		if !(budget > 0 && budget <= 1) {
			return nil, fmt.Errorf("%w: --minference-budget %v must be in (0, 1]", errUsage, budget)
		}
		return minference.Planner{
			LastQ:    lastQ,
			Vertical: max(1, int(budget*float64(vertical))),
			Slash:    max(1, int(budget*float64(slash))),
		}, nil
	}
	var budget float64
	return &method{
		name: "minference",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&lastQ, "minference-last-q", 64, "minference: probe queries (the last ones)")
			fs.IntVar(&vertical, "minference-vertical", 1000, "minference: vertical lines (keys) kept per head")
			fs.IntVar(&slash, "minference-slash", 6096, "minference: slash lines (diagonals) kept per head")
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
