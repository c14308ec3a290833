package selftest

import (
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// minferencePlanners are the minference configurations the device planner
// is checked with: MInference's defaults, a tight budget (so that the
// top-k cut falls inside the scored lines, and fewer verticals than
// sinks), and more probe rows than one logits block (100 > 64).
func minferencePlanners() []plan.Planner {
	return []plan.Planner{
		minference.Planner{LastQ: 64, Vertical: 1000, Slash: 6096},
		minference.Planner{LastQ: 16, Vertical: 20, Slash: 150},
		minference.Planner{LastQ: 100, Vertical: 200, Slash: 300},
	}
}

// minferenceTieBreak returns the judge of minference rows that may differ from the CPU's
// at a documented tie-break, or nil: minference's device plans must equal the CPU's.
func minferenceTieBreak(plan.Planner, plan.Tiling, *tensor.Tensor, *tensor.Tensor) rowJudge {
	return nil
}
