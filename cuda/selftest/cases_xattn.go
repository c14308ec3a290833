package selftest

import (
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
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
