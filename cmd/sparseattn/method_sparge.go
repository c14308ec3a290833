package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tune"
)

// spargeMethod is SpargeAttn: selective token compression predicts the
// block mask (TopCdf τ or top-k, θ self-similarity judge), and the λ
// filter skips further P̃V products inside the executor.
func spargeMethod() *method {
	cdf := setFloat{v: sparge.DefaultCDF}
	var topk, theta, lambda float64
	var rowGroup int
	var sink bool
	var profile, layer string
	build := func(cdf, topk float64) (plan.Planner, error) {
		if cdf == 0 && topk == 0 {
			topk = sparge.DefaultTopK // --sparge-cdf 0: top-k mode; the zero Params would be TopCdf
		}
		p := sparge.Planner{
			Params:   sparge.Params{CDF: cdf, TopK: topk, Theta: theta, Lambda: lambda},
			RowGroup: rowGroup, Sink: sink,
		}
		if err := p.Params.Validate(); err != nil {
			return nil, fmt.Errorf("%w: --sparge-cdf/topk/theta/lambda: %v", errUsage, err)
		}
		if rowGroup < 0 {
			return nil, fmt.Errorf("%w: --sparge-row-group must be ≥ 0 (0: block-q/4)", errUsage)
		}
		return p, nil
	}
	// fromProfile is the planner of one layer of a tuned profile: per-head
	// τ, θ and λ, with the row group it was tuned with.
	fromProfile := func() (plan.Planner, error) {
		prof, err := tune.LoadFile(profile)
		if err != nil {
			return nil, fmt.Errorf("--sparge-profile: %w", err)
		}
		name := layer
		if name == "" {
			if len(prof.Layers) != 1 {
				return nil, fmt.Errorf("%w: the profile has %d layers; name one with --sparge-layer", errUsage, len(prof.Layers))
			}
			name = prof.Layers[0].Name
		}
		l, err := prof.Layer(name)
		if err != nil {
			return nil, fmt.Errorf("%w: --sparge-layer: %v", errUsage, err)
		}
		return sparge.Planner{Heads: l.Params(), RowGroup: prof.RowGroup, Sink: sink}, nil
	}
	return &method{
		name: "sparge",
		flags: func(fs *flag.FlagSet) {
			fs.Var(&cdf, "sparge-cdf", "sparge: TopCdf τ in (0,1], the predicted mass each query block keeps (0, or --sparge-topk set without it: top-k mode)")
			fs.Float64Var(&topk, "sparge-topk", 0, fmt.Sprintf("sparge: fraction in (0,1] of each row's causally visible blocks kept in top-k mode (0: %v)", sparge.DefaultTopK))
			fs.Float64Var(&theta, "sparge-theta", 0, fmt.Sprintf("sparge: self-similarity threshold θ in [-1,1] (0: %v; negative: no judge)", sparge.DefaultTheta))
			fs.Float64Var(&lambda, "sparge-lambda", 0, "sparge: λ < 0 skips a row group's P̃V when max(m_local − m) < λ (0: off)")
			fs.IntVar(&rowGroup, "sparge-row-group", 0, "sparge: query rows per λ decision, dividing --block-q (0: block-q/4; 64 with --block-q 128 runs λ on the warp-specialized Hopper kernel)")
			fs.BoolVar(&sink, "sparge-sink", false, "sparge: always keep key block 0 (attention sinks)")
			fs.StringVar(&profile, "sparge-profile", "", "sparge: a profile written by \"sparseattn tune\"; its per-head τ, θ and λ replace --sparge-cdf/topk/theta/lambda (run with the --block-q/--block-k it was tuned with)")
			fs.StringVar(&layer, "sparge-layer", "", "sparge: the profile's layer to use (empty: its only layer)")
		},
		planner: func() (plan.Planner, error) {
			if profile != "" {
				return fromProfile()
			}
			if topk != 0 && !cdf.set {
				return build(0, topk) // --sparge-topk alone selects top-k mode
			}
			return build(cdf.v, topk)
		},
		knob: &knob{
			name:    "cdf",
			values:  []float64{0.999, 0.99, 0.98, 0.95, 0.9, 0.8},
			planner: func(x float64) (plan.Planner, error) { return build(x, 0) },
		},
	}
}

// setFloat is a float flag that records whether it was set.
type setFloat struct {
	v   float64
	set bool
}

// String returns the value.
func (f *setFloat) String() string { return strconv.FormatFloat(f.v, 'g', -1, 64) }

// Set parses the value and marks the flag set.
func (f *setFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	f.v, f.set = v, true
	return nil
}
