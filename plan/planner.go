package plan

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/tensor"
)

// Planner predicts a plan from the queries and keys. Every method is a
// Planner; they differ only in how they decide what to compute.
// Implementations must be safe for concurrent use.
type Planner interface {
	// Name is the method's short name, e.g. "dense" or "window".
	Name() string
	// Plan returns a plan with the given tiling for the queries q and keys
	// k, whose shapes match t.Geometry. Planners may read v as well when
	// their method needs it (an oracle does); others ignore it.
	Plan(ctx context.Context, t Tiling, q, k, v *tensor.Tensor) (*Plan, error)
}

// DensePlanner plans the dense causal-aware pass.
type DensePlanner struct{}

// Name returns "dense".
func (DensePlanner) Name() string { return "dense" }

// Plan returns Dense(t).
func (DensePlanner) Plan(ctx context.Context, t Tiling, q, k, v *tensor.Tensor) (*Plan, error) {
	return Dense(t)
}

// Executor runs plans: the CPU executor (package cpu) and the GPU engine
// (package cuda) both implement it, with the same counters. Run computes
// attention for p into out ([B, Hq, Nq, Dv], or nil for a new tensor) and
// returns the output and the work it really did.
type Executor interface {
	Run(ctx context.Context, p *Plan, q, k, v, out *tensor.Tensor) (*tensor.Tensor, Stats, error)
}

// Fixed is a planner that returns one precomputed plan, whatever the
// inputs: a plan made once (on the CPU, say) and run many times, or on
// another executor. Its Plan fails unless the tiling is the plan's.
type Fixed struct {
	P *Plan
}

// Name returns "fixed".
func (f Fixed) Name() string { return "fixed" }

// Plan returns f.P after checking that it was made for t.
func (f Fixed) Plan(ctx context.Context, t Tiling, q, k, v *tensor.Tensor) (*Plan, error) {
	if f.P == nil {
		return nil, fmt.Errorf("%w: Fixed planner without a plan", ErrInvalid)
	}
	if f.P.Tiling != t {
		return nil, fmt.Errorf("%w: a fixed plan for %+v asked for %+v", ErrInvalid, f.P.Tiling, t)
	}
	return f.P, nil
}
