package main

import (
	"flag"
	"fmt"

	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
)

// xattnMethod is XAttention: blocks scored by strided antidiagonal sums,
// kept heaviest first up to a cumulative threshold.
func xattnMethod() *method {
	var (
		stride    int
		threshold float64
	)
	build := func(threshold float64) (plan.Planner, error) {
		if stride <= 0 {
			return nil, fmt.Errorf("%w: --xattn-stride %d must be positive and divide --block-q and --block-k", errUsage, stride)
		}
		if !(threshold > 0 && threshold <= 1) {
			return nil, fmt.Errorf("%w: --xattn-threshold %v must be in (0, 1]", errUsage, threshold)
		}
		return xattn.Planner{Stride: stride, Threshold: threshold}, nil
	}
	return &method{
		name: "xattn",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&stride, "xattn-stride", xattn.DefaultStride, "xattn: antidiagonal stride S, dividing --block-q and --block-k")
			fs.Float64Var(&threshold, "xattn-threshold", xattn.DefaultThreshold, "xattn: cumulative share of estimated block mass each query block keeps, in (0,1]")
		},
		planner: func() (plan.Planner, error) { return build(threshold) },
		knob: &knob{
			name:    "threshold",
			values:  []float64{0.999, 0.99, 0.95, 0.9, 0.8, 0.6},
			planner: build,
		},
	}
}
