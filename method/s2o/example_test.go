package s2o_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/workload"
)

// Example runs S2O on a small LLM-like workload and compares it with dense
// attention: with the stop off (s2o.NoStop) the plan is exact, with τ > 0
// rows stop early.
func Example() {
	ctx := context.Background()
	cfg := workload.Default()
	cfg.N, cfg.Hq, cfg.Hkv = 512, 4, 1
	w, err := workload.Generate(ctx, cfg)
	if err != nil {
		panic(err)
	}
	dense, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{Causal: true})
	if err != nil {
		panic(err)
	}
	for _, tau := range []float64{s2o.NoStop, 0.05} {
		res, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{
			Causal:  true,
			Planner: s2o.Planner{Segment: 128, Tau: tau},
		})
		if err != nil {
			panic(err)
		}
		e, err := metrics.CompareTensors(dense.Out, res.Out)
		if err != nil {
			panic(err)
		}
		fmt.Printf("τ=%v: rows stopped early: %v, rel L1 below 1e-4: %v\n", tau, res.Stats.Stopped > 0, e.RelL1 < 1e-4)
	}
	// Output:
	// τ=-1: rows stopped early: false, rel L1 below 1e-4: true
	// τ=0.05: rows stopped early: true, rel L1 below 1e-4: false
}
