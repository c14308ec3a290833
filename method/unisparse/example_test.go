package unisparse_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/workload"
)

// Example runs UniSparse on a generated LLM prefill with the paper's two
// Top-P settings and reports, from the executor's counters, the share of
// block products skipped and the error against dense attention.
func Example() {
	ctx := context.Background()
	cfg := workload.Default()
	cfg.N, cfg.Hq, cfg.Hkv = 1024, 4, 1
	w, err := workload.Generate(ctx, cfg)
	if err != nil {
		panic(err)
	}
	dense, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{Causal: true})
	if err != nil {
		panic(err)
	}
	for _, p := range []float64{0.95, 0.9} {
		res, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{
			Causal:  true,
			Planner: unisparse.Planner{TopP: p},
		})
		if err != nil {
			panic(err)
		}
		e, err := metrics.CompareTensors(dense.Out, res.Out)
		if err != nil {
			panic(err)
		}
		fmt.Printf("Top-P %.2f: sparsity %.2f, rel L1 %.3f\n", p, res.Stats.Sparsity(), e.RelL1)
	}
	// Output:
	// Top-P 0.95: sparsity 0.47, rel L1 0.044
	// Top-P 0.90: sparsity 0.58, rel L1 0.088
}
