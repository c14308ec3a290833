package selftest

import (
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// flexprefillPlanners are the flexprefill configurations the device
// planner is checked with: the S2O paper's γ=0.9 τ=0.1, every head
// vertical-slash (τ=0), every head query-aware (τ=1 exceeds the largest
// square-root JS divergence, √ln2), and bounded budgets.
func flexprefillPlanners() []plan.Planner {
	return []plan.Planner{
		flexprefill.Planner{Gamma: 0.9, Tau: 0.1},
		flexprefill.Planner{Gamma: 0.95, Tau: 0},
		flexprefill.Planner{Gamma: 0.9, Tau: 1},
		flexprefill.Planner{Gamma: 0.8, Tau: 0.3, MinBudget: 2, MaxBudget: 8},
	}
}

// flexprefillTieBreak returns the judge of flexprefill rows that may differ from the CPU's
// at a documented tie-break, or nil: flexprefill's device plans must equal the CPU's.
func flexprefillTieBreak(plan.Planner, plan.Tiling, *tensor.Tensor, *tensor.Tensor) rowJudge {
	return nil
}
