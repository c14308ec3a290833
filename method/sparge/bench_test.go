package sparge

import (
	"context"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// BenchmarkPlan16K times the predictor alone on the default llm layer at
// N = 16384 (8 query heads, 2 KV heads), 64×64 blocks.
func BenchmarkPlan16K(b *testing.B) {
	c := workload.Default()
	c.N = 16384
	w, err := workload.Generate(context.Background(), c)
	if err != nil {
		b.Fatal(err)
	}
	g, err := tensor.Validate(w.Q, w.K, w.V)
	if err != nil {
		b.Fatal(err)
	}
	t := plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64}
	p := Planner{Params: Params{TopK: DefaultTopK}}
	b.ResetTimer()
	for range b.N {
		if _, err := p.Plan(context.Background(), t, w.Q, w.K, w.V); err != nil {
			b.Fatal(err)
		}
	}
}
