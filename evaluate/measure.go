package evaluate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload/lm"
)

// Problem is an attention input to measure methods on.
type Problem struct {
	Q, K, V *tensor.Tensor
	Causal  bool
	// Needle scores an output by how well it retrieves a planted needle
	// (workload.Workload.NeedleRecall: the cosine of the needle query's
	// output with the needle's value); nil when the input has none.
	Needle func(out *tensor.Tensor) (float64, error)
}

// Timing is what the timed runs of one method measured: medians in
// milliseconds and the last run's result.
type Timing struct {
	PlanMS, RunMS, TotalMS float64
	Last                   *sparseattn.Result
}

// Runner runs attention with opts on the problem being measured, as many
// times as it sees fit, and returns the timing; label names the run (for
// progress reports). Time is the CPU's; a caller with another executor
// passes its own.
type Runner func(ctx context.Context, label string, opts sparseattn.Options) (Timing, error)

// Reference is the dense output every method is compared with, and its
// time (for speedups).
type Reference struct {
	Out     *tensor.Tensor
	TotalMS float64
}

// Measurement is one method's run measured against dense.
type Measurement struct {
	Method string
	// Sparsity is the skipped fraction of the block products a dense
	// causal-aware pass needs (plan.Stats.Sparsity, from the executor's
	// counters), and the counts it is computed from.
	Sparsity                        float64
	DenseBlocks, QKBlocks, PVBlocks float64
	// The errors against the reference (metrics.Errors); RelL1 and RelL2
	// are +Inf when the reference is all zeros.
	RelL1, RelL2, Cosine, MSE, MAE, MaxAbs float64
	// Medians of the timed runs, in milliseconds; TotalMS includes any
	// preparation (reordering, quantizing) and planning.
	PlanMS, RunMS, TotalMS float64
	// Speedup is the reference's total time over this one's, and GFLOPS
	// the dense-equivalent throughput, planning included.
	Speedup, GFLOPS float64
	// NeedleRecall is Problem.Needle of the output; NaN without a needle.
	NeedleRecall float64
}

// Measure runs opts through run on p and compares the last output with
// ref. With ref nil the run is the reference itself (dense): its errors
// are zero and its speedup 1. It returns the measurement, named label,
// and the last result.
func Measure(ctx context.Context, run Runner, p Problem, opts sparseattn.Options, label string, ref *Reference) (Measurement, *sparseattn.Result, error) {
	g, err := tensor.Validate(p.Q, p.K, p.V)
	if err != nil {
		return Measurement{}, nil, err
	}
	tm, err := run(ctx, label, opts)
	if err != nil {
		return Measurement{}, nil, err
	}
	if tm.Last == nil {
		return Measurement{}, nil, fmt.Errorf("evaluate: %s: the runner returned no result", label)
	}
	res, st := tm.Last, tm.Last.Stats
	m := Measurement{Method: label, Sparsity: st.Sparsity(), DenseBlocks: st.DenseBlocks, QKBlocks: st.QKBlocks, PVBlocks: st.PVBlocks,
		PlanMS: tm.PlanMS, RunMS: tm.RunMS, TotalMS: tm.TotalMS, NeedleRecall: math.NaN()}
	if ref == nil {
		ref = &Reference{Out: res.Out, TotalMS: m.TotalMS}
	}
	e, err := metrics.CompareTensors(ref.Out, res.Out)
	if err != nil {
		return Measurement{}, nil, err
	}
	m.RelL1, m.RelL2, m.Cosine, m.MSE, m.MAE, m.MaxAbs = e.RelL1, e.RelL2, e.Cosine, e.MSE, e.MAE, e.MaxAbs
	m.Speedup = ref.TotalMS / m.TotalMS
	m.GFLOPS = metrics.TOPS(g, p.Causal, m.TotalMS/1e3) * 1e3
	if p.Needle != nil {
		if m.NeedleRecall, err = p.Needle(res.Out); err != nil {
			return Measurement{}, nil, err
		}
	}
	return m, res, nil
}

// Time runs sparseattn.Attention with opts on q, k, v warmup+repeat times
// and returns the medians of the timed runs and the last result; step,
// when not nil, is called after each run. Inputs are checked for NaN and
// Inf on the first run only. It is the CPU's Runner:
//
//	run := func(ctx context.Context, _ string, o sparseattn.Options) (evaluate.Timing, error) {
//		return evaluate.Time(ctx, q, k, v, o, 1, 3, nil)
//	}
func Time(ctx context.Context, q, k, v *tensor.Tensor, opts sparseattn.Options, warmup, repeat int, step func()) (Timing, error) {
	if warmup < 0 || repeat < 1 {
		return Timing{}, fmt.Errorf("%w: evaluate: %d warm-up and %d timed runs (want ≥ 0 and ≥ 1)", sparseattn.ErrOptions, warmup, repeat)
	}
	var plans, runs, totals []float64
	var res *sparseattn.Result
	for i := range warmup + repeat {
		var err error
		if res, err = sparseattn.Attention(ctx, q, k, v, opts); err != nil {
			return Timing{}, err
		}
		opts.SkipFiniteCheck = true
		if step != nil {
			step()
		}
		if i >= warmup {
			plans = append(plans, ms(res.PlanTime))
			runs = append(runs, ms(res.RunTime))
			totals = append(totals, ms(res.PrepTime+res.PlanTime+res.RunTime))
		}
	}
	return Timing{PlanMS: Median(plans), RunMS: Median(runs), TotalMS: Median(totals), Last: res}, nil
}

// BitsPerByte runs the model over text with opts' planner (and variant)
// in every layer and returns its bits per byte: a method's score at the
// level of the model. The softmax scale is always the model's own.
func BitsPerByte(ctx context.Context, m *lm.Model, text []byte, opts sparseattn.Options) (float64, error) {
	opts.Scale = 0
	pass, err := m.Forward(ctx, text, lm.Options{Attention: opts})
	if err != nil {
		name := "dense"
		if opts.Planner != nil {
			name = opts.Planner.Name()
		}
		return 0, fmt.Errorf("bits per byte with %s in every layer: %w", name, err)
	}
	return pass.BitsPerByte(), nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// Median is the median of xs (the mean of the middle two for an even
// count); xs is not modified. It is 0 for no values.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
