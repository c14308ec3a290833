package main

import "github.com/sparseattn/sparseattn/plan"

// denseMethod is the exact causal-aware pass every other method is
// compared with.
func denseMethod() *method {
	return &method{
		name:    "dense",
		planner: func() (plan.Planner, error) { return plan.DensePlanner{}, nil },
	}
}
