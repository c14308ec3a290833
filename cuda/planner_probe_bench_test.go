package cuda

import (
	"context"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestProbePlannerTimes times the probing planners (minference,
// flexprefill) on the device against the dense kernel, at B=1, Hq=32,
// Hkv=8, D=128, bf16, causal, for N in SPARSEATTN_PLANNER_BENCH_N
// (default 8192,32768). It runs only when SPARSEATTN_PLANNER_BENCH is set
// ("1" for both planners, else a comma-separated list of names) and logs
// the median of five Plan calls after one warm-up.
func TestProbePlannerTimes(t *testing.T) {
	which := os.Getenv("SPARSEATTN_PLANNER_BENCH")
	if which == "" {
		t.Skip("set SPARSEATTN_PLANNER_BENCH=1 (or minference,flexprefill) to time the device planners")
	}
	e := openOrSkip(t)
	ctx := context.Background()
	sizes := []int{8192, 32768}
	if s := os.Getenv("SPARSEATTN_PLANNER_BENCH_N"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n := 0
			for _, c := range f {
				n = n*10 + int(c-'0')
			}
			sizes = append(sizes, n)
		}
	}
	planners := []plan.Planner{nil, minference.Planner{LastQ: 64, Vertical: 1000, Slash: 6096}, flexprefill.Planner{Gamma: 0.9, Tau: 0.1}}
	for _, n := range sizes {
		g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
		tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
		// Cheap pseudo-random bf16 values of about unit size.
		x := uint64(0x9e3779b97f4a7c15)
		mk := func(h int) *Tensor {
			ht, err := tensor.New(tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: h, N: n, D: 128})
			if err != nil {
				t.Fatal(err)
			}
			bits := ht.Bits16()
			for i := range bits {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				f := float32(int32(x>>40)&0xffff-0x8000) / 0x4000
				bits[i] = uint16(math.Float32bits(f) >> 16)
			}
			d, err := e.Upload(ctx, ht)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Free() })
			return d
		}
		q, k, v := mk(32), mk(8), mk(8)
		var denseMS float64
		for _, p := range planners {
			name := "dense"
			if p != nil {
				name = p.Name()
				if which != "1" && !slices.Contains(strings.Split(which, ","), name) {
					continue
				}
			}
			run, err := e.NewRunner(ctx, tl, tensor.BFloat16, p)
			if err != nil {
				t.Fatal(err)
			}
			var plans, runs []float64
			for i := range 6 {
				out, rep, err := run.Run(ctx, q, k, v, nil)
				if err != nil {
					t.Fatal(err)
				}
				out.Free()
				if i > 0 {
					plans, runs = append(plans, rep.PlanMS), append(runs, rep.RunMS)
				}
			}
			run.Close()
			slices.Sort(plans)
			slices.Sort(runs)
			if p == nil {
				denseMS = runs[2]
			}
			t.Logf("N=%d %-12s plan %.3f ms (min %.3f) run %.3f ms; plan/dense run %.1f%%", n, name, plans[2], plans[0], runs[2], 100*plans[2]/denseMS)
		}
	}
}
