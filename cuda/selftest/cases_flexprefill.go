package selftest

import "github.com/sparseattn/sparseattn/plan"

// flexprefillPlanners are the flexprefill configurations the device planner is checked
// with.
func flexprefillPlanners() []plan.Planner { return nil }
