package cuda

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// TestSpargePlanTimes times the sparge device planner against the dense
// kernel at B=1, Hq=32, Hkv=8, D=128, bf16, causal and non-causal, on
// pseudo-random inputs, for N in SPARSEATTN_SPARGE_BENCH_N (default
// 8192,32768,131072): the median PlanMS of seven Plan calls after a
// warm-up, in top-k mode (top-k 0.5, θ 0.3) and in CDF mode (τ 0.95, the
// default; with sparge_pool in place of sparge_pool_vec; with sparge_rows
// or sparge_rows_search at every row width, the latter with 8 or 2 rows a
// block), the device time of each of its two kernels and of the whole
// plan step (spargeStages), and the median RunMS of three dense runs. It runs only when
// SPARSEATTN_SPARGE_BENCH is set. With SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm
// the inputs are the calibrated llm workload (seed 1, causal only) instead.
func TestSpargePlanTimes(t *testing.T) {
	if os.Getenv("SPARSEATTN_SPARGE_BENCH") == "" {
		t.Skip("set SPARSEATTN_SPARGE_BENCH=1 to time the sparge device planner")
	}
	e := openOrSkip(t)
	sizes := benchSizes(t, "SPARSEATTN_SPARGE_BENCH_N", []int{8192, 32768, 131072})
	// offset is added to every element: 1.5 makes each block's CosSim about
	// 0.6, above the default θ, so that the whole predictor runs (with 0,
	// every block would be judged non-self-similar and every row dense).
	offset := float32(1.5)
	if s := os.Getenv("SPARSEATTN_SPARGE_BENCH_OFFSET"); s != "" {
		f, err := strconv.ParseFloat(s, 32)
		if err != nil {
			t.Fatal(err)
		}
		offset = float32(f)
	}
	if os.Getenv("SPARSEATTN_SPARGE_BENCH_WORKLOAD") == "llm" {
		for _, n := range sizes {
			w, err := workload.Generate(context.Background(), workload.Config{Kind: workload.LLM, Seed: 1, B: 1, Hq: 32, Hkv: 8, N: n, D: 128,
				DType: tensor.BFloat16, Layout: tensor.BHND})
			if err != nil {
				t.Fatal(err)
			}
			var dev [3]*Tensor
			for i, h := range []*tensor.Tensor{w.Q, w.K, w.V} {
				if dev[i], err = e.Upload(context.Background(), h); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { dev[i].Free() })
			}
			t.Logf("N=%d: the llm workload (seed 1)", n)
			spargeTimes(t, e, n, true, dev[0], dev[1], dev[2])
		}
		return
	}
	for _, n := range sizes {
		x := uint64(0x9e3779b97f4a7c15)
		q, k, v := benchTensor(t, e, 32, n, 128, offset, &x), benchTensor(t, e, 8, n, 128, offset, &x), benchTensor(t, e, 8, n, 128, offset, &x)
		for _, causal := range []bool{true, false} {
			spargeTimes(t, e, n, causal, q, k, v)
		}
	}
}

// spargeTimes is TestSpargePlanTimes at one N, causal or not.
func spargeTimes(t *testing.T, e *Engine, n int, causal bool, q, k, v *Tensor) {
	ctx := context.Background()
	median := func(xs []float64) float64 {
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	{
		g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
		tl := plan.Tiling{Geometry: g, Causal: causal, BlockQ: sparge.PaperBlockQ, BlockK: sparge.PaperBlockK}
		dense, err := e.NewRunner(ctx, tl, tensor.BFloat16, nil)
		if err != nil {
			t.Fatal(err)
		}
		var runs, dplan []float64
		for range 3 {
			ms, err := dense.Plan(ctx, q, k, v)
			if err != nil {
				t.Fatal(err)
			}
			dplan = append(dplan, ms)
			out, rep, err := dense.Run(ctx, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			out.Free()
			runs = append(runs, rep.RunMS)
		}
		denseMS := median(runs)
		t.Logf("N=%d causal=%v dense run %.3f ms, dense plan %.4f ms", n, causal, denseMS, median(dplan))
		cdf := sparge.Planner{Params: sparge.Params{CDF: 0.95}}
		for _, c := range []struct {
			name            string
			p               sparge.Planner
			searchMin, rows int
			scalarPool      bool
		}{
			{name: "top-k 0.5, θ 0.3", p: sparge.Planner{Params: sparge.Params{TopK: sparge.DefaultTopK}}},
			{name: "CDF τ=0.95 (θ 0.3, the CLI's default)", p: cdf},
			{name: "CDF τ=0.95, sparge_pool instead of sparge_pool_vec", p: cdf, scalarPool: true},
			{name: "CDF τ=0.95, sparge_rows (bitonic sort in shared memory)", p: cdf, searchMin: 1 << 30},
			{name: "CDF τ=0.95, sparge_rows_search at every width", p: cdf, searchMin: 1},
			{name: "CDF τ=0.95, sparge_rows_search at every width, 8 rows a block", p: cdf, searchMin: 1, rows: 8},
			{name: "CDF τ=0.95, sparge_rows_search at every width, 2 rows a block", p: cdf, searchMin: 1, rows: 2},
		} {
			run, err := e.NewRunner(ctx, tl, tensor.BFloat16, c.p)
			if err != nil {
				t.Fatal(err)
			}
			sp := run.planner.(*spargePlanner)
			sp.searchMin, sp.rows, sp.scalarPool = c.searchMin, c.rows, c.scalarPool
			if _, err := run.Plan(ctx, q, k, v); err != nil {
				t.Fatal(err)
			}
			var ms []float64
			for range 7 {
				m, err := run.Plan(ctx, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				ms = append(ms, m)
			}
			out, rep, err := run.Run(ctx, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			pool, rows, whole := spargeStages(t, e, run, dense, q, k, v, out)
			out.Free()
			run.Close()
			pm := median(ms)
			t.Logf("N=%d causal=%v sparge %s: plan %.4f ms (%.2f%% of dense), run %.3f ms, density %.3f; GPU busy before: pool %.4f rows %.4f, whole plan %.4f ms",
				n, causal, c.name, pm, 100*pm/denseMS, rep.RunMS, float64(rep.Stats.QKBlocks)/float64(rep.Stats.DenseBlocks), pool, rows, whole)
		}
		dense.Close()
	}
}

// spargeStages times the sparge planner's two kernels, and the runner's
// whole plan step, with device events while the GPU is still busy with a
// dense attention launch queued before them, so that no host-side gap
// between launches is counted: the device time of the work itself.
func spargeStages(t *testing.T, e *Engine, run, dense *Runner, q, k, v, out *Tensor) (pool, rows, whole float64) {
	t.Helper()
	err := e.dev.Do(context.Background(), func(c *driver.Ctx) error {
		c = c.OnStream(q.stream)
		var ev [4]driver.Event
		for i := range ev {
			var err error
			if ev[i], err = c.NewEvent(); err != nil {
				return err
			}
			defer c.DestroyEvent(ev[i])
		}
		sp := run.planner.(*spargePlanner)
		b := &run.bufs
		in := &planInput{e: e, t: run.t, q: viewOf(q), k: viewOf(k), v: viewOf(v), rowLen: b.rowLen.ptr, lists: b.lists.ptr, stride: kBlocks(run.t), scratch: &b.scratch}
		l, err := sp.prepare(c, in)
		if err != nil {
			return err
		}
		if _, err := dense.execute(c, q, k, v, out); err != nil {
			return err
		}
		for i, f := range []func() error{func() error { return l.launchPool(c) }, func() error { return l.launchRows(c) }, func() error { return run.plan(c, q, k, v) }} {
			if err := c.Record(ev[i]); err != nil {
				return err
			}
			if err := f(); err != nil {
				return err
			}
		}
		if err := c.Record(ev[3]); err != nil {
			return err
		}
		if err := c.Sync(); err != nil {
			return err
		}
		var ms [3]float32
		for i := range ms {
			if ms[i], err = c.Elapsed(ev[i], ev[i+1]); err != nil {
				return err
			}
		}
		pool, rows, whole = float64(ms[0]), float64(ms[1]), float64(ms[2])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pool, rows, whole
}

// TestSpargePoolVariants times sparge_pool_vec alone at B=1, Hq=32, Hkv=8,
// D=128, bf16, causal, on the llm workload (seed 1) at each N in
// SPARSEATTN_SPARGE_BENCH_N (default 8192): per variant of its staging
// (stages, blocks an SM, and a load-only build that pools nothing, the
// memory pipeline's own time), the median over five rounds of the mean
// device time of 20 back-to-back launches. It runs only when
// SPARSEATTN_SPARGE_BENCH is set.
func TestSpargePoolVariants(t *testing.T) {
	if os.Getenv("SPARSEATTN_SPARGE_BENCH") == "" {
		t.Skip("set SPARSEATTN_SPARGE_BENCH=1 to time the sparge pool variants")
	}
	e := openOrSkip(t)
	ctx := context.Background()
	for _, n := range benchSizes(t, "SPARSEATTN_SPARGE_BENCH_N", []int{8192}) {
		w, err := workload.Generate(ctx, workload.Config{Kind: workload.LLM, Seed: 1, B: 1, Hq: 32, Hkv: 8, N: n, D: 128,
			DType: tensor.BFloat16, Layout: tensor.BHND})
		if err != nil {
			t.Fatal(err)
		}
		var dev [3]*Tensor
		for i, h := range []*tensor.Tensor{w.Q, w.K, w.V} {
			if dev[i], err = e.Upload(ctx, h); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dev[i].Free() })
		}
		g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
		tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: sparge.PaperBlockQ, BlockK: sparge.PaperBlockK}
		for _, v := range []struct {
			stages, blocks int
			noComp         bool
		}{{2, 3, false}, {3, 2, false}, {4, 1, false}, {2, 2, false}, {2, 3, true}, {3, 2, true}, {4, 1, true}, {2, 2, true}} {
			run, err := e.NewRunner(ctx, tl, tensor.BFloat16, sparge.Planner{Params: sparge.Params{CDF: 0.95}})
			if err != nil {
				t.Fatal(err)
			}
			sp := run.planner.(*spargePlanner)
			sp.vecStages, sp.vecBlocks, sp.vecNoComp = v.stages, v.blocks, v.noComp
			if _, err := run.Plan(ctx, dev[0], dev[1], dev[2]); err != nil {
				t.Fatal(err)
			}
			var ms []float64
			err = e.dev.Do(ctx, func(c *driver.Ctx) error {
				c = c.OnStream(dev[0].stream)
				var ev [2]driver.Event
				for i := range ev {
					var err error
					if ev[i], err = c.NewEvent(); err != nil {
						return err
					}
					defer c.DestroyEvent(ev[i])
				}
				b := &run.bufs
				in := &planInput{e: e, t: run.t, q: viewOf(dev[0]), k: viewOf(dev[1]), v: viewOf(dev[2]), rowLen: b.rowLen.ptr, lists: b.lists.ptr, stride: kBlocks(run.t), scratch: &b.scratch}
				l, err := sp.prepare(c, in)
				if err != nil {
					return err
				}
				const reps = 20
				for round := range 6 {
					if err := c.Record(ev[0]); err != nil {
						return err
					}
					for range reps {
						if err := l.launchPool(c); err != nil {
							return err
						}
					}
					if err := c.Record(ev[1]); err != nil {
						return err
					}
					m, err := c.Elapsed(ev[0], ev[1])
					if err != nil {
						return err
					}
					if round > 0 { // the first round warms up
						ms = append(ms, float64(m)/reps)
					}
				}
				return nil
			})
			run.Close()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(ms)
			t.Logf("N=%d sparge_pool_vec stages %d, %d blocks an SM, load only %v: %.1f µs (min %.1f, max %.1f)",
				n, v.stages, v.blocks, v.noComp, 1000*ms[len(ms)/2], 1000*ms[0], 1000*ms[len(ms)-1])
		}
	}
}
