package xattn_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/workload"
)

// Example plans XAttention with stride 16 and threshold 0.9 on a small
// LLM-like workload; the executor's counters give the work skipped.
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
		Planner: xattn.Planner{Stride: 16, Threshold: 0.9},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("sparsity %.2f\n", res.Stats.Sparsity())
	// Output:
	// sparsity 0.34
}
