// Package selftest checks a GPU engine against the CPU engine: each case
// runs on fresh random inputs on both, and the outputs must agree within
// the stated 16-bit tolerances and the work counters exactly. It is what
// `sparseattn selftest` runs on a device, and it lives outside package
// cuda so that the engine does not depend on the CPU executor.
package selftest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Check is the outcome of one case.
type Check struct {
	cuda.Case
	Errors   metrics.Errors
	Tol      float64
	GPU, CPU plan.Stats
	Kernel   cuda.Variant
	Err      error // nil when the case passed
}

// Run runs each case on the GPU and on the CPU executor over the same
// fresh random inputs and compares outputs and counters. It calls report
// after each case and returns the number that failed; err is set only when
// the test could not run at all.
func Run(ctx context.Context, e *cuda.Engine, r *rand.Rand, cases []cuda.Case, report func(Check)) (failed int, err error) {
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return failed, err
		}
		chk := runCase(ctx, e, r, c)
		if chk.Err != nil {
			failed++
		}
		report(chk)
	}
	return failed, nil
}

func runCase(ctx context.Context, e *cuda.Engine, r *rand.Rand, c cuda.Case) (chk Check) {
	chk = Check{Case: c, Tol: cuda.TolBF16}
	if c.DType == tensor.Float16 {
		chk.Tol = cuda.TolF16
	}
	sigma := c.Sigma
	if sigma == 0 {
		sigma = 1
	}
	q, k, v, err := cuda.RandomInputs(r, c, sigma)
	if err != nil {
		chk.Err = err
		return chk
	}
	p, err := c.Plan(r)
	if err != nil {
		chk.Err = err
		return chk
	}
	if v, err := e.KernelFor(p, q.DType()); err == nil {
		chk.Kernel = v
	}
	got, gs, err := e.Run(ctx, p, q, k, v, nil)
	if err != nil {
		chk.Err = fmt.Errorf("gpu: %w", err)
		return chk
	}
	// The CPU runs on the inputs the GPU saw: float32 ones rounded to bf16.
	if c.DType == tensor.Float32 {
		for _, t := range []**tensor.Tensor{&q, &k, &v} {
			if *t, err = (*t).Convert(tensor.BFloat16, (*t).Layout()); err != nil {
				chk.Err = err
				return chk
			}
		}
	}
	want, cs, err := cpu.Executor{}.Run(ctx, p, q, k, v, nil)
	if err != nil {
		chk.Err = fmt.Errorf("cpu: %w", err)
		return chk
	}
	chk.GPU, chk.CPU = gs, cs
	if chk.Errors, err = metrics.CompareTensors(want, got); err != nil {
		chk.Err = err
		return chk
	}
	switch {
	case !(chk.Errors.RelL1 <= chk.Tol): // NaN fails too
		chk.Err = fmt.Errorf("rel L1 %.3g above %.3g", chk.Errors.RelL1, chk.Tol)
	case gs.DenseBlocks != cs.DenseBlocks || gs.QKBlocks != cs.QKBlocks:
		chk.Err = fmt.Errorf("QK counters: GPU %v of %v, CPU %v of %v", gs.QKBlocks, gs.DenseBlocks, cs.QKBlocks, cs.DenseBlocks)
	case c.Lambda == 0 && gs.PVBlocks != cs.PVBlocks:
		chk.Err = fmt.Errorf("PV counters: GPU %v, CPU %v", gs.PVBlocks, cs.PVBlocks)
	case c.Lambda != 0 && math.Abs(gs.PVBlocks-cs.PVBlocks) > 0.01*cs.DenseBlocks:
		// A λ decision can flip where a gap rounds across the threshold.
		chk.Err = fmt.Errorf("PV counters: GPU %v, CPU %v differ by more than 1%% of %v", gs.PVBlocks, cs.PVBlocks, cs.DenseBlocks)
	}
	return chk
}
