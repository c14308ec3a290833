package flexprefill_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/workload"
)

// Example plans FlexPrefill with the S2O paper's settings, γ = 0.9 and
// τ = 0.1, on a small LLM-like workload.
func Example() {
	ctx := context.Background()
	cfg := workload.Default()
	cfg.N, cfg.Hq, cfg.Hkv = 1024, 4, 1
	w, err := workload.Generate(ctx, cfg)
	if err != nil {
		panic(err)
	}
	res, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{
		Causal:  true,
		Planner: flexprefill.Planner{Gamma: 0.9, Tau: 0.1},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("sparsity %.2f\n", res.Stats.Sparsity())
	// Output:
	// sparsity 0.62
}
