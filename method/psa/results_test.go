package psa_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// point is one run of a sweep.
type point struct {
	x        float64 // the knob
	budget   float64 // psa.Budget of the executor's counters
	coverage float64 // psa.Coverage of the plan
	relL1    float64
}

// sweep runs the planner mk(x) for every x and measures it against dense.
func sweep(t *testing.T, w *workload.Workload, dense *tensor.Tensor, xs []float64, mk func(x float64) plan.Planner) []point {
	t.Helper()
	var pts []point
	for _, x := range xs {
		res, err := sparseattn.Attention(context.Background(), w.Q, w.K, w.V, sparseattn.Options{Causal: w.Causal, Planner: mk(x)})
		if err != nil {
			t.Fatal(err)
		}
		e, err := metrics.CompareTensors(dense, res.Out)
		if err != nil {
			t.Fatal(err)
		}
		pts = append(pts, point{x, psa.Budget(res.Stats), psa.Coverage(res.Plan), e.RelL1})
	}
	slices.SortFunc(pts, func(a, b point) int {
		switch {
		case a.budget < b.budget:
			return -1
		case a.budget > b.budget:
			return 1
		}
		return 0
	})
	return pts
}

// curve is one named sweep.
type curve struct {
	name string
	pts  []point
}

// printTable prints each curve's error and coverage at the given budgets as
// a Markdown table, one column per curve.
func printTable(title string, budgets []float64, curves []curve) {
	fmt.Printf("\n%s: rel L1 against dense (KV coverage) at each compute budget, budget = 1 − sparsity from the executor's counters, interpolated between sweep points\n\n| budget |", title)
	for _, c := range curves {
		fmt.Printf(" %s |", c.name)
	}
	fmt.Printf("\n|---|")
	for range curves {
		fmt.Printf("---|")
	}
	fmt.Println()
	for _, b := range budgets {
		fmt.Printf("| %.2f |", b)
		for _, c := range curves {
			l1, cov := at(c.pts, b)
			fmt.Printf(" %.4f (%.2f) |", l1, cov)
		}
		fmt.Println()
	}
}

// at interpolates a sweep's error and coverage linearly in the budget; NaN
// outside the sweep's range.
func at(pts []point, budget float64) (relL1, coverage float64) {
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if budget >= a.budget && budget <= b.budget {
			if b.budget == a.budget {
				return a.relL1, a.coverage
			}
			f := (budget - a.budget) / (b.budget - a.budget)
			return a.relL1 + f*(b.relL1-a.relL1), a.coverage + f*(b.coverage-a.coverage)
		}
	}
	return math.NaN(), math.NaN()
}

func resultsWorkloads(t *testing.T) []workload.Config {
	mode := os.Getenv("SPARSEATTN_RESULTS")
	if mode == "" {
		t.Skip("set SPARSEATTN_RESULTS=1 (default sizes) or =large to reproduce RESULTS.md")
	}
	video := workload.Config{Kind: workload.Video, Seed: 1, B: 1, Hq: 8, Hkv: 8, D: 128, Frames: 8, Height: 16, Width: 16}
	llm := workload.Default()
	switch mode {
	case "medium":
		video.Frames = 16 // 16×16×16 = 4096 tokens
		llm.N = 8192
	case "large":
		video.Frames, video.Height, video.Width = 16, 32, 32
		llm.N = 16384
	}
	all := []workload.Config{video, llm}
	if kind := os.Getenv("SPARSEATTN_RESULTS_KIND"); kind != "" {
		all = slices.DeleteFunc(all, func(c workload.Config) bool { return string(c.Kind) != kind })
	}
	return all
}

// TestResultsPSA reproduces the PSA rows of RESULTS.md: multi-level masks
// against binary block masks at equal compute budget (PSA Table 4, Figure
// 1), the threshold rule against the quantile rule (Table 5), and the
// intra-block similarity cap (App. B.1) with the paper's thresholds.
//
//	SPARSEATTN_RESULTS=1 go test -run TestResultsPSA -v -timeout 30m ./method/psa
//
// SPARSEATTN_RESULTS=medium uses a 16×16×16 video and an 8K-token llm,
// =large a 16×32×32 video and a 16K-token llm;
// SPARSEATTN_RESULTS_KIND=video (or llm) runs one workload.
func TestResultsPSA(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range resultsWorkloads(t) {
		w, err := workload.Generate(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{Causal: w.Causal})
		if err != nil {
			t.Fatal(err)
		}
		g := w.Config
		fmt.Printf("\n### %s: B=%d Hq=%d Hkv=%d N=%d D=%d causal=%v, 64×64 blocks\n\n", g.Kind, g.B, g.Hq, g.Hkv, g.N, g.D, w.Causal)
		taus := []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 0.995}
		scales := []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.2, 1.3, 1.4}
		var curves []curve
		add := func(name string, xs []float64, mk func(x float64) plan.Planner) {
			curves = append(curves, curve{name, sweep(t, w, ref.Out, xs, mk)})
		}
		for _, est := range []psa.Estimator{psa.Sampling, psa.Antidiagonal} {
			add(fmt.Sprintf("PSA %v, T={.7,.8,.9,.9}×s", est), scales, func(s float64) plan.Planner {
				return psa.Planner{Estimator: est, Scale: s}
			})
			add(fmt.Sprintf("PSA %v, T={.5,.7,.8,.9}×s", est), scales, func(s float64) plan.Planner {
				return psa.Planner{Estimator: est, Scale: s, Thresholds: []float64{0.5, 0.7, 0.8, 0.9}}
			})
			add(fmt.Sprintf("binary %v, T={τ}", est), taus, func(tau float64) plan.Planner {
				return psa.Planner{Estimator: est, Thresholds: []float64{tau}, Scale: 1}
			})
		}
		add("PSA antidiagonal, T={.5,.7,.8,.9}×s, sim cap (.75,.7,.7)", scales, func(s float64) plan.Planner {
			return psa.Planner{Estimator: psa.Antidiagonal, Scale: s, Thresholds: []float64{0.5, 0.7, 0.8, 0.9}, Similarity: []float64{0.75, 0.7, 0.7}}
		})
		add("PSA sampling, T={.5,.7,.8,.9}×s, sim cap (.7,.65,.6)", scales, func(s float64) plan.Planner {
			return psa.Planner{Scale: s, Thresholds: []float64{0.5, 0.7, 0.8, 0.9}, Similarity: []float64{0.7, 0.65, 0.6}}
		})
		add("binary oracle (exact mass), TopCdf τ", taus, func(tau float64) plan.Planner { return oracle.Planner{CDF: tau} })
		for _, est := range []psa.Estimator{psa.Sampling, psa.Antidiagonal} {
			add(fmt.Sprintf("PSA %v, quantile {.05,.15,.25,.5}×s", est), []float64{0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 6}, func(s float64) plan.Planner {
				return psa.Planner{Rule: psa.Quantile, Scale: s, Estimator: est}
			})
		}
		budgets := []float64{0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5}
		pick := func(names ...string) []curve {
			var out []curve
			for _, c := range curves {
				if slices.Contains(names, c.name) {
					out = append(out, c)
				}
			}
			return out
		}
		printTable("Multi-level vs binary masks at equal compute budget (PSA Table 4, Figure 1)", budgets, pick(
			"PSA sampling, T={.7,.8,.9,.9}×s", "PSA sampling, T={.5,.7,.8,.9}×s", "binary sampling, T={τ}",
			"PSA antidiagonal, T={.7,.8,.9,.9}×s", "PSA antidiagonal, T={.5,.7,.8,.9}×s", "binary antidiagonal, T={τ}",
			"binary oracle (exact mass), TopCdf τ"))
		printTable("Threshold vs quantile level assignment at equal compute budget (PSA Table 5)", budgets, pick(
			"PSA sampling, T={.7,.8,.9,.9}×s", "PSA sampling, T={.5,.7,.8,.9}×s", "PSA sampling, quantile {.05,.15,.25,.5}×s",
			"PSA antidiagonal, T={.7,.8,.9,.9}×s", "PSA antidiagonal, T={.5,.7,.8,.9}×s", "PSA antidiagonal, quantile {.05,.15,.25,.5}×s"))
		printTable("Intra-block similarity cap at equal compute budget (PSA App. B.1, C.1–C.2)", budgets, pick(
			"PSA antidiagonal, T={.5,.7,.8,.9}×s", "PSA antidiagonal, T={.5,.7,.8,.9}×s, sim cap (.75,.7,.7)",
			"PSA sampling, T={.5,.7,.8,.9}×s", "PSA sampling, T={.5,.7,.8,.9}×s, sim cap (.7,.65,.6)"))
		if testing.Verbose() {
			for _, c := range curves {
				fmt.Printf("\n%s: knob → budget, coverage, rel L1\n", c.name)
				for _, p := range c.pts {
					fmt.Printf("  %.3f → %.4f %.3f %.5f\n", p.x, p.budget, p.coverage, p.relL1)
				}
			}
		}
	}
}
