package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/evaluate"
	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/permute"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// gpuSession keeps a command's inputs on the GPU for its whole run: each
// host tensor is uploaded once, each method is planned on the device where
// its planner runs there (else on the CPU, its plan uploaded), and only
// the last output of each method comes back, for the CPU to measure its
// error.
type gpuSession struct {
	e        *cuda.Engine
	uploads  map[*tensor.Tensor]*cuda.Tensor
	deviceMS float64 // device-event time of the Run calls so far
}

// openGPUSession opens device 0 for --device cuda or auto; it returns nil
// (and no error) under auto on a machine without a usable GPU.
func openGPUSession(device string, logf func(string, ...any)) (*gpuSession, error) {
	if device != string(sparseattn.DeviceCUDA) && device != string(sparseattn.DeviceAuto) {
		return nil, nil
	}
	e, err := cuda.Default()
	if err != nil {
		if device == string(sparseattn.DeviceAuto) {
			logf("sparseattn: no usable GPU, running on the CPU: %v", err)
			return nil, nil
		}
		return nil, err
	}
	return &gpuSession{e: e, uploads: map[*tensor.Tensor]*cuda.Tensor{}}, nil
}

// handles reports whether the session runs opts: token orders and INT8
// emulation run through sparseattn.Attention instead.
func (s *gpuSession) handles(opts sparseattn.Options) bool {
	return s != nil && (opts.Order.Kind == "" || opts.Order.Kind == permute.None) && !opts.QuantizeQK
}

// upload returns t's device copy, uploading it on first use.
func (s *gpuSession) upload(ctx context.Context, t *tensor.Tensor) (*cuda.Tensor, error) {
	if d, ok := s.uploads[t]; ok {
		return d, nil
	}
	d, err := s.e.Upload(ctx, t)
	if err != nil {
		return nil, err
	}
	s.uploads[t] = d
	return d, nil
}

// close frees the uploads.
func (s *gpuSession) close() {
	if s == nil {
		return
	}
	for _, d := range s.uploads {
		d.Free()
	}
}

// time runs opts on the device warmup+repeat times and returns the
// medians of the device-event plan and run times. A planner without a
// device version plans on the CPU (its time counted in the plan time)
// and its plan is uploaded; f.logf says so once.
func (s *gpuSession) time(ctx context.Context, f runFlags, bar *progress.Bar, label string, q, k, v *tensor.Tensor, opts sparseattn.Options) (timing, error) {
	var dev [3]*cuda.Tensor
	for i, h := range []*tensor.Tensor{q, k, v} {
		d, err := s.upload(ctx, h)
		if err != nil {
			return timing{}, err
		}
		dev[i] = d
	}
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		return timing{}, err
	}
	t := plan.Tiling{Geometry: g, Causal: opts.Causal, BlockQ: f.blockQ, BlockK: f.blockK, Scale: opts.Scale}
	pl := opts.Planner
	if pl == nil {
		pl = plan.DensePlanner{}
	}
	var hostPlan *plan.Plan
	var hostMS float64
	r, err := s.e.NewRunner(ctx, t, q.DType(), pl)
	if errors.Is(err, cuda.ErrUnsupported) {
		// Plan on the CPU, run the plan on the device.
		why := err
		start := time.Now()
		if hostPlan, err = pl.Plan(ctx, t, q, k, v); err != nil {
			return timing{}, fmt.Errorf("planning with %s: %w", pl.Name(), err)
		}
		hostMS = ms(time.Since(start))
		if f.logf != nil {
			f.logf("sparseattn: %s plans on the CPU (%v); its plan runs on the GPU", pl.Name(), why)
		}
		r, err = s.e.NewRunner(ctx, t, q.DType(), plan.Fixed{P: hostPlan})
	}
	if err != nil {
		return timing{}, err
	}
	defer r.Close()
	out, err := s.e.Alloc(ctx, tensor.Float32, tensor.BHND, tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.Dv})
	if err != nil {
		return timing{}, err
	}
	defer out.Free()
	var plans, runs, totals []float64
	var rep cuda.Report
	for i := range f.warmup + f.repeat {
		bar.Label(label)
		if _, rep, err = r.Run(ctx, dev[0], dev[1], dev[2], out); err != nil {
			return timing{}, err
		}
		bar.Step(label)
		if i >= f.warmup {
			plans = append(plans, hostMS+rep.PlanMS)
			runs = append(runs, rep.RunMS)
			totals = append(totals, hostMS+rep.PlanMS+rep.RunMS)
		}
	}
	host, err := out.Download(ctx)
	if err != nil {
		return timing{}, err
	}
	p := hostPlan
	if p == nil {
		if p, err = r.DownloadPlan(ctx); err != nil {
			return timing{}, err
		}
	}
	res := &sparseattn.Result{Out: host, Plan: p, Stats: rep.Stats, Device: sparseattn.DeviceCUDA,
		PlanTime: time.Duration(evaluate.Median(plans) * 1e6), RunTime: time.Duration(evaluate.Median(runs) * 1e6)}
	return timing{planMS: evaluate.Median(plans), runMS: evaluate.Median(runs), totalMS: evaluate.Median(totals), last: res}, nil
}

// Run executes plan p on the device and returns the output on the host:
// the session is a plan.Executor whose inputs stay uploaded for the
// command's whole run (the tuner's per-head slices, say). Only the plan
// goes up and the output comes back per call; the device time of each
// call is added to s.deviceMS. It is for one goroutine at a time.
func (s *gpuSession) Run(ctx context.Context, p *plan.Plan, q, k, v, out *tensor.Tensor) (*tensor.Tensor, plan.Stats, error) {
	if p == nil {
		return nil, plan.Stats{}, fmt.Errorf("%w: nil plan", plan.ErrInvalid)
	}
	var dev [3]*cuda.Tensor
	for i, h := range []*tensor.Tensor{q, k, v} {
		d, err := s.upload(ctx, h)
		if err != nil {
			return nil, plan.Stats{}, err
		}
		dev[i] = d
	}
	r, err := s.e.NewRunner(ctx, p.Tiling, q.DType(), plan.Fixed{P: p})
	if err != nil {
		return nil, plan.Stats{}, err
	}
	defer r.Close()
	o, rep, err := r.Run(ctx, dev[0], dev[1], dev[2], nil)
	if err != nil {
		return nil, plan.Stats{}, err
	}
	defer o.Free()
	s.deviceMS += rep.PlanMS + rep.RunMS
	host, err := o.Download(ctx)
	if err != nil {
		return nil, plan.Stats{}, err
	}
	if out == nil {
		return host, rep.Stats, nil
	}
	if out.Shape() != host.Shape() {
		return nil, plan.Stats{}, fmt.Errorf("%w: output %v for a result of %v", cuda.ErrMismatch, out.Shape(), host.Shape())
	}
	sh := host.Shape()
	row := make([]float32, sh.D)
	for b := range sh.B {
		for h := range sh.H {
			for n := range sh.N {
				host.ReadRow(b, h, n, row)
				out.WriteRow(b, h, n, row)
			}
		}
	}
	return out, rep.Stats, nil
}
