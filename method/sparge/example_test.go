package sparge_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/workload"
)

func ExampleAttention() {
	ctx := context.Background()
	w, err := workload.Generate(ctx, workload.Config{Kind: workload.LLM, Seed: 1, B: 1, Hq: 4, Hkv: 2, N: 1024, D: 64})
	if err != nil {
		fmt.Println(err)
		return
	}
	// One call with the reference's top-k 0.5 and the θ judge on, plus the
	// λ filter, at the paper's 128×64 tiles.
	opts := sparseattn.Options{Causal: true, BlockQ: sparge.PaperBlockQ, BlockK: sparge.PaperBlockK,
		Planner: sparge.Planner{Params: sparge.Params{TopK: sparge.DefaultTopK, Lambda: -8}}}
	res, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	// τ = 1 is the dense limit.
	opts.Planner = sparge.Planner{Params: sparge.Params{CDF: 1}}
	dense, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	e, _ := metrics.CompareTensors(dense.Out, res.Out)
	st := res.Stats
	fmt.Printf("QK products %.0f of %.0f, PV products %.1f\n", st.QKBlocks, st.DenseBlocks, st.PVBlocks)
	fmt.Printf("sparsity %.2f, rel L1 %.2f\n", st.Sparsity(), e.RelL1)
	// Per-head hyperparameters, as a tuned profile gives them.
	heads := []sparge.Params{{CDF: 0.95}, {CDF: 0.9}, {TopK: 0.3, Lambda: -6}, {CDF: 1}}
	opts.Planner = sparge.Planner{Heads: heads}
	res, err = sparseattn.Attention(ctx, w.Q, w.K, w.V, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("per-head plan: %d entries\n", len(res.Plan.KVBlock))
	// Output:
	// QK products 148 of 288, PV products 132.0
	// sparsity 0.51, rel L1 0.20
	// per-head plan: 228 entries
}
