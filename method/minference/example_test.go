package minference_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/workload"
)

// Example plans MInference's vertical-slash pattern from a 64-query probe,
// keeping 100 vertical and 200 slash lines per head.
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
		Planner: minference.Planner{LastQ: 64, Vertical: 100, Slash: 200},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("sparsity %.2f\n", res.Stats.Sparsity())
	// Output:
	// sparsity 0.09
}
