package selftest

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/quant"
	"github.com/sparseattn/sparseattn/tensor"
)

// TolQuant bounds Σ|GPU−CPU| / Σ|CPU| between the GPU's quantized kernels
// (cuda.QuantQK8: INT8 Q per 16 rows, smoothed K per 64 keys, 16-bit P̃V)
// and the CPU emulation (package quant: INT8 Q per BlockQ rows, K per
// BlockK keys, dequantized into a float32 executor). Each is about 1e-2
// from float64 on N(0,1) inputs, with independent rounding (different
// scale blocks), so their difference is at most the sum: issue 15's bound
// of 0.02 from float64 taken for each gives 0.04 here.
const TolQuant = 0.04

// QuantCases are the quantized self-test cases: the cases the quantized
// kernels take (BlockQ 128, 16-bit inputs, no λ filter of any kind),
// dense and sparse.
func QuantCases() []cuda.Case {
	var cs []cuda.Case
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range cuda.Cases() {
		p, err := c.Plan(r)
		if err == nil && p.Filter == nil && c.BlockQ == 128 && c.DType != tensor.Float32 {
			c.Name = "int8-qk " + c.Name
			cs = append(cs, c)
		}
	}
	return cs
}

// RunQuantized runs each case with the GPU's quantized kernels and with
// the CPU emulation of INT8 Q·K on the same fresh random inputs and
// compares outputs (within TolQuant) and counters (exactly). It returns
// the number that failed; err is set only when it could not run at all.
func RunQuantized(ctx context.Context, e *cuda.Engine, r *rand.Rand, cases []cuda.Case, report func(Check)) (failed int, err error) {
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return failed, err
		}
		chk := runQuantCase(ctx, e, r, c)
		if chk.Err != nil {
			failed++
		}
		report(chk)
	}
	return failed, nil
}

func runQuantCase(ctx context.Context, e *cuda.Engine, r *rand.Rand, c cuda.Case) (chk Check) {
	chk = Check{Case: c, Tol: TolQuant, Kernel: "q8 (int8-qk)"}
	q, k, v, err := cuda.RandomInputs(r, c, 1)
	if err != nil {
		chk.Err = err
		return chk
	}
	p, err := c.Plan(r)
	if err != nil {
		chk.Err = err
		return chk
	}
	got, gs, err := e.RunQuantized(ctx, cuda.QuantQK8, p, q, k, v, nil)
	if err != nil {
		chk.Err = fmt.Errorf("gpu: %w", err)
		return chk
	}
	qk, err := quant.QuantizeQK(ctx, q, k, p.BlockQ, p.BlockK)
	if err != nil {
		chk.Err = err
		return chk
	}
	dq, dk := qk.Dequantized()
	want, cs, err := cpu.Executor{}.Run(ctx, p, dq, dk, v, nil)
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
	case !(chk.Errors.RelL1 <= chk.Tol):
		chk.Err = fmt.Errorf("rel L1 %.3g above %.3g", chk.Errors.RelL1, chk.Tol)
	case gs.QKBlocks != cs.QKBlocks || gs.PVBlocks != cs.PVBlocks:
		chk.Err = fmt.Errorf("counters: GPU QK %v PV %v, CPU QK %v PV %v", gs.QKBlocks, gs.PVBlocks, cs.QKBlocks, cs.PVBlocks)
	}
	return chk
}
