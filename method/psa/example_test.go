package psa_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/workload"
)

// Example runs PSA on a small generated video latent and reports its
// compute budget the way the paper does — the share of blocks a binary mask
// of equal cost would keep — next to the share of blocks PSA lets each query
// see.
func Example() {
	ctx := context.Background()
	w, err := workload.Generate(ctx, workload.Config{Kind: workload.Video, Seed: 1, B: 1, Hq: 2, D: 64, Frames: 4, Height: 8, Width: 16})
	if err != nil {
		panic(err)
	}
	res, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{
		Planner: psa.Planner{Thresholds: []float64{0.5, 0.7, 0.8, 0.9}, Scale: 1},
		BlockQ:  32, BlockK: 32,
	})
	if err != nil {
		panic(err)
	}
	dense, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{})
	if err != nil {
		panic(err)
	}
	e, err := metrics.CompareTensors(dense.Out, res.Out)
	if err != nil {
		panic(err)
	}
	fmt.Printf("budget %.2f of dense (sparsity %.2f), rel L1 %.2f\n", psa.Budget(res.Stats), res.Stats.Sparsity(), e.RelL1)
	fmt.Printf("KV blocks seen %.2f\n", psa.Coverage(res.Plan))
	// Output:
	// budget 0.24 of dense (sparsity 0.76), rel L1 0.24
	// KV blocks seen 0.42
}
