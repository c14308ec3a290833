package selftest

import (
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// spargePlanners are the sparge configurations the device planner is checked
// with: the defaults (top-k 0.5, θ 0.3; on N(0, 1) noise every block is
// non-self-similar, so this checks the judge's fix rows, and the llm
// workload the whole predictor); TopCdf with the judge off and the sink;
// top-k with θ near a 128-token query block's noise CosSim (1/128), so that
// some query rows are judged and some predicted; TopCdf with θ near a
// 64-token key block's (1/64), so that some key columns are fixed.
// TestSpargeHeads checks per-head parameters.
func spargePlanners() []plan.Planner {
	return []plan.Planner{
		sparge.Planner{},
		sparge.Planner{Params: sparge.Params{CDF: 0.9, Theta: -1}, Sink: true},
		sparge.Planner{Params: sparge.Params{TopK: 0.3, Theta: 0.0078}},
		sparge.Planner{Params: sparge.Params{CDF: 0.6, Theta: 0.0156}},
	}
}

// spargeTieBreak returns the judge of sparge rows that may differ from the CPU's
// at a documented tie-break, or nil: sparge's device plans must equal the CPU's.
func spargeTieBreak(plan.Planner, plan.Tiling, *tensor.Tensor, *tensor.Tensor) rowJudge { return nil }
