package s2o

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// TestReproduce prints the S2O tables of RESULTS.md: S2O against block
// selection (the exact-mass oracle, XAttention, MInference, FlexPrefill) at matched
// sparsity, the Q_perm ablation (S2O Table 3) and the τ sweep (Table 2),
// on the default llm workload. It takes minutes, so it runs only with
// S2O_REPRO=1; S2O_REPRO_N sets the sequence length (default 4096).
//
//	S2O_REPRO=1 go test ./method/s2o -run TestReproduce -v -timeout 30m
func TestReproduce(t *testing.T) {
	if os.Getenv("S2O_REPRO") == "" {
		t.Skip("set S2O_REPRO=1 to run the RESULTS.md reproduction")
	}
	ctx := context.Background()
	cfg := workload.Default()
	if n, err := strconv.Atoi(os.Getenv("S2O_REPRO_N")); err == nil {
		cfg.N = n
	}
	w, err := workload.Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := tensorGeometry(t, w)
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64}
	dp, err := plan.Dense(tl)
	if err != nil {
		t.Fatal(err)
	}
	ex := cpu.Executor{}
	dense, _, err := ex.Run(ctx, dp, w.Q, w.K, w.V, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("llm workload %+v, blocks 64×64, dense block products %d\n", g, dp.DenseBlocks())
	fmt.Printf("%-28s %9s %11s %9s %8s\n", "method", "sparsity", "MSE", "rel L1", "needle")
	run := func(name string, pl plan.Planner) {
		p, err := pl.Plan(ctx, tl, w.Q, w.K, w.V)
		if err != nil {
			t.Fatal(err)
		}
		out, st, err := ex.Run(ctx, p, w.Q, w.K, w.V, nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err := metrics.CompareTensors(dense, out)
		if err != nil {
			t.Fatal(err)
		}
		needle := "-"
		if r, err := w.NeedleRecall(out); err == nil {
			needle = fmt.Sprintf("%.3f", r)
		}
		fmt.Printf("%-28s %9.3f %11.3e %9.4f %8s\n", name, st.Sparsity(), e.MSE, e.RelL1, needle)
	}
	for _, cdf := range []float64{0.99, 0.95, 0.9, 0.8, 0.7, 0.5} {
		run(fmt.Sprintf("oracle cdf=%v", cdf), oracle.Planner{CDF: cdf})
	}
	for _, th := range []float64{0.99, 0.95, 0.9, 0.8, 0.7, 0.5} {
		run(fmt.Sprintf("xattn S=16 τ=%v", th), xattn.Planner{Stride: 16, Threshold: th})
	}
	for _, b := range []float64{0.5, 0.2, 0.1, 0.05, 0.02} {
		run(fmt.Sprintf("minference budget=%v", b), minference.Planner{LastQ: 64, Vertical: int(1000 * b), Slash: int(6096 * b)})
	}
	for _, gamma := range []float64{0.99, 0.95, 0.9, 0.8, 0.7} {
		run(fmt.Sprintf("flexprefill γ=%v τ=0.1", gamma), flexprefill.Planner{Gamma: gamma, Tau: 0.1})
	}
	for _, seg := range []int{256, 512, 1024} {
		for _, tau := range []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2} {
			for _, qperm := range []bool{true, false} {
				name := fmt.Sprintf("s2o S=%d τ=%v", seg, tau)
				if !qperm {
					name += " noQperm"
				}
				run(name, Planner{Segment: seg, Tau: tau, QueryPerm: qperm})
			}
		}
	}
}

func tensorGeometry(t *testing.T, w *workload.Workload) tensor.Geometry {
	t.Helper()
	g, err := tensor.Validate(w.Q, w.K, w.V)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
