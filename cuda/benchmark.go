package cuda

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Timing is what Benchmark measured.
type Timing struct {
	Kernel       Variant       // the kernel configuration that ran
	MedianMS     float64       // median kernel time over the timed launches
	TimesMS      []float64     // every timed launch, in order
	PlanUploadMS float64       // copying the plan's CSR arrays to the device
	Stats        plan.Stats    // counters of the last launch
	Wall         time.Duration // the whole call, staging included
	// FlushedL2 says whether L2 was overwritten before each launch (see
	// Benchmark); false where the scratch buffer could not be allocated.
	FlushedL2 bool
}

// flushBytes is the scratch Benchmark overwrites before each launch: more
// than any current GPU's L2, and what triton.testing.do_bench clears.
const flushBytes = 256 << 20

// Variant names a compiled kernel configuration.
type Variant string

// Benchmark uploads the inputs once, runs p warmup+reps times and times
// each timed launch with device events. Outputs stay on the device.
//
// Before each launch it overwrites a 256 MiB scratch buffer on the device,
// as triton.testing.do_bench does for the peers: L2 then holds none of the
// inputs, and the GPU is still busy with that when the host enqueues the
// start event and the launch, so the host's launch latency stays out of
// the time (an idle GPU would record the start event at once and wait for
// the launch; measured 15 µs for a one-tile kernel on an H100).
func (e *Engine) Benchmark(ctx context.Context, p *plan.Plan, q, k, v *tensor.Tensor, warmup, reps int) (Timing, error) {
	start := time.Now()
	if reps < 1 || warmup < 0 {
		return Timing{}, fmt.Errorf("%w: reps %d must be ≥ 1 and warmup %d ≥ 0", ErrUnsupported, reps, warmup)
	}
	j, err := e.prepare(p, q, k, v)
	if err != nil {
		return Timing{}, err
	}
	t := Timing{Kernel: Variant(j.v.String())}
	err = e.dev.Do(ctx, func(c *driver.Ctx) error {
		if err := e.upload(c, j); err != nil {
			return err
		}
		ev := make([]driver.Event, 2)
		for i := range ev {
			var err error
			if ev[i], err = c.NewEvent(); err != nil {
				return err
			}
			defer c.DestroyEvent(ev[i])
		}
		// The plan upload alone, as a sparse caller pays it per call.
		ms, err := timeOn(c, ev, func() error { return e.uploadPlan(c, j) })
		if err != nil {
			return err
		}
		t.PlanUploadMS = ms
		// Without room for the scratch buffer, time as before: launch
		// latency included, a warm L2.
		t.FlushedL2 = e.bufs.flush.ensure(c, flushBytes) == nil
		for i := range warmup + reps {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := c.Memset(e.bufs.counters.ptr, 0, counterBytes); err != nil {
				return err
			}
			if t.FlushedL2 {
				if err := c.Memset(e.bufs.flush.ptr, byte(i), flushBytes); err != nil {
					return err
				}
			}
			ms, err := timeOn(c, ev, func() error { return e.launch(c, j) })
			if err != nil {
				return err
			}
			if i >= warmup {
				t.TimesMS = append(t.TimesMS, ms)
			}
		}
		t.Stats, err = e.stats(c, j)
		return err
	})
	if err != nil {
		return Timing{}, err
	}
	s := append([]float64(nil), t.TimesMS...)
	sort.Float64s(s)
	t.MedianMS = s[len(s)/2]
	t.Wall = time.Since(start)
	return t, nil
}

// timeOn records ev[0], runs enqueue, records ev[1] and returns the
// milliseconds between the two events.
func timeOn(c *driver.Ctx, ev []driver.Event, enqueue func() error) (float64, error) {
	if err := c.Record(ev[0]); err != nil {
		return 0, err
	}
	if err := enqueue(); err != nil {
		return 0, err
	}
	if err := c.Record(ev[1]); err != nil {
		return 0, err
	}
	ms, err := c.Elapsed(ev[0], ev[1])
	return float64(ms), err
}

// Benchmark times warmup+reps calls of Run on q, k and v into out (a
// device tensor the caller gives), with device events, and returns the
// medians of the timed ones. As Engine.Benchmark does, it overwrites a
// 256 MiB scratch buffer before each call, so that L2 holds none of the
// inputs and the host's launch latency of the first kernel stays out of
// the time; the launches between the planner's kernels and the attention
// kernel are timed as a user pays them.
func (r *Runner) Benchmark(ctx context.Context, q, k, v, out *Tensor, warmup, reps int) (RunTiming, error) {
	if reps < 1 || warmup < 0 {
		return RunTiming{}, fmt.Errorf("%w: reps %d must be ≥ 1 and warmup %d ≥ 0", ErrUnsupported, reps, warmup)
	}
	if out == nil {
		return RunTiming{}, fmt.Errorf("%w: Benchmark needs an output tensor", ErrMismatch)
	}
	var t RunTiming
	var plans, runs, totals []float64
	for i := range warmup + reps {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		flushed := false
		err := r.e.dev.Do(ctx, func(c *driver.Ctx) error {
			flushed = r.e.flushL2(c.OnStream(q.stream), byte(i))
			return nil
		})
		if err != nil {
			return t, err
		}
		_, rep, err := r.Run(ctx, q, k, v, out)
		if err != nil {
			return t, err
		}
		if i >= warmup {
			t.Last, t.FlushedL2 = rep, flushed
			plans = append(plans, rep.PlanMS)
			runs = append(runs, rep.RunMS)
			totals = append(totals, rep.PlanMS+rep.RunMS)
		}
	}
	t.PlanMS, t.RunMS, t.TotalMS = medianOf(plans), medianOf(runs), medianOf(totals)
	return t, nil
}

// flushL2 overwrites the engine's 256 MiB scratch buffer on c's stream,
// and reports false where it cannot be allocated.
func (e *Engine) flushL2(c *driver.Ctx, b byte) bool {
	if e.bufs.flush.ensure(c, flushBytes) != nil {
		return false
	}
	return c.Memset(e.bufs.flush.ptr, b, flushBytes) == nil
}

// medianOf returns the median of xs (the upper one of an even count).
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
