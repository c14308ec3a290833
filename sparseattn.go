// Package sparseattn computes training-free sparse attention: a planner
// looks at Q and K and decides which blocks of the attention matrix to
// compute, and an executor runs a FlashAttention-style online softmax over
// only those blocks.
//
// The subpackages split the work one concept each:
//
//	tensor      [B, H, N, D] tensors in float32, float16 and bfloat16
//	tensorfile  .safetensors, .npy and .npz reading and writing
//	plan        the one plan format every method shares, and its counters
//	method/...  planners: sparge (SpargeAttn), unisparse, psa, s2o, and the
//	            baselines xattn, flexprefill, minference, window and oracle
//	tune        SpargeAttn's per-head tuner and its JSON profiles
//	permute     token orders for visual tokens (Hilbert curve, row, column, time, random)
//	quant       SageAttention-style INT8 quantization of Q and K
//	cpu         the CPU executor
//	cuda        the GPU engine (driver and NVRTC loaded at run time)
//	reference   a float64 naive attention for tests
//	metrics     error metrics and dense-equivalent throughput
//	evaluate    methods measured against dense: sweeps, oracle matching, curve reading
//	workload    seeded generators of realistic Q/K/V
//
// Attention is the one-call entry point over all of them.
package sparseattn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/permute"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/quant"
	"github.com/sparseattn/sparseattn/tensor"
)

// Default block sizes: 64×64 tiles keep a D=128 head's query, key, value
// and logit tiles inside a 256 KiB L2 share per core.
const (
	DefaultBlockQ = 64
	DefaultBlockK = 64
)

// ErrOptions reports an out-of-range option.
var ErrOptions = errors.New("sparseattn: bad option")

// Device says where Attention executes its plan.
type Device string

// Devices.
const (
	// DeviceCPU runs on the CPU executor (the default).
	DeviceCPU Device = "cpu"
	// DeviceCUDA runs on the GPU; no usable GPU is an error.
	DeviceCUDA Device = "cuda"
	// DeviceAuto runs on the GPU when one is usable, else on the CPU.
	DeviceAuto Device = "auto"
	// DeviceCaller is reported in Result.Device when Options.Executor, an
	// executor other than the CPU's and the GPU's, ran the plan.
	DeviceCaller Device = "caller"
)

// ParseDevice parses "cpu", "cuda" or "auto".
func ParseDevice(s string) (Device, error) {
	switch d := Device(s); d {
	case DeviceCPU, DeviceCUDA, DeviceAuto:
		return d, nil
	}
	return "", fmt.Errorf("%w: device %q must be cpu, cuda or auto", ErrOptions, s)
}

// Options configure Attention. The zero value is dense, non-causal
// attention with scale 1/sqrt(D) on every CPU.
type Options struct {
	// Causal masks keys after each query, token-exact. Queries are taken to
	// be the last Nq of the Nk tokens, so a single decode token sees all keys.
	Causal bool
	// Scale multiplies QKᵀ before the softmax; 0 means 1/sqrt(D).
	Scale float32
	// Planner decides which blocks to compute; nil means dense.
	Planner plan.Planner
	// BlockQ and BlockK are the tile sizes; 0 means DefaultBlockQ/K.
	BlockQ, BlockK int
	// Workers is the number of CPU goroutines; 0 means GOMAXPROCS.
	Workers int
	// SkipFiniteCheck skips the scan that rejects NaN and Inf inputs.
	SkipFiniteCheck bool
	// Order reorders the visual tokens of Q, K and V before planning and
	// execution, and puts the output rows back (SpargeAttn §3.7: a Hilbert
	// curve makes blocks more self-similar and attention more
	// block-sparse). The zero value keeps the input order. A reordering
	// needs Nq = Nk = Order.Len() and non-causal attention: under a causal
	// mask a token's visible keys depend on its position, so reordering
	// would change the result; a causal run with an order that moves any
	// token is rejected.
	Order permute.Spec
	// QuantizeQK runs the executor on SageAttention-style INT8 Q and K
	// (SpargeAttn §3.5): K smoothed by its mean over the sequence, both
	// quantized with one scale per block of tokens. On a Hopper GPU the
	// quantized kernels run (cuda.Engine.RunQuantized with cuda.QuantQK8:
	// INT8 QKᵀ with one scale per 16 query rows and per 64 keys, 16-bit
	// P̃V), quantization included in the run time; elsewhere, and for plans
	// those kernels do not take (see cuda.Engine.SupportsQuantized), the
	// executor runs on dequantized copies quantized per tile (BlockQ /
	// BlockK tokens), and a GPU run that falls back logs one line. The
	// planner still sees float Q and K, as in SpargeAttn Algorithm 1.
	QuantizeQK bool
	// Device is where the plan runs; "" means DeviceCPU. Under DeviceAuto
	// a machine with no usable GPU runs on the CPU, and under DeviceCUDA
	// and DeviceAuto a plan the GPU kernel does not support (see
	// cuda.Engine.Supports) runs on the CPU; each fallback logs one line.
	Device Device
	// Executor, when set, runs the plan and Device is ignored: a
	// *cuda.Engine of the caller's, a cpu.Executor with its own settings,
	// or any other plan.Executor. Nil picks one by Device (the CPU
	// executor with Workers, or cuda.Default(), device 0 opened on first
	// use).
	Executor plan.Executor
	// Logf receives the fallback log lines; nil discards them.
	Logf func(format string, args ...any)
}

// Result is the output of Attention with what it cost.
type Result struct {
	Out *tensor.Tensor // [B, Hq, Nq, Dv], float32, BHND
	// Plan is the plan that ran. With Options.Order its blocks are blocks
	// of the reordered sequence.
	Plan     *plan.Plan
	Stats    plan.Stats    // work the executor really did; Stats.Sparsity() is the skipped fraction
	PrepTime time.Duration // time spent reordering and quantizing inputs and restoring the output order
	PlanTime time.Duration // time spent predicting the plan
	RunTime  time.Duration // time spent executing it
	Device   Device        // where the plan ran
}

// Attention computes softmax(scale·QKᵀ)·V for q [B, Hq, Nq, D], k [B, Hkv,
// Nk, D] and v [B, Hkv, Nk, Dv], with Hkv dividing Hq, over the blocks the
// options' planner selects. Bad shapes, options and non-finite inputs give
// errors that wrap tensor.ErrShape, ErrOptions, plan.ErrInvalid or
// tensor.ErrNonFinite.
func Attention(ctx context.Context, q, k, v *tensor.Tensor, opts Options) (*Result, error) {
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		return nil, err
	}
	if opts.Scale < 0 || math.IsNaN(float64(opts.Scale)) || math.IsInf(float64(opts.Scale), 0) {
		return nil, fmt.Errorf("%w: scale %v must be positive and finite (0 for 1/sqrt(D))", ErrOptions, opts.Scale)
	}
	if opts.BlockQ < 0 || opts.BlockK < 0 || opts.BlockQ > plan.MaxBlock || opts.BlockK > plan.MaxBlock {
		return nil, fmt.Errorf("%w: block sizes %d×%d must be in 0..%d", ErrOptions, opts.BlockQ, opts.BlockK, plan.MaxBlock)
	}
	if opts.Device != "" {
		if _, err := ParseDevice(string(opts.Device)); err != nil {
			return nil, err
		}
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("%w: workers %d must be ≥ 0", ErrOptions, opts.Workers)
	}
	t := plan.Tiling{Geometry: g, Causal: opts.Causal, BlockQ: opts.BlockQ, BlockK: opts.BlockK, Scale: opts.Scale}
	if t.BlockQ == 0 {
		t.BlockQ = DefaultBlockQ
	}
	if t.BlockK == 0 {
		t.BlockK = DefaultBlockK
	}
	planner := opts.Planner
	if planner == nil {
		planner = plan.DensePlanner{}
	}
	// The NaN/Inf check runs inside the CPU executor's own reads of the
	// inputs where nothing reads them before it (the dense plan, no
	// reordering or quantization): decode then reads K and V once, not
	// twice. Otherwise it is a pass of its own, before anything else.
	checkInRun := false
	if !opts.SkipFiniteCheck {
		if checkInRun = checkInExecutor(opts, planner); !checkInRun {
			if err := tensor.CheckFiniteAll(ctx, tensor.Named{Name: "q", T: q}, tensor.Named{Name: "k", T: k}, tensor.Named{Name: "v", T: v}); err != nil {
				return nil, err
			}
		}
	}

	prepStart := time.Now()
	order, err := tokenOrder(opts, g)
	if err != nil {
		return nil, err
	}
	if order != nil {
		if q, k, v, err = reorder(ctx, order, q, k, v); err != nil {
			return nil, err
		}
	}
	prep := time.Since(prepStart)

	start := time.Now()
	p, err := planner.Plan(ctx, t, q, k, v)
	if err != nil {
		return nil, fmt.Errorf("planning with %s: %w", planner.Name(), err)
	}
	if p == nil || p.Geometry != g || p.Causal != t.Causal || p.SoftmaxScale() != t.SoftmaxScale() {
		return nil, fmt.Errorf("%w: %s returned a plan for another problem", plan.ErrInvalid, planner.Name())
	}
	planned := time.Now()
	out, stats, dev, err := execute(ctx, opts, p, q, k, v, checkInRun)
	var nonFinite *tensor.NonFiniteError
	if checkInRun && errors.As(err, &nonFinite) {
		return nil, nonFinite // as the separate check reports it
	}
	if err != nil {
		return nil, fmt.Errorf("executing %s plan on %s: %w", planner.Name(), dev, err)
	}
	ran := time.Now()
	if order != nil {
		if out, err = order.Restore(ctx, out); err != nil {
			return nil, err
		}
		prep += time.Since(ran)
	}
	return &Result{Out: out, Plan: p, Stats: stats, PrepTime: prep, PlanTime: planned.Sub(start), RunTime: ran.Sub(planned), Device: dev}, nil
}

// tokenOrder returns the permutation opts.Order selects, or nil when it
// moves no token.
func tokenOrder(opts Options, g tensor.Geometry) (*permute.Order, error) {
	spec := opts.Order
	if spec.Kind == "" || spec.Kind == permute.None {
		if err := spec.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
		return nil, nil
	}
	if g.Nq != g.Nk {
		return nil, fmt.Errorf("%w: a %s token order needs as many queries as keys, have Nq=%d Nk=%d", ErrOptions, spec.Kind, g.Nq, g.Nk)
	}
	o, err := spec.Order(g.Nk)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if o.IsIdentity() {
		return nil, nil
	}
	if opts.Causal {
		return nil, fmt.Errorf("%w: a %s token order moves tokens, which changes causal attention (each query sees the keys before it); use it on non-causal attention, or Order none or row", ErrOptions, spec.Kind)
	}
	return o, nil
}

// reorder applies o to q, k and v.
func reorder(ctx context.Context, o *permute.Order, q, k, v *tensor.Tensor) (qo, ko, vo *tensor.Tensor, err error) {
	if qo, err = o.Apply(ctx, q); err != nil {
		return nil, nil, nil, err
	}
	if ko, err = o.Apply(ctx, k); err != nil {
		return nil, nil, nil, err
	}
	if vo, err = o.Apply(ctx, v); err != nil {
		return nil, nil, nil, err
	}
	return qo, ko, vo, nil
}

// checkInExecutor reports whether the NaN/Inf check can run inside the CPU
// executor (cpu.Executor.CheckFinite): the plan runs there, and nothing
// reads q, k or v before it — the dense planner, with no token order and
// no quantization.
func checkInExecutor(opts Options, planner plan.Planner) bool {
	_, dense := planner.(plan.DensePlanner)
	onCPU := opts.Executor == nil && (opts.Device == "" || opts.Device == DeviceCPU)
	noOrder := opts.Order.Kind == "" || opts.Order.Kind == permute.None
	return dense && onCPU && noOrder && !opts.QuantizeQK
}

// execute runs p on the device the options name, falling back to the CPU
// as Options.Device documents, and reports where it ran. check asks the
// CPU executor to reject NaN and Inf inputs (checkInExecutor). Under
// QuantizeQK a GPU engine runs its quantized kernels and any other
// executor the dequantized INT8 Q and K.
func execute(ctx context.Context, opts Options, p *plan.Plan, q, k, v *tensor.Tensor, check bool) (*tensor.Tensor, plan.Stats, Device, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	runQ, runK := q, k
	if opts.QuantizeQK {
		// Quantized lazily: a GPU run quantizes on the device.
		runQ, runK = nil, nil
	}
	inputs := func() (*tensor.Tensor, *tensor.Tensor, error) {
		if runQ == nil {
			qk, err := quant.QuantizeQK(ctx, q, k, p.BlockQ, p.BlockK)
			if err != nil {
				return nil, nil, fmt.Errorf("quantizing Q and K: %w", err)
			}
			runQ, runK = qk.Dequantized()
		}
		return runQ, runK, nil
	}
	onCPU := func() (*tensor.Tensor, plan.Stats, Device, error) {
		rq, rk, err := inputs()
		if err != nil {
			return nil, plan.Stats{}, DeviceCPU, err
		}
		out, stats, err := cpu.Executor{Workers: opts.Workers, CheckFinite: check}.Run(ctx, p, rq, rk, v, nil)
		return out, stats, DeviceCPU, err
	}
	var ex plan.Executor
	switch {
	case opts.Executor != nil:
		ex = opts.Executor
	case opts.Device == "" || opts.Device == DeviceCPU:
		return onCPU()
	default:
		eng, err := cuda.Default()
		if err != nil {
			if opts.Device == DeviceCUDA {
				return nil, plan.Stats{}, DeviceCUDA, err
			}
			logf("sparseattn: no usable GPU, running on the CPU: %v", err)
			return onCPU()
		}
		ex = eng
	}
	dev := DeviceCUDA
	switch ex.(type) {
	case *cuda.Engine:
	case cpu.Executor, *cpu.Executor:
		dev = DeviceCPU
	default:
		dev = DeviceCaller
	}
	if eng, ok := ex.(*cuda.Engine); ok && opts.QuantizeQK {
		out, stats, err := eng.RunQuantized(ctx, cuda.QuantQK8, p, q, k, v, nil)
		if !errors.Is(err, cuda.ErrUnsupported) {
			return out, stats, dev, err
		}
		logf("sparseattn: INT8 Q·K emulated on the CPU: %v", err)
		return onCPU()
	}
	rq, rk, err := inputs()
	if err != nil {
		return nil, plan.Stats{}, dev, err
	}
	out, stats, err := ex.Run(ctx, p, rq, rk, v, nil)
	if errors.Is(err, cuda.ErrUnsupported) {
		logf("sparseattn: running on the CPU: %v", err)
		return onCPU()
	}
	return out, stats, dev, err
}
