package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Runner computes sparse attention for one problem shape and one planner
// with everything on the device, after FlashInfer's plan/run split:
// NewRunner chooses the kernel and allocates the plan's buffers once, and
// each Run predicts the plan on the device from the inputs (the planner's
// kernels write the CSR arrays in device memory) and executes it. Inputs,
// plan and output stay on the device; per call only the work counters
// (a few integers) come back.
//
// A Runner is safe for concurrent use; its calls are serialized.
type Runner struct {
	e       *Engine
	t       plan.Tiling  // the tiling the kernels run: asked's, or its dense pass at wider blocks
	asked   plan.Tiling  // the caller's tiling (Tiling), whose blocks Report.Stats counts
	askedN  int64        // asked's dense block products, where they differ from dense
	dt      tensor.DType // the input type
	planner devicePlanner
	header  *plan.Plan // tiling and filter; no rows
	dense   int64      // block products of a dense causal-aware pass
	name    string

	mu      sync.Mutex
	planned bool // the buffers hold a plan for the last inputs planned
	closed  bool
	quant   QuantMode // run the quantized kernels (SetQuantized)
	bufs    runnerBufs
	events  [3]driver.Event
}

// runnerBufs are a runner's device allocations.
type runnerBufs struct {
	rowLen, lists, rowStart, kvBlock, order, counters deviceBuf
	lambda                                            deviceBuf // per-head λ·log2(e), uploaded once
	q, k, v                                           deviceBuf // staged inputs, when the kernel cannot read them in place
	scratch                                           scratchPool
	gen                                               genBufs // a fixed plan's levels, orders and states (gathering kernel)
	q8                                                q8Bufs  // quantized operands (SetQuantized)
}

// Report is what one Runner call measured, with device events.
type Report struct {
	Stats  plan.Stats // work the kernel did, from the device counters
	PlanMS float64    // predicting the plan on the device, CSR assembly included
	RunMS  float64    // executing it, input staging included
	Kernel Variant    // the attention kernel that ran
}

// NewRunner prepares e to compute attention with tiling t on inputs of
// type dt (q, k and v alike), planned by p (nil: dense). p is one of the
// method planners that run on the GPU; others give an error wrapping
// ErrUnsupported. The tiling's head dims must be at most 128 and its
// blocks what the kernels take (see Engine.Supports).
func (e *Engine) NewRunner(ctx context.Context, t plan.Tiling, dt tensor.DType, p plan.Planner) (*Runner, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if !dt.Valid() {
		return nil, fmt.Errorf("%w: dtype %v", tensor.ErrShape, dt)
	}
	dp, err := devicePlannerFor(p)
	if err != nil {
		return nil, err
	}
	h, err := dp.header(t)
	if err != nil {
		return nil, err
	}
	name := "dense"
	if p != nil {
		name = p.Name()
	}
	r := &Runner{e: e, t: t, asked: t, dt: dt, planner: dp, header: h, dense: h.DenseBlocks(), name: name}
	// Choose the kernel now, so that an unsupported problem fails here.
	if _, err := r.variant(r.outType()); err != nil {
		return nil, err
	}
	if _, dense := dp.(densePlanner); dense && e.wideDns {
		r.widen()
	}
	g := t.Geometry
	rows := int64(g.B) * int64(g.Hq) * int64(qBlocks(t))
	entries := max(r.dense, int64(len(h.KVBlock))) // a fixed plan may list more than a dense pass
	if entries > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d plan entries above 2^31", ErrUnsupported, entries)
	}
	err = e.dev.Do(ctx, func(c *driver.Ctx) error {
		b := &r.bufs
		for _, a := range []struct {
			buf *deviceBuf
			n   int64
		}{
			{&b.rowLen, rows * 4}, {&b.lists, rows * int64(kBlocks(t)) * 4}, {&b.rowStart, (rows + 1) * 4},
			{&b.kvBlock, max(entries, 1) * 4}, {&b.order, rows * 4}, {&b.counters, counterBytes},
		} {
			if err := a.buf.ensure(c, a.n); err != nil {
				return fmt.Errorf("runner buffers for %+v: %w", g, err)
			}
		}
		if f := r.header.Filter; f != nil && f.HeadLambda != nil {
			if _, err := uploadHeadLambda(c, &b.lambda, f); err != nil {
				return err
			}
		}
		for i := range r.events {
			ev, err := c.NewEvent()
			if err != nil {
				return err
			}
			r.events[i] = ev
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, r.Close())
	}
	return r, nil
}

// Tiling is the problem the runner computes.
func (r *Runner) Tiling() plan.Tiling { return r.asked }

// KernelTiling is the tiling its kernels run: Tiling, but for a dense
// pass run at wider blocks than the caller's (see
// Tactics.DenseNarrowTiles). Report.Stats counts Tiling's blocks either
// way.
func (r *Runner) KernelTiling() plan.Tiling { return r.t }

// outType is the output type when the caller gives no output tensor: the
// input type.
func (r *Runner) outType() tensor.DType { return r.dt }

// variant chooses the attention kernel for outputs of type out.
func (r *Runner) variant(out tensor.DType) (variant, error) {
	in := r.dt
	if in == tensor.Float32 {
		in = tensor.BFloat16 // staged to bfloat16 on the device
	}
	// Rows differ in length unless the plan is dense and non-causal.
	dyn := r.planner.sparse() || r.t.Causal
	// A fixed host plan may carry levels and token orders, which the
	// gathering kernel runs; device plans carry neither.
	_, fixed := r.planner.(fixedPlanner)
	_, passes := r.planner.(passPlanner)
	hdr := r.header
	if lp, ok := r.pooled(); ok {
		// The device plan's levels: the gathering kernel, as for a host
		// plan that pools.
		shape := *hdr
		shape.Level = []plan.Level{lp.topLevel()}
		hdr, fixed = &shape, true
	}
	v, err := r.e.variantWith(hdr, in, r.planner.sparse(), !dyn, fixed || passes)
	if err != nil {
		return v, err
	}
	switch out {
	case tensor.Float32:
		v.out16 = false
	case in:
		v.out16 = true
	default:
		return v, fmt.Errorf("%w: %v output for %v inputs; use float32 or the inputs' type", ErrUnsupported, out, r.dt)
	}
	if v.ws {
		if v.tmaOut = true; v.sharedBytes() > r.e.dev.MaxSharedOptin {
			v.tmaOut = false
		}
	}
	return v, nil
}

// levelsOn reports whether the runner's plans carry device levels.
func (r *Runner) levelsOn() bool {
	_, ok := r.pooled()
	return ok
}

// pooled returns the runner's planner as a levelPlanner when its plans
// may pool (more than one level).
func (r *Runner) pooled() (levelPlanner, bool) {
	lp, ok := r.planner.(levelPlanner)
	return lp, ok && lp.topLevel() > plan.Full
}

// Close frees the runner's device memory. Later calls return an error.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.e.dev.Do(context.Background(), func(c *driver.Ctx) error {
		b := &r.bufs
		var errs []error
		for _, d := range []*deviceBuf{&b.rowLen, &b.lists, &b.rowStart, &b.kvBlock, &b.order, &b.counters, &b.lambda, &b.q, &b.k, &b.v} {
			errs = append(errs, c.Free(d.ptr))
			*d = deviceBuf{}
		}
		errs = append(errs, b.scratch.free(c), b.gen.free(c), b.q8.free(c))
		for _, ev := range r.events {
			if ev != 0 {
				errs = append(errs, c.DestroyEvent(ev))
			}
		}
		return errors.Join(errs...)
	})
	if errors.Is(err, driver.ErrClosed) {
		return nil
	}
	return err
}

// ErrRunnerClosed reports a call on a closed Runner.
var ErrRunnerClosed = errors.New("cuda: runner closed")

// Run predicts the plan for q, k and v on the device and executes it into
// out, a device tensor [B, Hq, Nq, Dv] of float32 or the inputs' type, or
// nil for a new BHND tensor of the inputs' type. The inputs must match the
// runner's tiling and type, in any layout and strides. It returns the
// output and what the call measured.
func (r *Runner) Run(ctx context.Context, q, k, v, out *Tensor) (*Tensor, Report, error) {
	return r.call(ctx, q, k, v, out, true)
}

// call is Run (predict) or Execute (not predict): it checks the inputs,
// then on the device records the start event, predicts the plan when
// asked, and executes it.
func (r *Runner) call(ctx context.Context, q, k, v, out *Tensor, predict bool) (*Tensor, Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, Report{}, ErrRunnerClosed
	}
	if !predict && !r.planned {
		return nil, Report{}, fmt.Errorf("%w: Execute before any Plan or Run", plan.ErrInvalid)
	}
	if err := r.check(q, k, v); err != nil {
		return nil, Report{}, err
	}
	out, err := r.output(ctx, out)
	if err != nil {
		return nil, Report{}, err
	}
	var rep Report
	err = r.e.dev.Do(ctx, func(c *driver.Ctx) error {
		c = c.OnStream(q.stream)
		if predict {
			if err := c.Record(r.events[0]); err != nil {
				return err
			}
			if err := r.plan(c, q, k, v); err != nil {
				return err
			}
		}
		if err := c.Record(r.events[1]); err != nil {
			return err
		}
		var err error
		if rep, err = r.execute(c, q, k, v, out); err != nil {
			return err
		}
		return r.finish(c, &rep, predict)
	})
	if err != nil {
		return nil, Report{}, err
	}
	return out, rep, nil
}

// Plan predicts the plan for q, k and v on the device and keeps it for
// Execute; it returns the device time it took in milliseconds.
func (r *Runner) Plan(ctx context.Context, q, k, v *Tensor) (float64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrRunnerClosed
	}
	if err := r.check(q, k, v); err != nil {
		return 0, err
	}
	var ms float64
	err := r.e.dev.Do(ctx, func(c *driver.Ctx) error {
		c = c.OnStream(q.stream)
		if err := c.Record(r.events[0]); err != nil {
			return err
		}
		if err := r.plan(c, q, k, v); err != nil {
			return err
		}
		if err := c.Record(r.events[1]); err != nil {
			return err
		}
		m, err := c.Elapsed(r.events[0], r.events[1])
		ms = float64(m)
		return err
	})
	return ms, err
}

// Execute runs the plan of the last Plan or Run call on q, k and v (which
// need not be the tensors planned) into out, as Run does, without
// predicting it again: plan once, run many.
func (r *Runner) Execute(ctx context.Context, q, k, v, out *Tensor) (*Tensor, Report, error) {
	return r.call(ctx, q, k, v, out, false)
}

// finish records the end event, waits for it and reads the counters and
// times.
func (r *Runner) finish(c *driver.Ctx, rep *Report, planned bool) error {
	if err := c.Record(r.events[2]); err != nil {
		return err
	}
	ms, err := c.Elapsed(r.events[1], r.events[2])
	if err != nil {
		return err
	}
	rep.RunMS = float64(ms)
	if planned {
		ms, err := c.Elapsed(r.events[0], r.events[1])
		if err != nil {
			return err
		}
		rep.PlanMS = float64(ms)
	}
	if gen, _ := needsGen(r.header); gen || r.levelsOn() {
		rep.Stats, err = readGenStats(c, r.bufs.counters.ptr, r.header, r.dense)
	} else {
		rep.Stats, err = readStats(c, r.bufs.counters.ptr, r.header, r.dense)
	}
	rep.Stats = r.askedStats(rep.Stats)
	return err
}

// check validates the inputs against the runner's problem.
func (r *Runner) check(q, k, v *Tensor) error {
	g := r.t.Geometry
	for _, in := range []struct {
		name string
		t    *Tensor
		want tensor.Shape
	}{
		{"q", q, tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.D}},
		{"k", k, tensor.Shape{B: g.B, H: g.Hkv, N: g.Nk, D: g.D}},
		{"v", v, tensor.Shape{B: g.B, H: g.Hkv, N: g.Nk, D: g.Dv}},
	} {
		if err := in.t.live(); err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		if in.t.e != r.e {
			return fmt.Errorf("%w: %s lives on another engine", ErrMismatch, in.name)
		}
		if in.t.shape != in.want {
			return fmt.Errorf("%w: %s is %v, the runner wants %v", ErrMismatch, in.name, in.t.shape, in.want)
		}
		if in.t.dtype != r.dt {
			return fmt.Errorf("%w: %s is %v, the runner wants %v", ErrMismatch, in.name, in.t.dtype, r.dt)
		}
	}
	if k.stream != q.stream || v.stream != q.stream {
		return fmt.Errorf("%w: q, k and v are on different streams", ErrMismatch)
	}
	return nil
}

// output validates out, or allocates a BHND one of the inputs' type.
func (r *Runner) output(ctx context.Context, out *Tensor) (*Tensor, error) {
	g := r.t.Geometry
	want := tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.Dv}
	if out == nil {
		return r.e.Alloc(ctx, r.outType(), tensor.BHND, want)
	}
	if err := out.live(); err != nil {
		return nil, fmt.Errorf("out: %w", err)
	}
	if out.e != r.e {
		return nil, fmt.Errorf("%w: out lives on another engine", ErrMismatch)
	}
	if out.shape != want {
		return nil, fmt.Errorf("%w: out is %v, want %v", ErrMismatch, out.shape, want)
	}
	if _, err := r.variant(out.dtype); err != nil {
		return nil, err
	}
	return out, nil
}

// execute stages inputs the kernel cannot read in place and launches the
// attention kernel over the device plan.
func (r *Runner) execute(c *driver.Ctx, q, k, v, out *Tensor) (Report, error) {
	if r.quant != QuantOff {
		return r.executeQ8(c, q, k, v, out)
	}
	vr, err := r.variant(out.dtype)
	if err != nil {
		return Report{}, err
	}
	g := r.t.Geometry
	j := &job{p: r.header, v: vr, dt: r.dt, gen: &r.bufs.gen}
	if j.dt == tensor.Float32 {
		j.dt = tensor.BFloat16
	}
	b := &r.bufs
	var ptrs [3]uint64
	for i, in := range []struct {
		t   *Tensor
		buf *deviceBuf
		dst *staged
	}{{q, &b.q, &j.q}, {k, &b.k, &j.k}, {v, &b.v, &j.vv}} {
		p, st, err := r.e.stageDevice(c, in.t, in.buf, j.dt, vr.headDim)
		if err != nil {
			return Report{}, err
		}
		ptrs[i], *in.dst = uint64(p), st
	}
	j.params = &kernelParams{
		q: ptrs[0], k: ptrs[1], v: ptrs[2], o: uint64(out.ptr),
		rowStart: uint64(b.rowStart.ptr), kvBlock: uint64(b.kvBlock.ptr), counters: uint64(b.counters.ptr),
		qsb: j.q.sb, qsh: j.q.sh, qsn: j.q.sn,
		ksb: j.k.sb, ksh: j.k.sh, ksn: j.k.sn,
		vsb: j.vv.sb, vsh: j.vv.sh, vsn: j.vv.sn,
		osb: out.stride.B, osh: out.stride.H, osn: out.stride.N,
		b: int32(g.B), hq: int32(g.Hq), hkv: int32(g.Hkv), nq: int32(g.Nq), nk: int32(g.Nk), dv: int32(g.Dv),
		qBlocks: int32(qBlocks(r.t)), blockK: int32(r.t.BlockK), split: int32(r.t.BlockQ / vr.blockQ),
		scaleLog2: r.t.SoftmaxScale() * math.Log2E,
	}
	if r.t.Causal {
		j.params.causal = 1
	}
	if f := r.header.Filter; f != nil {
		j.params.filter, j.params.rowGroup = 1, int32(f.RowGroup)
		j.params.lambdaLog2 = f.Lambda * math.Log2E
		if f.HeadLambda != nil {
			j.params.headLambda = uint64(b.lambda.ptr)
		}
	}
	if vr.ws && vr.dynamic && r.e.order == OrderAuto {
		j.params.order = uint64(b.order.ptr)
	}
	if lp, ok := r.pooled(); ok {
		lv, err := b.scratch.get(c, levelsScratch, max(r.dense, 1))
		if err != nil {
			return Report{}, err
		}
		j.levels = &deviceLevels{ptr: uint64(lv), top: lp.topLevel()}
	}
	if vr.ws {
		if j.maps, err = encodeMaps(c, j); err != nil {
			return Report{}, err
		}
	}
	if err := c.Memset(b.counters.ptr, 0, counterBytes); err != nil {
		return Report{}, err
	}
	if err := r.e.launch(c, j); err != nil {
		return Report{}, err
	}
	return Report{Kernel: Variant(vr.String())}, nil
}

// stageDevice returns where the kernel reads t and at which strides: t in
// place when it holds dt rows of headDim elements at 16-byte-aligned
// addresses and strides, else a copy in buf, converted to dt and padded to
// headDim (BHND), made on the device.
func (e *Engine) stageDevice(c *driver.Ctx, t *Tensor, buf *deviceBuf, dt tensor.DType, headDim int) (driver.Ptr, staged, error) {
	s, st := t.shape, t.stride
	aligned := t.ptr%16 == 0 && st.B%8 == 0 && st.H%8 == 0 && st.N%8 == 0
	if t.dtype == dt && s.D == headDim && aligned {
		return t.ptr, staged{sb: st.B, sh: st.H, sn: st.N}, nil
	}
	n := int64(s.B) * int64(s.H) * int64(s.N)
	if err := buf.ensure(c, n*int64(headDim)*2); err != nil {
		return 0, staged{}, fmt.Errorf("staging %v %v input: %w", t.dtype, s, err)
	}
	fn, err := e.auxFunction(c, "runtime.cu", "stage16")
	if err != nil {
		return 0, staged{}, err
	}
	src := viewOf(t)
	dst := uint64(buf.ptr)
	hd := int32(headDim)
	var f16 int32
	if dt == tensor.Float16 {
		f16 = 1
	}
	grid := driver.Dim3{X: uint32(min((n+7)/8, 1<<16)), Y: 1, Z: 1}
	if err := c.Launch(fn, grid, driver.Dim3{X: 32, Y: 8, Z: 1}, 0, driver.Arg(&src), driver.Arg(&dst), driver.Arg(&hd), driver.Arg(&f16)); err != nil {
		return 0, staged{}, err
	}
	return buf.ptr, staged{sn: int64(headDim), sh: int64(s.N) * int64(headDim), sb: int64(s.H) * int64(s.N) * int64(headDim)}, nil
}
