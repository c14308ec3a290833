package selftest

import (
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// xattnPlanners are the xattn configurations the device planner is checked
// with: S2O's comparison setting (stride 16, threshold 0.9), XAttention's
// stride 8 at a lower threshold, and threshold 1.
func xattnPlanners() []plan.Planner {
	return []plan.Planner{
		xattn.Planner{Stride: 16, Threshold: 0.9},
		xattn.Planner{Stride: 8, Threshold: 0.6},
		xattn.Planner{Stride: 16, Threshold: 1},
	}
}

// xattnTieBreak returns the judge of xattn rows that may differ from the CPU's
// at a documented tie-break, or nil: xattn's device plans must equal the CPU's.
func xattnTieBreak(plan.Planner, plan.Tiling, *tensor.Tensor, *tensor.Tensor) rowJudge { return nil }
