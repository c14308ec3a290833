package cpu_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// Example builds a plan by hand, one CSR row per (batch, head, query
// block), and runs it. The counters report the work actually skipped.
func Example() {
	ctx := context.Background()
	cfg := workload.Default()
	cfg.N, cfg.Hq, cfg.Hkv = 512, 1, 1
	w, err := workload.Generate(ctx, cfg)
	if err != nil {
		panic(err)
	}
	g, err := tensor.Validate(w.Q, w.K, w.V)
	if err != nil {
		panic(err)
	}
	b, err := plan.NewBuilder(plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64})
	if err != nil {
		panic(err)
	}
	// Every query block visits the first KV block (the sinks) and its own
	// diagonal block; the diagonal is masked token by token.
	for qb := range 8 {
		row := qb // batch 0, head 0
		if qb > 0 {
			b.Add(row, 0, plan.Full)
		}
		b.Add(row, qb, plan.Full)
	}
	p, err := b.Build()
	if err != nil {
		panic(err)
	}
	out, stats, err := cpu.Executor{}.Run(ctx, p, w.Q, w.K, w.V, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Shape())
	fmt.Printf("computed %.0f of %.0f block products per pass; sparsity %.3f\n", stats.QKBlocks, stats.DenseBlocks, stats.Sparsity())
	// Output:
	// [B=1 H=1 N=512 D=128]
	// computed 15 of 36 block products per pass; sparsity 0.583
}
