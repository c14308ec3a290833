package auto

import (
	"fmt"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
)

// Dense is the method name of the dense fallback every head may take.
const Dense = "dense"

// maxWindow bounds the window method's knob (tokens), far above any N this
// project runs, so that a knob always converts to an int exactly.
const maxWindow = 1 << 30

// spec is one candidate method: its knob sweep, from dense-like to
// sparsest (the CLI's compare sweep), and how to build it at one knob.
type spec struct {
	name   string
	knobs  []float64
	lambda bool // takes SpargeAttn's λ filter
	build  func(knob, lambda float64) (plan.Planner, error)
}

// inUnit checks that x is in (0, 1].
func inUnit(name string, x float64) error {
	if !(x > 0 && x <= 1) {
		return fmt.Errorf("%w: %s knob %v must be in (0, 1]", ErrProfile, name, x)
	}
	return nil
}

func spargeP(cdf, lambda float64) (sparge.Planner, error) {
	p := sparge.Planner{Params: sparge.Params{CDF: cdf, Lambda: lambda}}
	if err := inUnit("sparge", cdf); err != nil {
		return p, err
	}
	if err := p.Params.Validate(); err != nil {
		return p, fmt.Errorf("%w: %w", ErrProfile, err)
	}
	return p, nil
}

func xattnP(th float64) (xattn.Planner, error) {
	return xattn.Planner{Stride: 16, Threshold: th}, inUnit("xattn", th)
}

// pooled is PSA at its default thresholds and draws (the outlier-led
// sampling of psa's zero OutlierQ and OutlierK; profiles before Version 4
// drew at random): the psa candidate at knob 1, and the pooled levels a
// composition gives to the blocks its binary planner skips.
func pooled() psa.Planner {
	return psa.Planner{Scale: 1, Thresholds: psa.DefaultThresholds(), Quantiles: psa.DefaultQuantiles()}
}

// flexprefillTau is the τ of every flexprefill candidate, whose knob is
// γ: flexprefill.DefaultTau, the CLI's. On the LM workload τ 0.2 is both
// sparser and more accurate than the paper's 0.1 at every γ tried
// (RESULTS.md, "Defaults and the needle"), so each head's flexprefill
// sweep lies above τ 0.1's. A profile's flexprefill knob means γ at this
// τ: profiles before Version 3 were tuned at τ 0.1, and changing it again
// needs a new Version (TestCandidatesRunCLIDefaults holds it to the
// package default).
const flexprefillTau = 0.2

// specs is the candidate list, in the order profiles and tables name them.
// Knob sweeps are those of the CLI's compare, filled in between and
// extended at the sparse end (a tuning run measures each head's sweep up
// to the first knob over the head cap, so a longer sweep costs runs only
// where a head can use it).
//
// S2O is not a candidate. The plan format could carry it beside other
// heads only partly: its token orders can be identity rows for the other
// heads (TokenOrder.Query, RowKV −1), its stop rule can be switched off
// for them (StopRule.RowAfter at least the row's length) and its first
// pass can leave their Init rows empty; but StopRule.Tau, its knob, is one
// per plan, so every S2O head of a layer would share one τ, and a merged
// plan would mix token orders with PSA's pooled levels and λ filters,
// which no executor here is tested on.
var specs = []spec{
	{name: Dense, build: func(float64, float64) (plan.Planner, error) { return plan.DensePlanner{}, nil }},
	{name: "sparge", knobs: []float64{0.999, 0.99, 0.98, 0.95, 0.93, 0.9, 0.85, 0.8}, lambda: true,
		build: func(x, l float64) (plan.Planner, error) { return spargeP(x, l) }},
	{name: "unisparse", knobs: []float64{0.999, 0.99, 0.98, 0.95, 0.93, 0.9, 0.85, 0.8},
		build: func(x, _ float64) (plan.Planner, error) { return unisparse.Planner{TopP: x}, inUnit("unisparse", x) }},
	{name: "psa", knobs: []float64{1.43, 1.3, 1.2, 1.1, 1.05, 1, 0.9, 0.8, 0.6},
		build: func(x, _ float64) (plan.Planner, error) {
			p := pooled()
			p.Scale = x
			if !(x > 0 && x <= 1e6) {
				return p, fmt.Errorf("%w: psa knob %v must be in (0, 1e6]", ErrProfile, x)
			}
			return p, nil
		}},
	{name: "xattn", knobs: []float64{0.999, 0.99, 0.95, 0.93, 0.9, 0.85, 0.8, 0.6},
		build: func(x, _ float64) (plan.Planner, error) { return xattnP(x) }},
	{name: "flexprefill", knobs: []float64{0.999, 0.99, 0.95, 0.9, 0.8, 0.6},
		build: func(x, _ float64) (plan.Planner, error) {
			return flexprefill.Planner{Gamma: x, Tau: flexprefillTau}, inUnit("flexprefill", x)
		}},
	{name: "minference", knobs: []float64{1, 0.8, 0.65, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002},
		build: func(x, _ float64) (plan.Planner, error) {
			return minference.Planner{LastQ: 64, Vertical: max(1, int(x*1000)), Slash: max(1, int(x*6096))}, inUnit("minference", x)
		}},
	{name: "window", knobs: []float64{4096, 3072, 2048, 1536, 1024, 768, 512, 384, 256, 192, 128, 96, 64, 32, 0},
		build: func(x, _ float64) (plan.Planner, error) {
			p, err := windowP(x)
			if err != nil {
				return nil, err
			}
			return p, nil
		}},
	// Compositions (PSA §3: a block a binary mask would drop is read pooled
	// instead): the binary planner's kept blocks run exactly, the blocks it
	// skips get PSA's level for them, at least 2, or stay skipped when PSA
	// skips them too. window+psa and unisparse+psa took auto from 0.792 to
	// 0.800 on the held-out text (RESULTS.md, "auto").
	{name: "sparge+psa", knobs: []float64{0.99, 0.98, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5}, lambda: true,
		build: func(x, l float64) (plan.Planner, error) {
			b, err := spargeP(x, l)
			return Compose{Binary: b, Pooled: pooled()}, err
		}},
	{name: "xattn+psa", knobs: []float64{0.99, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5},
		build: func(x, _ float64) (plan.Planner, error) {
			b, err := xattnP(x)
			return Compose{Binary: b, Pooled: pooled()}, err
		}},
	{name: "window+psa", knobs: []float64{2048, 1024, 512, 256, 128, 64, 0},
		build: func(x, _ float64) (plan.Planner, error) {
			b, err := windowP(x)
			return Compose{Binary: b, Pooled: pooled()}, err
		}},
	{name: "unisparse+psa", knobs: []float64{0.99, 0.95, 0.9, 0.85, 0.8, 0.7},
		build: func(x, _ float64) (plan.Planner, error) {
			return Compose{Binary: unisparse.Planner{TopP: x}, Pooled: pooled()}, inUnit("unisparse", x)
		}},
}

// windowP is the window candidate at knob x: a sink of 64 and x tokens of
// window.
func windowP(x float64) (window.Planner, error) {
	if !(x >= 0 && x <= maxWindow) || x != math.Trunc(x) {
		return window.Planner{}, fmt.Errorf("%w: window knob %v must be a whole number of tokens in [0, %d]", ErrProfile, x, maxWindow)
	}
	return window.Planner{Sink: 64, Window: int(x)}, nil
}

func lookup(name string) (*spec, error) {
	for i := range specs {
		if specs[i].name == name {
			return &specs[i], nil
		}
	}
	return nil, fmt.Errorf("%w: unknown method %q (have %v)", ErrProfile, name, Methods())
}

// Methods lists the candidate methods a profile may name, dense first.
func Methods() []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.name
	}
	return out
}

// Knobs returns a method's knob sweep, from dense-like to sparsest (nil
// for dense).
func Knobs(method string) ([]float64, error) {
	s, err := lookup(method)
	if err != nil {
		return nil, err
	}
	return slices.Clone(s.knobs), nil
}

// NewMethod returns the planner of a candidate method at one knob value,
// every other hyperparameter at the value the CLI defaults to, pinned in
// this package (a profile names a planner by method and knob only). lambda
// is SpargeAttn's λ filter (0: off), accepted only by the methods that plan
// with sparge. Errors wrap ErrProfile.
func NewMethod(method string, knob, lambda float64) (plan.Planner, error) {
	s, err := lookup(method)
	if err != nil {
		return nil, err
	}
	if lambda != 0 && !s.lambda {
		return nil, fmt.Errorf("%w: %s takes no λ filter (λ=%v)", ErrProfile, method, lambda)
	}
	if math.IsNaN(knob) || math.IsInf(knob, 0) || (s.knobs == nil && knob != 0) {
		return nil, fmt.Errorf("%w: %s knob %v", ErrProfile, method, knob)
	}
	return s.build(knob, lambda)
}
