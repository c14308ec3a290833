package main

import (
	"flag"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/plan"
)

// s2oMethod is S2O: segment-wise key permutations by index, the dense
// intra-segment window, then the ranked prefix with early stopping; by
// default in one fused pass in natural query order, with --s2o-qperm the
// paper's query permutation and two passes.
func s2oMethod() *method {
	var (
		segment, window int
		outliers        int
		tau             float64
		qperm           bool
	)
	build := func(tau float64) (plan.Planner, error) {
		if segment < 0 {
			return nil, fmt.Errorf("%w: --s2o-segment %d must be 0 (the default for the length) or a positive multiple of --block-q", errUsage, segment)
		}
		// 0 is rejected, not passed on as the package default, so that a
		// command written when 0 turned the stop off fails loudly.
		if !(tau < 1) || tau == 0 || math.IsInf(tau, 0) {
			return nil, fmt.Errorf("%w: --s2o-tau %v must be in (0, 1), or negative for no early stop", errUsage, tau)
		}
		if window < 0 {
			return nil, fmt.Errorf("%w: --s2o-window %d must be ≥ 0", errUsage, window)
		}
		if outliers == 0 {
			return nil, fmt.Errorf("%w: --s2o-outliers 0: give a positive count, or -1 for the paper's key order", errUsage)
		}
		return s2o.Planner{Segment: segment, Tau: tau, Window: window, QueryPerm: qperm, Outliers: outliers}, nil
	}
	return &method{
		name: "s2o",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&segment, "s2o-segment", 0, "s2o: tokens per segment S, a multiple of --block-q; 0 = N/16 in [512, 2048] (the paper: 2048 at 128K, smaller for short inputs)")
			fs.Float64Var(&tau, "s2o-tau", s2o.DefaultTau, "s2o: early-stop threshold τ in (0,1): stop when a tile adds less than τ·ℓ; negative: no early stop (exact)")
			fs.IntVar(&window, "s2o-window", 0, "s2o: tokens before each segment computed densely (Alg. 4's local window)")
			fs.BoolVar(&qperm, "s2o-qperm", false, "s2o: permute each segment's queries by their score against the guide key, the mean key of the first segment (Q_perm, S2O Alg. 1–3, two passes); default: the fused single pass, natural query order")
			fs.IntVar(&outliers, "s2o-outliers", s2o.DefaultOutliers, "s2o: outlier queries per segment whose top keys lead the segment's ranked keys (our extension); -1: none, the paper's key order")
		},
		planner: func() (plan.Planner, error) { return build(tau) },
		knob: &knob{
			name:    "tau",
			values:  []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5},
			planner: build,
		},
	}
}
