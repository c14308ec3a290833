package main

import (
	"errors"
	"io"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestAutoPlannerChoices checks what the CLI's auto hands the device
// planner: its heads' choices when they cover the problem's heads; an
// error wrapping cuda.ErrUnsupported (the CLI then plans on the CPU and
// says why) before self-tuning and for layers stacked along the head
// axis; the usage error for a tiling other than the profile's.
func TestAutoPlannerChoices(t *testing.T) {
	tl := func(hq, bq int) plan.Tiling {
		return plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: hq, Hkv: 1, Nq: 128, Nk: 128, D: 16, Dv: 16}, Causal: true, BlockQ: bq, BlockK: 64}
	}
	heads := []auto.Head{{Method: "sparge", Knob: 0.9}, {Method: auto.Dense}, {Method: "sparge", Knob: 0.9}, {Method: "xattn", Knob: 0.9}}
	profiled := &autoPlanner{heads: heads, blockQ: 64, blockK: 64, causal: true}
	for _, tc := range []struct {
		name   string
		p      *autoPlanner
		t      plan.Tiling
		chosen int // distinct choices when no error
		err    error
	}{
		{"profile", profiled, tl(4, 64), 3, nil},
		{"self-tuning, not yet tuned", &autoPlanner{budget: auto.DefaultBudget, log: io.Discard}, tl(4, 64), 0, cuda.ErrUnsupported},
		{"stacked layers", profiled, tl(2, 64), 0, cuda.ErrUnsupported},
		{"other tiling", profiled, tl(4, 128), 0, errUsage},
		{"other width", profiled, tl(3, 64), 0, auto.ErrPlan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planners, owner, err := tc.p.Choices(tc.t)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if len(planners) != tc.chosen || (err == nil && len(owner) != tc.t.Geometry.Hq) {
				t.Errorf("%d planners for %d heads, want %d for %d", len(planners), len(owner), tc.chosen, tc.t.Geometry.Hq)
			}
		})
	}
}
