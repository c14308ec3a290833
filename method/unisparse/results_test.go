package unisparse_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// point is one run of a Top-P sweep.
type point struct {
	topP, sparsity, relL1 float64
	plan                  time.Duration
	needle                float64 // needle cosine (llm), NaN otherwise
}

type curve struct {
	name string
	pts  []point
}

func sweep(t *testing.T, w *workload.Workload, dense *tensor.Tensor, name string, ps []float64, mk func(p float64) plan.Planner) curve {
	t.Helper()
	c := curve{name: name}
	for _, p := range ps {
		res, err := sparseattn.Attention(context.Background(), w.Q, w.K, w.V, sparseattn.Options{Causal: w.Causal, Planner: mk(p)})
		if err != nil {
			t.Fatal(err)
		}
		e, err := metrics.CompareTensors(dense, res.Out)
		if err != nil {
			t.Fatal(err)
		}
		needle := math.NaN()
		if w.Needle != nil {
			if needle, err = w.NeedleRecall(res.Out); err != nil {
				t.Fatal(err)
			}
		}
		c.pts = append(c.pts, point{p, res.Stats.Sparsity(), e.RelL1, res.PlanTime, needle})
	}
	return c
}

// atTopP returns the run at Top-P p.
func (c curve) atTopP(p float64) point {
	for _, x := range c.pts {
		if x.topP == p {
			return x
		}
	}
	return point{topP: p, sparsity: math.NaN(), relL1: math.NaN(), needle: math.NaN()}
}

// atSparsity interpolates the error linearly in sparsity; NaN outside the
// sweep's range.
func (c curve) atSparsity(s float64) float64 {
	pts := slices.Clone(c.pts)
	slices.SortFunc(pts, func(a, b point) int {
		switch {
		case a.sparsity < b.sparsity:
			return -1
		case a.sparsity > b.sparsity:
			return 1
		}
		return 0
	})
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if s >= a.sparsity && s <= b.sparsity {
			if a.sparsity == b.sparsity {
				return a.relL1
			}
			return a.relL1 + (s-a.sparsity)/(b.sparsity-a.sparsity)*(b.relL1-a.relL1)
		}
	}
	return math.NaN()
}

func table(title string, curves []curve, sparsities []float64) {
	fmt.Printf("\n%s\n\n| variant | plan ms (P=0.95) |", title)
	for _, p := range []float64{0.9, 0.95} {
		fmt.Printf(" P=%.2f sparsity | P=%.2f rel L1 | P=%.2f needle |", p, p, p)
	}
	for _, s := range sparsities {
		fmt.Printf(" rel L1 @ sparsity %.1f |", s)
	}
	fmt.Printf("\n|---|---|")
	for range 6 + len(sparsities) {
		fmt.Printf("---|")
	}
	fmt.Println()
	for _, c := range curves {
		fmt.Printf("| %s | %.1f |", c.name, float64(c.atTopP(0.95).plan)/1e6)
		for _, p := range []float64{0.9, 0.95} {
			x := c.atTopP(p)
			fmt.Printf(" %.3f | %.4f | %.3f |", x.sparsity, x.relL1, x.needle)
		}
		for _, s := range sparsities {
			fmt.Printf(" %.4f |", c.atSparsity(s))
		}
		fmt.Println()
	}
	if testing.Verbose() {
		for _, c := range curves {
			fmt.Printf("\n%s: Top-P → sparsity, rel L1, plan ms\n", c.name)
			for _, p := range c.pts {
				fmt.Printf("  %.3f → %.4f %.5f %.1f\n", p.topP, p.sparsity, p.relL1, float64(p.plan)/1e6)
			}
		}
	}
}

// TestResultsUniSparse reproduces the UniSparse rows of RESULTS.md: pooling
// operators at matched Top-P (UniSparse Table 5), the c_q/c_k split at a
// fixed c_q·c_k (Table 6), the compression granularity (Table 7) and head
// compression (Table 8), each against dense and next to the exact-mass
// oracle's binary mask. They run the paper's rule (NoOutlier), as measured
// there.
//
//	SPARSEATTN_RESULTS=1 go test -run TestResultsUniSparse -v -timeout 60m ./method/unisparse
//
// SPARSEATTN_RESULTS_KIND=llm (or video) runs one workload.
func TestResultsUniSparse(t *testing.T) {
	if os.Getenv("SPARSEATTN_RESULTS") == "" {
		t.Skip("set SPARSEATTN_RESULTS=1 to reproduce RESULTS.md")
	}
	ctx := context.Background()
	cfgs := []workload.Config{workload.Default(), {Kind: workload.Video, Seed: 1, B: 1, Hq: 8, Hkv: 8, D: 128, Frames: 8, Height: 16, Width: 16}}
	if kind := os.Getenv("SPARSEATTN_RESULTS_KIND"); kind != "" {
		cfgs = slices.DeleteFunc(cfgs, func(c workload.Config) bool { return string(c.Kind) != kind })
	}
	ps := []float64{0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.99}
	spars := []float64{0.2, 0.3, 0.4, 0.5, 0.6}
	for _, cfg := range cfgs {
		w, err := workload.Generate(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := sparseattn.Attention(ctx, w.Q, w.K, w.V, sparseattn.Options{Causal: w.Causal})
		if err != nil {
			t.Fatal(err)
		}
		g := w.Config
		fmt.Printf("\n### %s: B=%d Hq=%d Hkv=%d N=%d D=%d causal=%v, 64×64 blocks\n", g.Kind, g.B, g.Hq, g.Hkv, g.N, g.D, w.Causal)
		uni := func(u unisparse.Planner) func(float64) plan.Planner {
			u.NoOutlier = true // the paper's rule, as the ablations it reproduces
			return func(p float64) plan.Planner { u.TopP = p; return u }
		}
		oracleCurve := sweep(t, w, ref.Out, "oracle (exact mass, binary), TopCdf P", ps, func(p float64) plan.Planner { return oracle.Planner{CDF: p} })

		var pooling []curve
		for _, pl := range []unisparse.Pooling{unisparse.Average, unisparse.Max, unisparse.Stochastic} {
			pooling = append(pooling, sweep(t, w, ref.Out, fmt.Sprintf("%v pooling, c_q=c_k=8", pl), ps, uni(unisparse.Planner{Pooling: pl, CQ: 8, CK: 8})))
		}
		table("Pooling operator (UniSparse Table 5)", append(pooling, oracleCurve), spars)

		var split []curve
		for _, c := range [][2]int{{32, 2}, {16, 4}, {8, 8}, {4, 16}, {2, 32}} {
			split = append(split, sweep(t, w, ref.Out, fmt.Sprintf("c_q=%d, c_k=%d", c[0], c[1]), ps, uni(unisparse.Planner{CQ: c[0], CK: c[1]})))
		}
		table("Q/K compression split at c_q·c_k = 64 (UniSparse Table 6)", split, spars)

		var gran []curve
		for _, c := range []int{2, 4, 8, 16, 32} {
			gran = append(gran, sweep(t, w, ref.Out, fmt.Sprintf("c_q=c_k=%d", c), ps, uni(unisparse.Planner{CQ: c, CK: c})))
		}
		table("Compression granularity (UniSparse Table 7)", gran, spars)

		var heads []curve
		for _, ch := range []int{1, 2, 4} {
			heads = append(heads, sweep(t, w, ref.Out, fmt.Sprintf("c_h=%d, c_q=c_k=8", ch), ps, uni(unisparse.Planner{CH: ch, CQ: 8, CK: 8})))
		}
		table("Head compression (UniSparse Table 8)", heads, spars)
	}
}
