package selftest

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// autoProfile is a pattern of per-head choices; a shape's query head h
// takes Heads[(offset+h) mod len], so that every choice lands on some head
// next to others.
type autoProfile struct {
	Name  string
	Heads []auto.Head
}

// autoProfiles are the auto layers the device planner is checked with:
// sparge with λ among binary methods (the merged plan's per-head λ), PSA
// and compositions among binary methods (the merged plan's levels, the
// gathering kernel), two compositions and a second PSA knob side by side
// (planners of one method with scratch of their own), and one choice for
// every head (its own plan). λ and pooled levels are not mixed: the
// gathering kernel takes no λ filter.
func autoProfiles() []autoProfile {
	return []autoProfile{
		{"mix λ", []auto.Head{
			{Method: "sparge", Knob: 0.9, Lambda: -4}, {Method: "xattn", Knob: 0.9}, {Method: "flexprefill", Knob: 0.9},
			{Method: "window", Knob: 256}, {Method: auto.Dense}, {Method: "sparge", Knob: 0.95},
		}},
		{"mix pooled", []auto.Head{
			{Method: "psa", Knob: 1}, {Method: "sparge+psa", Knob: 0.8}, {Method: "xattn", Knob: 0.95},
			{Method: auto.Dense}, {Method: "window", Knob: 128}, {Method: "flexprefill", Knob: 0.95},
		}},
		{"compositions", []auto.Head{
			{Method: "xattn+psa", Knob: 0.8}, {Method: "sparge", Knob: 0.9}, {Method: "sparge+psa", Knob: 0.9}, {Method: "psa", Knob: 1.2},
			{Method: "window+psa", Knob: 256}, {Method: "unisparse+psa", Knob: 0.9},
		}},
		{"one choice", []auto.Head{{Method: "sparge+psa", Knob: 0.9}}},
	}
}

// layer is the profile's layer for a problem of hq query heads.
func (p autoProfile) layer(hq, offset int) auto.Planner {
	heads := make([]auto.Head, hq)
	for h := range heads {
		heads[h] = p.Heads[(offset+h)%len(p.Heads)]
	}
	return auto.Planner{Heads: heads}
}

// autoCases are the auto planner's cases: each profile on the awkward
// shapes and on the llm workload, its heads cycled from an offset that
// differs by shape.
func autoCases() []PlannerCase {
	var cs []PlannerCase
	for _, p := range autoProfiles() {
		for i, s := range shapes() {
			cs = append(cs, PlannerCase{Name: "auto " + p.Name + "/" + s.Name, Planner: p.layer(s.Hq, i), Case: s})
		}
		cs = append(cs, PlannerCase{Name: "auto " + p.Name + "/" + llmShape.Name, Planner: p.layer(llmShape.Hq, 0), Case: llmShape, Workload: workload.LLM})
	}
	return cs
}

// autoTieBreak judges the rows of an auto plan that differ from want, the
// CPU's: a row is its head's choice's, so that choice's documented
// tie-break decides, a psa head's levels by its level judge and a binary
// method's blocks (all at level Full) by its row judge against the CPU
// row. A composition, or a method without a tie-break, must agree
// exactly. Nil for other planners.
func autoTieBreak(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor, want *plan.Plan) levelJudge {
	a, ok := p.(auto.Planner)
	if !ok {
		return nil
	}
	planners, owner, err := a.Choices(t)
	levelJ := make([]levelJudge, len(planners))
	rowJ := make([]rowJudge, len(planners))
	for i, pl := range planners {
		levelJ[i], rowJ[i] = levelTieBreakFor(pl, t, q, k), tieBreakFor(pl, t, q, k)
	}
	g := t.Geometry
	qBlocks := (g.Nq + t.BlockQ - 1) / t.BlockQ
	return func(ctx context.Context, row int, gpuBlocks []int32, gpuLevels []plan.Level) error {
		if err != nil {
			return err
		}
		h := row / qBlocks % g.Hq
		i := owner[h]
		if levelJ[i] != nil {
			return levelJ[i](ctx, row, gpuBlocks, gpuLevels)
		}
		for _, l := range gpuLevels {
			if l != plan.Full {
				return fmt.Errorf("head %d (%s): level %d where the method plans none", h, planners[i].Name(), l)
			}
		}
		if rowJ[i] == nil {
			return fmt.Errorf("head %d (%s): the method has no documented tie-break", h, planners[i].Name())
		}
		cpuRow, _ := want.Entries(row)
		return rowJ[i](ctx, row, cpuRow, gpuBlocks)
	}
}
