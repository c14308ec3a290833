package cuda

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// benchPlanners are the device planners TestPlannerTimes knows, at the
// defaults the CLI uses.
func benchPlanners() []plan.Planner {
	return []plan.Planner{
		window.Planner{Sink: 128, Window: 2048},
		sparge.Planner{Params: sparge.Params{CDF: 0.95}}, // TopCdf 0.95, θ 0.3: the CLI's default
		unisparse.Planner{},
		xattn.Planner{Stride: 16, Threshold: 0.9},
		flexprefill.Planner{Gamma: 0.9, Tau: 0.1},
		minference.Planner{LastQ: 64, Vertical: 1000, Slash: 6096},
		oracle.Planner{CDF: 0.95},
		s2o.Planner{Segment: 512, Tau: 0.005},  // the CLI's defaults
		s2o.Planner{Segment: 2048, Tau: 0.005}, // the paper's segment at 128K
		psa.Planner{Scale: psa.DefaultScale},   // sampling, threshold, the paper's thresholds scaled
	}
}

// TestPlannerTimes times the device planners (Runner.Plan as device
// events) against the dense kernel (Runner.Run's RunMS) at B=1, Hq=32,
// Hkv=8, D=128, bf16, 128×64 blocks (128×SPARSEATTN_PLANNER_BENCH_BLOCKK
// where set), on pseudo-random inputs: the median of five calls after one
// warm-up. It runs only when
// SPARSEATTN_PLANNER_BENCH is set, to "1" for every planner or to a
// comma-separated list of names, for N in SPARSEATTN_PLANNER_BENCH_N
// (default 8192,32768), causal, or non-causal too when
// SPARSEATTN_PLANNER_BENCH_NONCAUSAL=1.
func TestPlannerTimes(t *testing.T) {
	which := os.Getenv("SPARSEATTN_PLANNER_BENCH")
	if which == "" {
		t.Skip("set SPARSEATTN_PLANNER_BENCH=1 (or a list of planner names) to time the device planners")
	}
	sizes := benchSizes(t, "SPARSEATTN_PLANNER_BENCH_N", []int{8192, 32768})
	planners := []plan.Planner{nil}
	for _, p := range benchPlanners() {
		if which == "1" || slices.Contains(strings.Split(which, ","), p.Name()) {
			planners = append(planners, p)
		}
	}
	e := openOrSkip(t)
	causal := []bool{true}
	if os.Getenv("SPARSEATTN_PLANNER_BENCH_NONCAUSAL") == "1" {
		causal = append(causal, false)
	}
	for _, n := range sizes {
		for _, cz := range causal {
			timePlanners(t, e, planners, n, cz)
		}
	}
}

// timePlanners is TestPlannerTimes at one length and masking.
func timePlanners(t *testing.T, e *Engine, planners []plan.Planner, n int, causal bool) {
	g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
	tl := plan.Tiling{Geometry: g, Causal: causal, BlockQ: 128, BlockK: benchBlockK(t)}
	x := uint64(0x9e3779b97f4a7c15)
	q, k, v := benchTensor(t, e, g.Hq, n, g.D, 0, &x), benchTensor(t, e, g.Hkv, n, g.D, 0, &x), benchTensor(t, e, g.Hkv, n, g.D, 0, &x)
	var denseMS float64
	for _, p := range planners {
		name := benchName(p)
		tm := timeRunner(t, e, tl, p, q, k, v)
		if p == nil {
			denseMS = tm.run
		}
		t.Logf("N=%d causal=%v %-12s plan %.3f ms (min %.3f) run %.3f ms; plan/dense run %.1f%%; density %.3f", n, causal, name, tm.plan, tm.minPlan, tm.run, 100*tm.plan/denseMS, tm.density)
	}
}

// benchName is p's name in the timing tests' lines: dense for nil, and
// s2o with its segment.
func benchName(p plan.Planner) string {
	if p == nil {
		return "dense"
	}
	if s, ok := p.(s2o.Planner); ok {
		return fmt.Sprintf("s2o S=%d", s.Segment)
	}
	return p.Name()
}

// runnerTimes are a runner's median plan and run times over five calls
// after one warm-up, its fastest plan, and the density of its last call.
type runnerTimes struct {
	plan, minPlan, run, density float64
}

// timeRunner times planner p (nil: dense) through a Runner with tiling tl
// on q, k and v.
func timeRunner(t *testing.T, e *Engine, tl plan.Tiling, p plan.Planner, q, k, v *Tensor) runnerTimes {
	t.Helper()
	ctx := context.Background()
	run, err := e.NewRunner(ctx, tl, tensor.BFloat16, p)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	var plans, runs []float64
	var tm runnerTimes
	for i := range 6 {
		out, rep, err := run.Run(ctx, q, k, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		out.Free()
		if i > 0 {
			plans, runs = append(plans, rep.PlanMS), append(runs, rep.RunMS)
		}
		tm.density = 1 - rep.Stats.Sparsity()
	}
	slices.Sort(plans)
	slices.Sort(runs)
	tm.plan, tm.minPlan, tm.run = plans[2], plans[0], runs[2]
	return tm
}

// benchBlockK is the key block of the planner timing tests: 64, or
// SPARSEATTN_PLANNER_BENCH_BLOCKK (e2e plans block masks at 128).
func benchBlockK(t *testing.T) int {
	s := os.Getenv("SPARSEATTN_PLANNER_BENCH_BLOCKK")
	if s == "" {
		return 64
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("SPARSEATTN_PLANNER_BENCH_BLOCKK: %v", err)
	}
	return n
}

// benchSizes returns the sequence lengths listed in the environment
// variable env (comma-separated), or def.
func benchSizes(t *testing.T, env string, def []int) []int {
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// benchTensor uploads a [1, h, n, d] bf16 tensor of cheap pseudo-random
// values of about unit size plus offset, drawn from the xorshift state x;
// it is freed when the test ends.
func benchTensor(t testing.TB, e *Engine, h, n, d int, offset float32, x *uint64) *Tensor {
	ht, err := tensor.New(tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: h, N: n, D: d})
	if err != nil {
		t.Fatal(err)
	}
	bits := ht.Bits16()
	for i := range bits {
		*x ^= *x << 13
		*x ^= *x >> 7
		*x ^= *x << 17
		f := float32(int32(*x>>40)&0xffff-0x8000)/0x4000 + offset
		bits[i] = uint16(math.Float32bits(f) >> 16)
	}
	dev, err := e.Upload(context.Background(), ht)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Free() })
	return dev
}

// BenchmarkPlan measures what a device plan costs the host and the
// device: Runner.Plan for each planner of benchPlanners at 8K tokens
// (B=1, Hq=32, Hkv=8, D=128, bf16, causal, 128×64 blocks). Plan waits for
// its end event, so ns/op is the host's work before and between the
// launches plus the device's; device-µs/op is the device's alone (events).
// Run it under -test.cpuprofile to see where the host's share goes:
//
//	go test -run '^$' -bench 'BenchmarkPlan$' -benchtime 400x ./cuda
func BenchmarkPlan(b *testing.B) {
	e := openOrSkip(b)
	const n = 8192
	g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	x := uint64(0x9e3779b97f4a7c15)
	q, k, v := benchTensor(b, e, g.Hq, n, g.D, 0, &x), benchTensor(b, e, g.Hkv, n, g.D, 0, &x), benchTensor(b, e, g.Hkv, n, g.D, 0, &x)
	for _, p := range benchPlanners() {
		b.Run(strings.ReplaceAll(benchName(p), " ", "_"), func(b *testing.B) { benchPlans(b, e, tl, p, q, k, v, nil) })
	}
}

// benchPlans runs b.N plans of p on q, k and v after one that compiles
// and allocates, each after before(i) where before is not nil, and
// reports their mean device time as device-µs/op.
func benchPlans(b *testing.B, e *Engine, tl plan.Tiling, p plan.Planner, q, k, v *Tensor, before func(i int)) {
	ctx := context.Background()
	run, err := e.NewRunner(ctx, tl, tensor.BFloat16, p)
	if err != nil {
		b.Fatal(err)
	}
	defer run.Close()
	if _, err := run.Plan(ctx, q, k, v); err != nil {
		b.Fatal(err)
	}
	var dev float64
	b.ResetTimer()
	for i := range b.N {
		if before != nil {
			before(i)
		}
		ms, err := run.Plan(ctx, q, k, v)
		if err != nil {
			b.Fatal(err)
		}
		dev += ms
	}
	b.ReportMetric(dev*1e3/float64(b.N), "device-µs/op")
}

// BenchmarkPlanCold is BenchmarkPlan with L2 emptied before every plan,
// as Runner.Benchmark and the end-to-end table do, in two ways: "dirty"
// overwrites the 256 MiB scratch (what Runner.Benchmark does, and
// Triton's do_bench for the peers), which leaves L2 full of the
// overwrite's dirty lines, so that the plan's first reads also pay their
// write-back; "clean" then reads the scratch's first 128 MiB (l2_read),
// long evicted by the overwrite, so that L2 holds clean lines of neither
// input. device-µs/op is the plan's device time; SPARSEATTN_PLAN_COLD_N
// sets N (default 8192). The planners: dense, sparge and psa at their
// benchmark defaults.
func BenchmarkPlanCold(b *testing.B) {
	e := openOrSkip(b)
	ctx := context.Background()
	n := 8192
	if s := os.Getenv("SPARSEATTN_PLAN_COLD_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("SPARSEATTN_PLAN_COLD_N=%q: want a positive length", s)
		}
		n = v
	}
	g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	x := uint64(0x9e3779b97f4a7c15)
	q, k, v := benchTensor(b, e, g.Hq, n, g.D, 0, &x), benchTensor(b, e, g.Hkv, n, g.D, 0, &x), benchTensor(b, e, g.Hkv, n, g.D, 0, &x)
	var read driver.Function
	err := e.dev.Do(ctx, func(c *driver.Ctx) error {
		var err error
		read, err = e.auxFunction(c, "runtime.cu", "l2_read")
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	flush := func(clean bool, i int) {
		err := e.dev.Do(ctx, func(c *driver.Ctx) error {
			c = c.OnStream(q.stream)
			if !e.flushL2(c, byte(i)) {
				return fmt.Errorf("no %d-byte scratch to flush L2 with", flushBytes)
			}
			if !clean {
				return nil
			}
			p, n16 := e.bufs.flush.ptr, int64(128<<20)/16
			return c.Launch(read, driver.Dim3{X: uint32(4 * max(e.dev.SMs, 1)), Y: 1, Z: 1}, driver.Dim3{X: 256, Y: 1, Z: 1}, 0,
				driver.Arg(&p), driver.Arg(&n16), driver.Arg(&p))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range []plan.Planner{nil, sparge.Planner{Params: sparge.Params{CDF: 0.95}}, psa.Planner{Scale: psa.DefaultScale}} {
		for _, clean := range []bool{false, true} {
			mode := "dirty"
			if clean {
				mode = "clean"
			}
			b.Run(strings.ReplaceAll(benchName(p), " ", "_")+"/"+mode, func(b *testing.B) {
				benchPlans(b, e, tl, p, q, k, v, func(i int) { flush(clean, i) })
			})
		}
	}
}
