package sparseattn_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/workload"
)

// Example runs a sparse method on a generated LLM layer and checks it
// against dense attention, as a user would on their own tensors.
func Example() {
	ctx := context.Background()
	cfg := workload.Default()
	cfg.N, cfg.Hq, cfg.Hkv = 1024, 2, 1
	w, err := workload.Generate(ctx, cfg)
	if err != nil {
		panic(err)
	}
	dense, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{Causal: true})
	if err != nil {
		panic(err)
	}
	sparse, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{
		Causal:  true,
		Planner: window.Planner{Sink: 64, Window: 256},
	})
	if err != nil {
		panic(err)
	}
	e, err := metrics.CompareTensors(dense.Out, sparse.Out)
	if err != nil {
		panic(err)
	}
	fmt.Printf("output %v\n", sparse.Out.Shape())
	fmt.Printf("sparsity %.2f\n", sparse.Stats.Sparsity())
	fmt.Printf("relative L1 below 0.5: %v\n", e.RelL1 < 0.5)
	// Output:
	// output [B=1 H=2 N=1024 D=128]
	// sparsity 0.40
	// relative L1 below 0.5: true
}
