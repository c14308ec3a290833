package cuda

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestPlannerKernelTimes times each kernel launch of a device plan (the
// planner's kernels, then assembly and levels) with device events
// recorded after every launch, at TestPlannerTimes's shapes (causal): the
// median of five plans after one warm-up Run. It runs for the planners
// SPARSEATTN_KERNEL_BENCH names (comma-separated, TestPlannerTimes's
// names; "1": all of them), for N in SPARSEATTN_PLANNER_BENCH_N (default
// 8192,32768), at TestPlannerTimes's blocks (benchBlockK).
func TestPlannerKernelTimes(t *testing.T) {
	which := os.Getenv("SPARSEATTN_KERNEL_BENCH")
	if which == "" {
		t.Skip("set SPARSEATTN_KERNEL_BENCH to a list of planner names (or 1) to time each planner's kernels")
	}
	var planners []plan.Planner
	for _, p := range benchPlanners() {
		if which == "1" || slices.Contains(strings.Split(which, ","), p.Name()) {
			planners = append(planners, p)
		}
	}
	e := openOrSkip(t)
	for _, n := range benchSizes(t, "SPARSEATTN_PLANNER_BENCH_N", []int{8192, 32768}) {
		g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
		tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: benchBlockK(t)}
		x := uint64(0x9e3779b97f4a7c15)
		q, k, v := benchTensor(t, e, g.Hq, n, g.D, 0, &x), benchTensor(t, e, g.Hkv, n, g.D, 0, &x), benchTensor(t, e, g.Hkv, n, g.D, 0, &x)
		for _, p := range planners {
			names, times, host, err := kernelTimes(e, tl, p, q, k, v)
			if err != nil {
				t.Fatalf("%s at N=%d: %v", p.Name(), n, err)
			}
			var sum float64
			parts := make([]string, len(names))
			for i, ts := range times {
				slices.Sort(ts)
				sum += ts[len(ts)/2]
				parts[i] = fmt.Sprintf("%s %.3f", names[i], ts[len(ts)/2])
			}
			t.Logf("N=%d %s: %s; sum %.3f ms; host %.1f µs a plan", n, benchName(p), strings.Join(parts, ", "), sum, host)
		}
	}
}

// kernelTimes plans p five times after one warm-up Run and returns each
// launch's kernel name and its five times in milliseconds (from the event
// before it to the event after it), and the median host time of issuing
// one whole plan without the events, in microseconds (the device
// synchronized before each, so that the host does not wait on a full
// queue).
func kernelTimes(e *Engine, tl plan.Tiling, p plan.Planner, q, k, v *Tensor) (names []string, times [][]float64, hostUS float64, err error) {
	ctx := context.Background()
	run, err := e.NewRunner(ctx, tl, tensor.BFloat16, p)
	if err != nil {
		return nil, nil, 0, err
	}
	defer run.Close()
	out, _, err := run.Run(ctx, q, k, v, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	out.Free()
	err = e.dev.Do(ctx, func(c *driver.Ctx) error {
		c = c.OnStream(q.stream)
		var evs []driver.Event
		defer func() {
			for _, ev := range evs {
				c.DestroyEvent(ev)
			}
		}()
		for rep := range 5 {
			var fns []driver.Function
			used := 0
			record := func(c *driver.Ctx) error {
				if used == len(evs) {
					ev, err := c.NewEvent()
					if err != nil {
						return err
					}
					evs = append(evs, ev)
				}
				used++
				return c.Record(evs[used-1])
			}
			if err := record(c); err != nil {
				return err
			}
			obs := c.Observed(func(c *driver.Ctx, f driver.Function) error {
				fns = append(fns, f)
				return record(c)
			})
			if err := run.plan(obs, q, k, v); err != nil {
				return err
			}
			if rep == 0 {
				names = make([]string, len(fns))
				for i, f := range fns {
					names[i] = e.auxName(f)
				}
				times = make([][]float64, len(fns))
			} else if len(fns) != len(names) {
				return fmt.Errorf("plan %d launched %d kernels, the first %d", rep, len(fns), len(names))
			}
			for i := range fns {
				ms, err := c.Elapsed(evs[i], evs[i+1])
				if err != nil {
					return err
				}
				times[i] = append(times[i], float64(ms))
			}
		}
		var host []float64
		for range 5 {
			if err := c.SyncStream(); err != nil {
				return err
			}
			start := time.Now()
			if err := run.plan(c, q, k, v); err != nil {
				return err
			}
			host = append(host, float64(time.Since(start).Nanoseconds())/1e3)
		}
		slices.Sort(host)
		hostUS = host[len(host)/2]
		return c.SyncStream()
	})
	return names, times, hostUS, err
}

// auxName is the kernel name of an auxiliary function f, with its file
// ("?" for a function not loaded by auxFunction).
func (e *Engine) auxName(f driver.Function) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for key, k := range e.aux {
		if k.fn == f {
			return key.fn
		}
	}
	return "?"
}
