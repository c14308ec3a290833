package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestAutoHeader checks, without a GPU, what the device auto planner
// settles before any kernel runs, against the CPU planner's plan on the
// same problem: the same λ filter (per head when choices differ, the
// choice's own with one choice), a top level at least every level the
// CPU plan holds, and kernels only where the plan pools.
func TestAutoHeader(t *testing.T) {
	r := testutil.Rand(t)
	c := Case{B: 1, Hq: 4, Hkv: 2, Nq: 300, Nk: 300, D: 64, Dv: 64, DType: tensor.BFloat16, Layout: tensor.BHND, Causal: true, BlockQ: 64, BlockK: 64}
	q, k, v, err := RandomInputs(r, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	tl := plan.Tiling{Geometry: c.Geometry(), Causal: c.Causal, BlockQ: c.BlockQ, BlockK: c.BlockK}
	for _, tc := range []struct {
		name   string
		heads  []auto.Head
		pooled bool // the plan may hold pooled levels
	}{
		{"λ and binary", []auto.Head{{Method: "sparge", Knob: 0.9, Lambda: -4}, {Method: "xattn", Knob: 0.9}, {Method: "sparge", Knob: 0.9, Lambda: -4}, {Method: auto.Dense}}, false},
		{"one λ choice", []auto.Head{{Method: "sparge", Knob: 0.9, Lambda: -2}, {Method: "sparge", Knob: 0.9, Lambda: -2}, {Method: "sparge", Knob: 0.9, Lambda: -2}, {Method: "sparge", Knob: 0.9, Lambda: -2}}, false},
		{"pooled", []auto.Head{{Method: "psa", Knob: 1}, {Method: "window", Knob: 64}, {Method: "sparge+psa", Knob: 0.8}, {Method: "xattn+psa", Knob: 0.8}}, true},
		{"one composition", []auto.Head{{Method: "xattn+psa", Knob: 0.9}, {Method: "xattn+psa", Knob: 0.9}, {Method: "xattn+psa", Knob: 0.9}, {Method: "xattn+psa", Knob: 0.9}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := auto.Planner{Heads: tc.heads}
			want, err := p.Plan(context.Background(), tl, q, k, v)
			if err != nil {
				t.Fatal(err)
			}
			dp, err := devicePlannerFor(p)
			if err != nil {
				t.Fatal(err)
			}
			h, err := dp.header(tl)
			if err != nil {
				t.Fatal(err)
			}
			lambda := slices.ContainsFunc(tc.heads, func(hd auto.Head) bool { return hd.Lambda != 0 })
			if (want.Filter != nil) != lambda {
				t.Fatalf("the CPU plan's filter %+v for heads %+v", want.Filter, tc.heads)
			}
			if !reflect.DeepEqual(h.Filter, want.Filter) {
				t.Errorf("device filter %+v, CPU plan's %+v", h.Filter, want.Filter)
			}
			lp, ok := dp.(levelPlanner)
			if !ok {
				t.Fatalf("%T is not a levelPlanner", dp)
			}
			if pools := lp.topLevel() > plan.Full; pools != tc.pooled {
				t.Errorf("top level %d, want pooling %v", lp.topLevel(), tc.pooled)
			}
			for _, l := range want.Level {
				if l > lp.topLevel() {
					t.Fatalf("the CPU plan holds level %d above the device's top %d", l, lp.topLevel())
				}
			}
			if !dp.sparse() {
				t.Error("sparse() false for sparse choices")
			}
		})
	}
}

// TestAutoDeviceErrors: what cannot plan on the device says why, with
// the sentinel callers test: auto without a profile (tuning is CPU work)
// wraps ErrUnsupported so that callers fall back; a layer of the wrong
// width and bad choices wrap plan.ErrInvalid; a composition without its
// parts is refused.
func TestAutoDeviceErrors(t *testing.T) {
	tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 128, Nk: 128, D: 64, Dv: 64}, Causal: true, BlockQ: 64, BlockK: 64}
	for _, tc := range []struct {
		name string
		p    plan.Planner
		want error
	}{
		{"no profile", auto.Planner{}, ErrUnsupported},
		{"no profile, pointer", &auto.Planner{Budget: 0.1}, ErrUnsupported},
		{"wrong width", auto.Planner{Heads: []auto.Head{{Method: auto.Dense}}}, plan.ErrInvalid},
		{"unknown method", auto.Planner{Heads: []auto.Head{{Method: "nope"}, {Method: auto.Dense}}}, auto.ErrProfile},
		{"bad knob", auto.Planner{Heads: []auto.Head{{Method: "sparge", Knob: 2}, {Method: auto.Dense}}}, auto.ErrProfile},
		{"composition without parts", auto.Compose{Binary: sparge.Planner{}}, plan.ErrInvalid},
		{"nested composition", auto.Compose{Binary: auto.Compose{Binary: sparge.Planner{}, Pooled: psa.Planner{}}, Pooled: psa.Planner{}}, ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dp, err := devicePlannerFor(tc.p)
			if err == nil {
				_, err = dp.header(tl)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("got %v, want an error wrapping %v", err, tc.want)
			}
		})
	}
}

// TestAutoPlanTimes times the device auto planner on two mixed profiles
// (Runner.Plan as device events) against the dense kernel and against
// each choice planned alone, at B=1, Hq=32, Hkv=8, D=128, bf16, causal,
// 128×64 blocks, on pseudo-random inputs; medians of five calls after one
// warm-up. It runs only when SPARSEATTN_AUTO_BENCH=1, for N in
// SPARSEATTN_AUTO_BENCH_N (default 32768).
func TestAutoPlanTimes(t *testing.T) {
	if os.Getenv("SPARSEATTN_AUTO_BENCH") != "1" {
		t.Skip("set SPARSEATTN_AUTO_BENCH=1 to time the device auto planner")
	}
	e := openOrSkip(t)
	profiles := []struct {
		name  string
		heads []auto.Head
	}{
		{"auto λ mix", []auto.Head{{Method: "sparge", Knob: 0.9, Lambda: -4}, {Method: "xattn", Knob: 0.9}, {Method: "flexprefill", Knob: 0.9}, {Method: "window", Knob: 2048}, {Method: auto.Dense}, {Method: "sparge", Knob: 0.95}}},
		{"auto pooled mix", []auto.Head{{Method: "psa", Knob: 1}, {Method: "sparge+psa", Knob: 0.8}, {Method: "xattn", Knob: 0.9}, {Method: auto.Dense}, {Method: "window", Knob: 2048}, {Method: "flexprefill", Knob: 0.9}}},
	}
	for _, n := range benchSizes(t, "SPARSEATTN_AUTO_BENCH_N", []int{32768}) {
		g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
		tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
		x := uint64(0x9e3779b97f4a7c15)
		q, k, v := benchTensor(t, e, g.Hq, n, g.D, 0, &x), benchTensor(t, e, g.Hkv, n, g.D, 0, &x), benchTensor(t, e, g.Hkv, n, g.D, 0, &x)
		type row struct {
			name string
			p    plan.Planner
		}
		rows := []row{{"dense", nil}}
		seen := map[string]bool{}
		for _, pr := range profiles {
			heads := make([]auto.Head, g.Hq)
			for h := range heads {
				heads[h] = pr.heads[h%len(pr.heads)]
			}
			rows = append(rows, row{pr.name, auto.Planner{Heads: heads}})
			for _, hd := range pr.heads {
				pl, err := auto.NewMethod(hd.Method, hd.Knob, hd.Lambda)
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("%s %g λ%g alone", hd.Method, hd.Knob, hd.Lambda)
				if hd.Method != auto.Dense && !seen[name] {
					seen[name] = true
					rows = append(rows, row{name, pl})
				}
			}
		}
		var denseMS float64
		for _, rw := range rows {
			tm := timeRunner(t, e, tl, rw.p, q, k, v)
			if rw.p == nil {
				denseMS = tm.run
			}
			t.Logf("N=%d causal %-28s plan %8.3f ms run %8.3f ms; plan/dense run %6.1f%%; density %.3f", n, rw.name, tm.plan, tm.run, 100*tm.plan/denseMS, tm.density)
		}
	}
}

// TestAutoShares checks that equal planners plan once per call: a psa
// choice and the pooled side of two compositions share one sub-planner,
// and so do a sparge choice and a composition's binary side at the same
// knob; different knobs do not.
func TestAutoShares(t *testing.T) {
	tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 5, Hkv: 1, Nq: 256, Nk: 256, D: 64, Dv: 64}, Causal: true, BlockQ: 64, BlockK: 64}
	heads := []auto.Head{{Method: "psa", Knob: 1}, {Method: "sparge+psa", Knob: 0.8}, {Method: "xattn+psa", Knob: 0.8}, {Method: "sparge", Knob: 0.8}, {Method: "sparge", Knob: 0.9}}
	dp, err := devicePlannerFor(auto.Planner{Heads: heads})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.header(tl); err != nil {
		t.Fatal(err)
	}
	a := dp.(*autoPlanner)
	var names []string
	for _, s := range a.all {
		names = append(names, s.name)
	}
	// psa, sparge 0.8, sparge+psa, xattn 0.8, xattn+psa, sparge 0.9.
	want := []string{"psa", "sparge", "sparge+psa", "xattn", "xattn+psa", "sparge"}
	if !slices.Equal(names, want) {
		t.Fatalf("sub-planners %v, want %v", names, want)
	}
	tags := map[string]bool{}
	for _, s := range a.all {
		if tags[s.tag] {
			t.Errorf("tag %s names two sub-planners", s.tag)
		}
		tags[s.tag] = true
	}
	comp := a.subs[1].dp.(*composePlanner)
	if comp.pooled != a.subs[0] || comp.binary != a.subs[3] || !comp.shared {
		t.Error("sparge+psa does not share the psa choice and the sparge 0.8 choice")
	}
	if a.subs[2].dp.(*composePlanner).pooled != a.subs[0] {
		t.Error("xattn+psa does not share the psa choice")
	}
}

// TestAutoReplan checks on the device that a runner's auto planner plans
// each call's inputs afresh (its sub-planners share plans within a call
// only): planning inputs A, then B, then A again gives A's plan again,
// where B's differs. It needs a GPU.
func TestAutoReplan(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	g := tensor.Geometry{B: 1, Hq: 8, Hkv: 2, Nq: 2048, Nk: 2048, D: 128, Dv: 128}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	heads := []auto.Head{{Method: "psa", Knob: 1}, {Method: "sparge+psa", Knob: 0.8}, {Method: "xattn+psa", Knob: 0.8}, {Method: "sparge", Knob: 0.8}}
	full := make([]auto.Head, g.Hq)
	for h := range full {
		full[h] = heads[h%len(heads)]
	}
	run, err := e.NewRunner(ctx, tl, tensor.BFloat16, auto.Planner{Heads: full})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	x := uint64(0x2545f4914f6cdd1d)
	inputs := func(offset float32) [3]*Tensor {
		return [3]*Tensor{benchTensor(t, e, g.Hq, g.Nq, g.D, offset, &x), benchTensor(t, e, g.Hkv, g.Nk, g.D, offset, &x), benchTensor(t, e, g.Hkv, g.Nk, g.D, 0, &x)}
	}
	a, b := inputs(0), inputs(0.5)
	var plans []*plan.Plan
	for _, in := range [][3]*Tensor{a, b, a} {
		if _, err := run.Plan(ctx, in[0], in[1], in[2]); err != nil {
			t.Fatal(err)
		}
		p, err := run.DownloadPlan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	if reflect.DeepEqual(plans[0], plans[1]) {
		t.Fatal("inputs A and B plan alike: the check below would be void")
	}
	if !reflect.DeepEqual(plans[0], plans[2]) {
		t.Error("planning A after B does not give A's plan again")
	}
}
