package selftest

import "github.com/sparseattn/sparseattn/plan"

// xattnPlanners are the xattn configurations the device planner is checked
// with.
func xattnPlanners() []plan.Planner { return nil }
