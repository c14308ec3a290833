package selftest

import (
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

// unisparseTieBreak returns the judge of unisparse rows that may differ from the CPU's
// at a documented tie-break, or nil: unisparse's device plans must equal the CPU's.
func unisparseTieBreak(plan.Planner, plan.Tiling, *tensor.Tensor, *tensor.Tensor) rowJudge {
	return nil
}
