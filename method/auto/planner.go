// Package auto picks the best sparse-attention method and knob per query
// head under an error budget, and runs the choice.
//
// A Profile, written by Tune over calibration inputs, names for each layer
// and query head a candidate method (every block-mask method of the
// project, dense, and compositions such as "sparge+psa", whose skipped
// blocks are read pooled instead of dropped), its knob, and what it
// measured: the worst rel-L1 against dense and the executor's sparsity.
// Planner runs one profile layer: it plans each distinct (method, knob)
// once over all heads and takes each head's rows from its own method's
// plan, merging SpargeAttn's λ filter into per-head λ and keeping PSA's
// levels per entry.
package auto

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Errors of this package. ErrProfile wraps every problem with a profile
// (a *VersionError too), ErrPlan every error of Planner.Plan (a plan that
// cannot be merged, a layer that does not fit the input, a failed sub-plan
// or self-tuning run; it wraps plan.ErrInvalid, the sentinel of every
// planner's bad settings), ErrBudget an impossible error budget and
// ErrInput bad calibration inputs.
var (
	ErrProfile = errors.New("auto: bad profile")
	ErrPlan    = heads.Sentinel("auto: cannot plan")
	ErrBudget  = errors.New("auto: impossible error budget")
	ErrInput   = errors.New("auto: bad calibration inputs")
)

// DefaultBudget is the layer rel-L1 budget a Planner without Heads tunes
// to, and the CLI's default.
const DefaultBudget = 0.05

// Planner runs the per-head choices of one profile layer: Heads[h] for
// query head h. It is safe for concurrent use.
//
// The zero value has no choices: each Plan call then tunes them on the
// input it is given (Tune at Budget, DefaultMargin held back, on the CPU,
// at the call's tiling) before planning: the best method per head with no
// profile, at the cost of a tuning run per call.
type Planner struct {
	Heads []Head
	// Budget is the layer rel-L1 budget of tuning on the input when
	// Heads is nil; 0 means DefaultBudget. It is ignored with Heads.
	Budget float64
}

// Name returns "auto".
func (Planner) Name() string { return "auto" }

// choice is what identifies one sub-plan: heads with equal choices share it.
type choice struct {
	method       string
	knob, lambda float64
}

// Plan plans each distinct (method, knob, λ) of the layer once over all
// heads, then builds the plan whose rows for head h are those of head h's
// method. The λ filters of sparge heads become Filter.HeadLambda, −Inf
// (off) on every other head (plan.MergeFilters).
func (p Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	if p.Heads == nil {
		budget := p.Budget
		if budget == 0 {
			budget = DefaultBudget
		}
		l, err := Tune(ctx, Config{Budget: budget, Margin: DefaultMargin, Causal: t.Causal, Scale: t.Scale, BlockQ: t.BlockQ, BlockK: t.BlockK},
			"input", []Input{{Q: q, K: k, V: v}})
		if err != nil {
			return nil, fmt.Errorf("%w: tuning on the input: %w", ErrPlan, err)
		}
		p.Heads = l.Heads
	}
	planners, owner, err := p.Choices(t)
	if err != nil {
		return nil, err
	}
	subs := make([]*plan.Plan, len(planners))
	for i, pl := range planners {
		h := slices.Index(owner, i) // the first head of choice i
		sub, err := pl.Plan(ctx, t, q, k, v)
		if err != nil {
			return nil, fmt.Errorf("head %d (%s): %w", h, p.Heads[h].Method, err)
		}
		if err := simple(p.Heads[h].Method, sub, t); err != nil {
			return nil, err
		}
		subs[i] = sub
	}
	if len(subs) == 1 {
		return subs[0], nil // one method for every head: its own plan
	}
	b, err := plan.NewBuilder(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	g := t.Geometry
	own := make([]*plan.Filter, g.Hq)
	for h, i := range owner {
		own[h] = subs[i].Filter
	}
	filter, err := plan.MergeFilters(own)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	for bi := range g.B {
		for h, i := range owner {
			sub := subs[i]
			for qb := range sub.QBlocks() {
				r := sub.Row(bi, h, qb)
				for e := sub.RowStart[r]; e < sub.RowStart[r+1]; e++ {
					b.Add(r, int(sub.KVBlock[e]), sub.LevelAt(e))
				}
			}
		}
	}
	if filter != nil {
		b.SetFilter(filter)
	}
	out, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	return out, nil
}

// Choices returns what Plan merges for tiling t: the planners of the
// layer's distinct (method, knob, λ), in the order of their first head,
// and for each query head the index of its planner. With no Heads (the
// planner tunes on its input) it returns none and no error. A device
// twin (package cuda) plans each choice once and merges the rows per
// head as Plan does. Errors wrap ErrPlan or ErrProfile.
func (p Planner) Choices(t plan.Tiling) (planners []plan.Planner, owner []int, err error) {
	if p.Heads == nil {
		return nil, nil, nil
	}
	if len(p.Heads) != t.Geometry.Hq {
		return nil, nil, fmt.Errorf("%w: the layer has %d heads, the input %d", ErrPlan, len(p.Heads), t.Geometry.Hq)
	}
	index := map[choice]int{}
	owner = make([]int, len(p.Heads))
	for h, hd := range p.Heads {
		c := choice{hd.Method, hd.Knob, hd.Lambda}
		i, ok := index[c]
		if !ok {
			pl, err := NewMethod(hd.Method, hd.Knob, hd.Lambda)
			if err != nil {
				return nil, nil, fmt.Errorf("head %d: %w", h, err)
			}
			i = len(planners)
			index[c] = i
			planners = append(planners, pl)
		}
		owner[h] = i
	}
	return planners, owner, nil
}
