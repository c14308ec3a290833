package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"

	"github.com/sparseattn/sparseattn"
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
	var plans, runs, totals []float64
	var res *sparseattn.Result
	for i := range f.warmup + f.repeat {
		bar.Label(label)
		var err error
		if res, err = sparseattn.Attention(ctx, q, k, v, opts); err != nil {
			return timing{}, err
		}
		opts.SkipFiniteCheck = true
		bar.Step(label)
		if i >= f.warmup {
			plans = append(plans, ms(res.PlanTime))
			runs = append(runs, ms(res.RunTime))
			totals = append(totals, ms(res.PrepTime+res.PlanTime+res.RunTime))
		}
	}
	return timing{planMS: median(plans), runMS: median(runs), totalMS: median(totals), last: res}, nil
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
