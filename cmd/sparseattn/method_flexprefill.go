package main

import (
	"flag"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/plan"
)

// flexprefillMethod is FlexPrefill: per head, query-aware or
// vertical-slash by a JS-divergence test, each covering γ of the
// estimated attention.
func flexprefillMethod() *method {
	var (
		gamma, tau     float64
		minBud, maxBud int
	)
	build := func(gamma float64) (plan.Planner, error) {
		if !(gamma > 0 && gamma <= 1) {
			return nil, fmt.Errorf("%w: --flexprefill-gamma %v must be in (0, 1]", errUsage, gamma)
		}
		// 0 is rejected, not passed on as the package default, so that a
		// command written when 0 meant "never query-aware" fails loudly.
		if tau == 0 || math.IsNaN(tau) || math.IsInf(tau, 0) {
			return nil, fmt.Errorf("%w: --flexprefill-tau %v must be positive and finite, or negative for every head vertical-slash", errUsage, tau)
		}
		if minBud < 0 || maxBud < 0 || (maxBud > 0 && maxBud < minBud) {
			return nil, fmt.Errorf("%w: --flexprefill-min-budget %d and --flexprefill-max-budget %d must be ≥ 0, max ≥ min (0: no bound)", errUsage, minBud, maxBud)
		}
		return flexprefill.Planner{Gamma: gamma, Tau: tau, MinBudget: minBud, MaxBudget: maxBud}, nil
	}
	return &method{
		name: "flexprefill",
		flags: func(fs *flag.FlagSet) {
			fs.Float64Var(&gamma, "flexprefill-gamma", flexprefill.DefaultGamma, "flexprefill: attention share γ in (0,1] each pattern covers")
			fs.Float64Var(&tau, "flexprefill-tau", flexprefill.DefaultTau, "flexprefill: JS distance below which a head is query-aware; negative: never (every head vertical-slash)")
			fs.IntVar(&minBud, "flexprefill-min-budget", 0, "flexprefill: fewest vertical and slash blocks per head (0: 1)")
			fs.IntVar(&maxBud, "flexprefill-max-budget", 0, "flexprefill: most vertical and slash blocks per head (0: no bound)")
		},
		planner: func() (plan.Planner, error) { return build(gamma) },
		knob: &knob{
			name:    "gamma",
			values:  []float64{0.999, 0.99, 0.95, 0.9, 0.8, 0.6},
			planner: build,
		},
	}
}
