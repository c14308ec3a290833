package cuda

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestUniArgsLayout checks uniArgs and xattnArgs against struct UniArgs in
// kernels/plan_unisparse.cu (3 pointers, 12 int32, 1 double) and struct
// XattnArgs in kernels/plan_xattn.cu.
func TestUniArgsLayout(t *testing.T) {
	if got := unsafe.Sizeof(uniArgs{}); got != 80 {
		t.Errorf("uniArgs is %d bytes, struct UniArgs 80", got)
	}
	// struct XattnArgs: 3 pointers, 4 int32, 1 double.
	if got := unsafe.Sizeof(xattnArgs{}); got != 48 {
		t.Errorf("xattnArgs is %d bytes, struct XattnArgs 48", got)
	}
}

// TestPlannerTimeUniXattn times the unisparse and xattn device planners
// (Runner.Plan, device events, median of 5 after one warm-up) against the
// dense kernel (Runner.Run's RunMS) on B=1, Hq=32, Hkv=8, D=128, bf16,
// causal, 128×64 blocks. It runs only with SPARSEATTN_PLANNER_BENCH set
// to a comma-separated list of planners (unisparse, xattn) and takes the
// lengths from SPARSEATTN_PLANNER_BENCH_N (default 8192,32768).
func TestPlannerTimeUniXattn(t *testing.T) {
	which := os.Getenv("SPARSEATTN_PLANNER_BENCH")
	if which == "" {
		t.Skip("set SPARSEATTN_PLANNER_BENCH=unisparse,xattn to time the device planners")
	}
	ns := []int{8192, 32768}
	if s := os.Getenv("SPARSEATTN_PLANNER_BENCH_N"); s != "" {
		ns = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			ns = append(ns, n)
		}
	}
	e := openOrSkip(t)
	ctx := context.Background()
	for _, n := range ns {
		g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
		tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
		r := rand.New(rand.NewPCG(uint64(n), 1))
		var dev [3]*Tensor
		for i, h := range []int{g.Hq, g.Hkv, g.Hkv} {
			data := make([]float32, h*n*g.D)
			for j := range data {
				data[j] = float32(r.NormFloat64())
			}
			x, err := tensor.FromFloat32(tensor.BHND, tensor.Shape{B: 1, H: h, N: n, D: g.D}, data)
			if err != nil {
				t.Fatal(err)
			}
			if x, err = x.Convert(tensor.BFloat16, tensor.BHND); err != nil {
				t.Fatal(err)
			}
			if dev[i], err = e.Upload(ctx, x); err != nil {
				t.Fatal(err)
			}
			defer dev[i].Free()
		}
		planners := []plan.Planner{nil}
		for _, name := range strings.Split(which, ",") {
			switch name {
			case "unisparse":
				planners = append(planners, unisparse.Planner{})
			case "xattn":
				planners = append(planners, xattn.Planner{Stride: 16, Threshold: 0.9})
			}
		}
		var denseMS float64
		for _, p := range planners {
			run, err := e.NewRunner(ctx, tl, tensor.BFloat16, p)
			if err != nil {
				t.Fatal(err)
			}
			var ms, runs []float64
			var density float64
			for i := range 6 {
				out, rep, err := run.Run(ctx, dev[0], dev[1], dev[2], nil)
				if err != nil {
					t.Fatal(err)
				}
				out.Free()
				if i > 0 {
					ms, runs = append(ms, rep.PlanMS), append(runs, rep.RunMS)
				}
				density = 1 - rep.Stats.Sparsity()
			}
			slices.Sort(ms)
			slices.Sort(runs)
			name := "dense"
			if p != nil {
				name = p.Name()
			} else {
				denseMS = runs[len(runs)/2]
			}
			t.Logf("N=%d %s: plan %.3f ms (%.1f%% of dense %.3f ms), run %.3f ms, density %.3f", n, name, ms[len(ms)/2],
				100*ms[len(ms)/2]/denseMS, denseMS, runs[len(runs)/2], density)
			run.Close()
		}
	}
}
