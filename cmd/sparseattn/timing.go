package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/evaluate"
	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// runFlags are the timing and tiling flags eval and bench share.
type runFlags struct {
	repeat, warmup, workers, blockQ, blockK int
	device                                  string
	logf                                    func(format string, args ...any)
	// gpu keeps the inputs on the GPU under --device cuda or auto (see
	// gpuSession); nil on the CPU.
	gpu *gpuSession
}

func (f *runFlags) check() error {
	switch {
	case f.repeat < 1 || f.warmup < 0:
		return fmt.Errorf("%w: --repeat must be ≥ 1 and --warmup ≥ 0", errUsage)
	case f.workers < 0:
		return fmt.Errorf("%w: --workers must be ≥ 0", errUsage)
	case f.blockQ < 1 || f.blockK < 1 || f.blockQ > plan.MaxBlock || f.blockK > plan.MaxBlock:
		return fmt.Errorf("%w: --block-q and --block-k must be in 1..%d", errUsage, plan.MaxBlock)
	}
	if _, err := sparseattn.ParseDevice(f.device); err != nil {
		return fmt.Errorf("%w: --device %q must be cpu, cuda or auto", errUsage, f.device)
	}
	return nil
}

// logTo sends the library's fallback lines to w, the first of each only,
// so that repeated runs do not repeat them.
func (f *runFlags) logTo(w io.Writer) {
	var mu sync.Mutex
	seen := map[string]bool{}
	f.logf = func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		mu.Lock()
		defer mu.Unlock()
		if !seen[msg] {
			seen[msg] = true
			fmt.Fprintln(w, msg)
		}
	}
}

// timing is what timed runs of one method measured: medians in ms.
type timing struct {
	planMS, runMS, totalMS float64
	last                   *sparseattn.Result
}

// timeMethod runs opts on q, k, v warmup+repeat times, stepping the bar
// once per run, and returns the medians of the timed runs and the last
// result. Inputs are checked for NaN/Inf on the first run only.
func timeMethod(ctx context.Context, f runFlags, bar *progress.Bar, label string, q, k, v *tensor.Tensor, opts sparseattn.Options) (timing, error) {
	opts.Workers, opts.BlockQ, opts.BlockK = f.workers, f.blockQ, f.blockK
	opts.Device, opts.Logf = sparseattn.Device(f.device), f.logf
	if f.gpu.handles(opts) {
		return f.gpu.time(ctx, f, bar, label, q, k, v, opts)
	}
	bar.Label(label)
	tm, err := evaluate.Time(ctx, q, k, v, opts, f.warmup, f.repeat, func() { bar.Step(label) })
	if err != nil {
		return timing{}, err
	}
	return timing{planMS: tm.PlanMS, runMS: tm.RunMS, totalMS: tm.TotalMS, last: tm.Last}, nil
}

// runner is timeMethod on prob's tensors as an evaluate.Runner.
func (f runFlags) runner(bar *progress.Bar, prob *problem) evaluate.Runner {
	return func(ctx context.Context, label string, opts sparseattn.Options) (evaluate.Timing, error) {
		tm, err := timeMethod(ctx, f, bar, label, prob.q, prob.k, prob.v, opts)
		return evaluate.Timing{PlanMS: tm.planMS, RunMS: tm.runMS, TotalMS: tm.totalMS, Last: tm.last}, err
	}
}

// register adds the shared flags; what names the unit being repeated.
func (f *runFlags) register(fs *flag.FlagSet, what string) {
	f.registerWith(fs, what, 3, 1)
}

// registerWith is register with other defaults for --repeat and --warmup,
// for commands whose subject is accuracy rather than time.
func (f *runFlags) registerWith(fs *flag.FlagSet, what string, repeat, warmup int) {
	fs.IntVar(&f.repeat, "repeat", repeat, "timed runs per "+what+"; the median is reported")
	fs.IntVar(&f.warmup, "warmup", warmup, "untimed runs per "+what+" before timing")
	f.registerTiling(fs)
}

// registerTiling adds only the flags that shape a run, not its timing.
func (f *runFlags) registerTiling(fs *flag.FlagSet) {
	fs.IntVar(&f.workers, "workers", 0, "CPU goroutines (0 = all CPUs)")
	fs.IntVar(&f.blockQ, "block-q", sparseattn.DefaultBlockQ, "query block size")
	fs.IntVar(&f.blockK, "block-k", sparseattn.DefaultBlockK, "key block size")
	fs.StringVar(&f.device, "device", "cpu", "where plans run: cpu, cuda (GPU; an error without one) or auto (GPU if usable, else CPU)")
}
