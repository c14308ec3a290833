package main

import (
	"flag"
	"fmt"

	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/plan"
)

// windowMethod is the static sink + sliding-window baseline.
func windowMethod() *method {
	var sink, size int
	build := func(sink, size int) (plan.Planner, error) {
		if sink < 0 || size < 0 {
			return nil, fmt.Errorf("%w: --window-sink and --window-size must be ≥ 0", errUsage)
		}
		return window.Planner{Sink: sink, Window: size}, nil
	}
	return &method{
		name: "window",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&sink, "window-sink", window.DefaultSink, "window: leading sink tokens every query sees")
			fs.IntVar(&size, "window-size", window.DefaultWindow, "window: tokens of local context")
		},
		planner: func() (plan.Planner, error) { return build(sink, size) },
		knob: &knob{
			name:    "size",
			values:  []float64{4096, 2048, 1024, 512, 256, 128},
			planner: func(x float64) (plan.Planner, error) { return build(sink, int(x)) },
		},
	}
}
