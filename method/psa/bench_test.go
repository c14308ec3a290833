package psa

import (
	"context"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// BenchmarkPlan times planning on the default video workload (N=2048,
// 8 query heads, D=128, 64×64 blocks) for each estimator.
func BenchmarkPlan(b *testing.B) {
	w, err := workload.Generate(context.Background(), workload.Config{Kind: workload.Video, Seed: 1, B: 1, Hq: 8, Hkv: 2, D: 128, Frames: 8, Height: 16, Width: 16})
	if err != nil {
		b.Fatal(err)
	}
	g, err := tensor.Validate(w.Q, w.K, w.V)
	if err != nil {
		b.Fatal(err)
	}
	tl := plan.Tiling{Geometry: g, BlockQ: 64, BlockK: 64}
	for _, tc := range []struct {
		name string
		pl   Planner
	}{{"sampling", Planner{Scale: 1}}, {"antidiagonal", Planner{Estimator: Antidiagonal, Scale: 1}}, {"antidiagonal-sim", Planner{Estimator: Antidiagonal, Similarity: []float64{0.75, 0.7, 0.7}, Scale: 1}}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := tc.pl.Plan(context.Background(), tl, w.Q, w.K, w.V); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlanLLM times planning on the default llm workload (N=4096,
// causal, 8 query heads over 2 KV heads).
func BenchmarkPlanLLM(b *testing.B) {
	w, err := workload.Generate(context.Background(), workload.Default())
	if err != nil {
		b.Fatal(err)
	}
	g, err := tensor.Validate(w.Q, w.K, w.V)
	if err != nil {
		b.Fatal(err)
	}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64}
	for b.Loop() {
		if _, err := (Planner{Scale: 1}).Plan(context.Background(), tl, w.Q, w.K, w.V); err != nil {
			b.Fatal(err)
		}
	}
}
