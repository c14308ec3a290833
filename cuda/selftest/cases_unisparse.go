package selftest

import "github.com/sparseattn/sparseattn/plan"

// unisparsePlanners are the unisparse configurations the device planner is checked
// with.
func unisparsePlanners() []plan.Planner { return nil }
