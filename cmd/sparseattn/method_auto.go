package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// autoMethod is the best method and knob per head under an error budget
// (package method/auto): with --auto-profile it runs a profile written by
// "sparseattn tune --method auto"; without one it tunes on the input it is
// given, and says so.
func autoMethod() *method {
	var profile, layer string
	var budget float64
	return &method{
		name: "auto",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&profile, "auto-profile", "", "auto: a profile written by \"sparseattn tune --method auto\" (empty: tune per head on the input itself, at --auto-budget)")
			fs.StringVar(&layer, "auto-layer", "", "auto: the profile's layer to use (empty: its only layer)")
			fs.Float64Var(&budget, "auto-budget", auto.DefaultBudget, "auto: the layer's rel-L1 budget, shared by its heads, when tuning on the input itself (no --auto-profile)")
		},
		planner: func() (plan.Planner, error) {
			if profile == "" {
				if _, err := auto.NewProfile(auto.Config{Budget: budget}); err != nil {
					return nil, fmt.Errorf("%w: --auto-budget: %v", errUsage, err)
				}
				return &autoPlanner{budget: budget, log: os.Stderr}, nil
			}
			prof, err := auto.LoadFile(profile)
			if err != nil {
				return nil, fmt.Errorf("--auto-profile: %w", err)
			}
			name := layer
			if name == "" {
				if len(prof.Layers) != 1 {
					return nil, fmt.Errorf("%w: the profile has %d layers; name one with --auto-layer", errUsage, len(prof.Layers))
				}
				name = prof.Layers[0].Name
			}
			p, err := prof.Planner(name)
			if err != nil {
				return nil, fmt.Errorf("%w: --auto-layer: %v", errUsage, err)
			}
			return &autoPlanner{heads: p.Heads, blockQ: prof.BlockQ, blockK: prof.BlockK, causal: prof.Causal}, nil
		},
	}
}

// autoPlanner runs auto's per-head choices on the CLI's problems. Without
// heads it tunes them on the first input it plans (at budget, with the
// input's tiling), once.
//
// Its heads may cover several model layers stacked along the head axis, as
// the lm workload stacks them. Asked to plan fewer heads than it has, a
// divisor, it plans the heads of one layer after another in call order:
// the i-th such call takes layer i mod L. That is exactly how one forward
// pass of the lm model calls it (layer after layer), so bits per byte run
// each layer with its own heads; calls must then come from one pass at a
// time.
type autoPlanner struct {
	budget float64
	log    io.Writer // where self-tuning says so
	// The tiling a loaded profile was tuned at (0 when self-tuning): a
	// head's choice holds only at it.
	blockQ, blockK int
	causal         bool

	mu    sync.Mutex
	heads []auto.Head
	next  int // the layer the next per-layer call plans
}

// Name returns "auto".
func (a *autoPlanner) Name() string { return "auto" }

// checkTiling refuses a tiling other than the one a loaded profile was
// tuned at.
func (a *autoPlanner) checkTiling(t plan.Tiling) error {
	if a.blockQ != 0 && (t.BlockQ != a.blockQ || t.BlockK != a.blockK || t.Causal != a.causal) {
		return fmt.Errorf("%w: the auto profile was tuned at %d×%d blocks, causal=%v; this run has %d×%d, causal=%v (pass the same --block-q/--block-k or re-tune)",
			errUsage, a.blockQ, a.blockK, a.causal, t.BlockQ, t.BlockK, t.Causal)
	}
	return nil
}

// Choices is auto.Planner.Choices for the heads of a problem with tiling
// t: how the device planner (package cuda) plans auto on the GPU. Before
// the heads are tuned (no profile: tuning on the input is CPU work), and
// when t has fewer heads than the planner (layers stacked along the head
// axis take turns, call by call), it returns an error wrapping
// cuda.ErrUnsupported that says so: auto then plans on the CPU and its
// plan is uploaded.
func (a *autoPlanner) Choices(t plan.Tiling) ([]plan.Planner, []int, error) {
	if err := a.checkTiling(t); err != nil {
		return nil, nil, err
	}
	a.mu.Lock()
	heads := a.heads
	a.mu.Unlock()
	switch hq := t.Geometry.Hq; {
	case heads == nil:
		return nil, nil, fmt.Errorf("%w: auto without --auto-profile tunes its heads on the input itself, on the CPU", cuda.ErrUnsupported)
	case hq > 0 && hq < len(heads) && len(heads)%hq == 0:
		return nil, nil, fmt.Errorf("%w: auto's %d heads are %d layers of %d, which take turns call by call on the CPU", cuda.ErrUnsupported, len(heads), len(heads)/hq, hq)
	}
	return auto.Planner{Heads: heads}.Choices(t)
}

// Plan plans with the heads for t (tuning them first when there are none).
func (a *autoPlanner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	if err := a.checkTiling(t); err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.heads == nil {
		fmt.Fprintf(a.log, "auto: no --auto-profile; tuning %d heads on this input itself (a layer rel-L1 budget of %v shared by the heads, %v of it held back; single-head runs)\n", t.Geometry.Hq, a.budget, auto.DefaultMargin)
		l, err := auto.Tune(ctx, auto.Config{Budget: a.budget, Margin: auto.DefaultMargin, Causal: t.Causal, Scale: t.Scale, BlockQ: t.BlockQ, BlockK: t.BlockK},
			"input", []auto.Input{{Q: q, K: k, V: v}})
		if err != nil {
			a.mu.Unlock()
			return nil, fmt.Errorf("auto: tuning on the input: %w", err)
		}
		a.heads = l.Heads
	}
	heads, hq := a.heads, t.Geometry.Hq
	if hq > 0 && hq < len(heads) && len(heads)%hq == 0 {
		layers := len(heads) / hq
		i := a.next
		a.next = (i + 1) % layers
		heads = heads[i*hq : (i+1)*hq]
	}
	a.mu.Unlock()
	return auto.Planner{Heads: heads}.Plan(ctx, t, q, k, v)
}
