package cuda

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// RunQuantized computes attention for the plan p as Run does, with the
// quantized kernels of mode: Q and smoothed K quantized to INT8 on the
// device (kernels/quant.cu), and under QuantQK8PV8 V to FP8 e4m3, then
// INT8 QKᵀ and 16-bit or FP8 P̃V (kernels/attention_q8.cu, SpargeAttn
// §3.5 on SageAttention). The
// quantization runs as part of the call. Plans or devices the quantized
// kernels do not take give an error wrapping ErrUnsupported (see
// SupportsQuantized); the caller may then run Run or the CPU emulation
// (package quant).
func (e *Engine) RunQuantized(ctx context.Context, mode QuantMode, p *plan.Plan, q, k, v, out *tensor.Tensor) (*tensor.Tensor, plan.Stats, error) {
	if p == nil {
		return nil, plan.Stats{}, fmt.Errorf("%w: nil plan", plan.ErrInvalid)
	}
	if err := e.SupportsQuantized(p); err != nil {
		return nil, plan.Stats{}, err
	}
	j, err := e.prepare(p, q, k, v)
	if err != nil {
		return nil, plan.Stats{}, err
	}
	vr, err := e.q8VariantOf(p, mode, j.dt, skipsBlocks(p), rowsAlike(p.RowStart), e.out16)
	if err != nil {
		return nil, plan.Stats{}, err
	}
	// The persistent kernel's row order (each head's rows longest first).
	j.order = rowOrder(e.order, p, variant{ws: true})
	j.v.ws = false // no tensor maps: the quantized kernel reads its own operands
	j.v.out16 = vr.out16
	g := p.Geometry
	return e.runHost(ctx, j, out, func(c *driver.Ctx) error {
		l := &q8Launch{
			// The staged rows hold D (Dv) real columns, zero-padded.
			q:      stagedView(j.params.q, j.q, j.dt, g.B, g.Hq, g.Nq, g.D),
			k:      stagedView(j.params.k, j.k, j.dt, g.B, g.Hkv, g.Nk, g.D),
			v:      stagedView(j.params.v, j.vv, j.dt, g.B, g.Hkv, g.Nk, g.Dv),
			params: *j.params,
			items:  g.B * g.Hq * p.QBlocks(),
		}
		return e.launchQ8(c, &e.bufs.q8, vr, l)
	})
}

// SetQuantized makes the runner's later calls use the quantized kernels
// of mode (see RunQuantized), or the 16-bit ones again (QuantOff). It
// fails with an error wrapping ErrUnsupported where the quantized kernels
// do not take the runner's problem (SupportsQuantized), and leaves the
// runner unchanged.
func (r *Runner) SetQuantized(mode QuantMode) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrRunnerClosed
	}
	if mode != QuantOff {
		if _, err := r.e.q8VariantOf(r.header, mode, tensor.BFloat16, false, true, false); err != nil {
			return err
		}
	}
	r.quant = mode
	return nil
}

// executeQ8 quantizes q, k and v on the device and launches the quantized
// kernel over the device plan; execute's counterpart.
func (r *Runner) executeQ8(c *driver.Ctx, q, k, v, out *Tensor) (Report, error) {
	in := r.dt
	if in == tensor.Float32 {
		in = tensor.BFloat16
	}
	var out16 bool
	switch out.dtype {
	case tensor.Float32:
	case in:
		out16 = true
	default:
		return Report{}, fmt.Errorf("%w: %v output for %v inputs; use float32 or the inputs' type", ErrUnsupported, out.dtype, r.dt)
	}
	dyn := r.planner.sparse() || r.t.Causal
	vr, err := r.e.q8VariantOf(r.header, r.quant, in, r.planner.sparse(), !dyn, out16)
	if err != nil {
		return Report{}, err
	}
	b := &r.bufs
	l := &q8Launch{q: viewOf(q), k: viewOf(k), v: viewOf(v), params: commonParams(r.t, qBlocks(r.t))}
	g := r.t.Geometry
	l.items = g.B * g.Hq * qBlocks(r.t)
	pr := &l.params
	pr.o, pr.rowStart, pr.kvBlock, pr.counters = uint64(out.ptr), uint64(b.rowStart.ptr), uint64(b.kvBlock.ptr), uint64(b.counters.ptr)
	pr.osb, pr.osh, pr.osn = out.stride.B, out.stride.H, out.stride.N
	// plan wrote the longest-first order where the 16-bit kernel is the
	// warp-specialized one with dynamic rows; the quantized kernel's rows
	// are dynamic under the same condition.
	if bv, err := r.variant(out.dtype); err == nil && bv.ws && bv.dynamic && vr.dynamic && r.e.order == OrderAuto {
		pr.order = uint64(b.order.ptr)
	}
	if err := c.Memset(b.counters.ptr, 0, counterBytes); err != nil {
		return Report{}, err
	}
	if err := r.e.launchQ8(c, &b.q8, vr, l); err != nil {
		return Report{}, err
	}
	return Report{Kernel: Variant(vr.String())}, nil
}
