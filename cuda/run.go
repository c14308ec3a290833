package cuda

import (
	"context"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// job is one validated plan with its inputs staged for upload.
type job struct {
	p        *plan.Plan
	v        variant
	q, k, vv staged
	rows     []int32
	order    []int32      // launch order of the plan rows, or nil
	dt       tensor.DType // the 16-bit type the inputs were staged in
	params   *kernelParams
	maps     *wsMaps       // the warp-specialized kernel's tensor maps, set by upload
	gen      *genBufs      // the gathering kernel's buffers; nil means the engine's
	levels   *deviceLevels // per-entry levels a device planner wrote, or nil
}

// deviceLevels locates the per-entry levels of a device plan (a
// levelPlanner's) and the coarsest level they may hold.
type deviceLevels struct {
	ptr uint64
	top plan.Level
}

// prepare validates the inputs against the plan and the kernel and stages
// them as 16-bit rows the kernel can read.
func (e *Engine) prepare(p *plan.Plan, q, k, v *tensor.Tensor) (*job, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil plan", plan.ErrInvalid)
	}
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		return nil, err
	}
	if g != p.Geometry {
		return nil, fmt.Errorf("%w: tensors are %+v, plan is for %+v", ErrMismatch, g, p.Geometry)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	dt := q.DType()
	if dt == tensor.Float32 {
		dt = tensor.BFloat16 // float32 inputs are rounded to bfloat16
	}
	vr, err := e.variantFor(p, dt)
	if err != nil {
		return nil, err
	}
	if len(p.KVBlock) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d plan entries above 2^31", ErrUnsupported, len(p.KVBlock))
	}
	j := &job{p: p, v: vr, dt: dt}
	if j.q, err = stage(q, dt, vr.headDim); err != nil {
		return nil, err
	}
	if j.k, err = stage(k, dt, vr.headDim); err != nil {
		return nil, err
	}
	if j.vv, err = stage(v, dt, vr.headDim); err != nil {
		return nil, err
	}
	j.rows = make([]int32, len(p.RowStart))
	for i, r := range p.RowStart {
		j.rows[i] = int32(r)
	}
	if !vr.gen.on {
		j.order = rowOrder(e.order, p, vr)
	}
	f := p.Filter
	j.params = &kernelParams{
		qsb: j.q.sb, qsh: j.q.sh, qsn: j.q.sn,
		ksb: j.k.sb, ksh: j.k.sh, ksn: j.k.sn,
		vsb: j.vv.sb, vsh: j.vv.sh, vsn: j.vv.sn,
		osh: int64(g.Nq * g.Dv), osn: int64(g.Dv),
		b: int32(g.B), hq: int32(g.Hq), hkv: int32(g.Hkv), nq: int32(g.Nq), nk: int32(g.Nk), dv: int32(g.Dv),
		qBlocks: int32(p.QBlocks()), blockK: int32(p.BlockK), split: int32(p.BlockQ / vr.blockQ),
		scaleLog2: p.SoftmaxScale() * math.Log2E,
	}
	j.params.osb = int64(g.Hq) * j.params.osh
	if p.Causal {
		j.params.causal = 1
	}
	if f != nil {
		j.params.filter, j.params.rowGroup = 1, int32(f.RowGroup)
		j.params.lambdaLog2 = f.Lambda * math.Log2E
	}
	return j, nil
}

// launch starts the kernel; the caller zeroes the counters first.
func (e *Engine) launch(c *driver.Ctx, j *job) error {
	if j.v.gen.on {
		gb := j.gen
		if gb == nil {
			gb = &e.bufs.gen
		}
		return e.launchGen(c, j, gb)
	}
	fn, err := e.function(c, j.v)
	if err != nil {
		return err
	}
	g := j.p.Geometry
	grid := driver.Dim3{X: uint32(j.p.QBlocks() * int(j.params.split)), Y: uint32(g.B * g.Hq), Z: 1}
	block := driver.Dim3{X: uint32(j.v.threads()), Y: 1, Z: 1}
	if grid.X == 0 || grid.Y == 0 {
		return nil
	}
	if j.v.ws {
		// A persistent grid: one block per multiprocessor at most, each
		// taking the plan rows gridDim.x apart.
		grid = driver.Dim3{X: uint32(min(int(grid.X)*int(grid.Y), e.dev.SMs)), Y: 1, Z: 1}
		var wp wsParams
		wp.set(j.maps, j.params)
		return c.Launch(fn, grid, block, j.v.sharedBytes(), driver.Arg(&wp))
	}
	return c.Launch(fn, grid, block, j.v.sharedBytes(), driver.Arg(j.params))
}

// counterBytes is the size of the device counters: four work counters
// (Params.counters in kernels/common.cuh), the persistent kernel's row
// tickets, and the gathering kernel's early stops and pooled entries
// (genCounters), all zeroed before each launch.
const counterBytes = genCounters * 8

// stats reads the device counters back as plan.Stats.
func (e *Engine) stats(c *driver.Ctx, j *job) (plan.Stats, error) {
	if j.v.gen.on {
		return readGenStats(c, e.bufs.counters.ptr, j.p, j.p.DenseBlocks())
	}
	return readStats(c, e.bufs.counters.ptr, j.p, j.p.DenseBlocks())
}

// readStats reads the device counters at counters back as the stats of a
// plan with p's tiling and filter, whose dense pass has dense blocks.
func readStats(c *driver.Ctx, counters driver.Ptr, p *plan.Plan, dense int64) (plan.Stats, error) {
	var n [4]uint64
	if err := driver.CopyOut(c, n[:], counters); err != nil {
		return plan.Stats{}, err
	}
	s := plan.Stats{DenseBlocks: float64(dense), QKBlocks: float64(n[0]), PVBlocks: float64(n[1])}
	if f := p.Filter; f != nil {
		// A row group counts its share of its block's valid rows, as on
		// the CPU: 1/⌈rows/RowGroup⌉ of a product.
		full := float64((p.BlockQ + f.RowGroup - 1) / f.RowGroup)
		tail := p.Geometry.Nq - (p.QBlocks()-1)*p.BlockQ
		last := float64((tail + f.RowGroup - 1) / f.RowGroup)
		s.PVBlocks = float64(n[2])/full + float64(n[3])/last
	}
	return s, nil
}

// Run computes attention for the plan p into out and returns the work
// counters read from the device. q, k and v must match p.Geometry, in
// bfloat16 or float16 (float32 inputs are rounded to bfloat16); out must be
// [B, Hq, Nq, Dv] in any storage type and layout, or nil to get a new
// BHND tensor (float32, or the inputs' 16-bit type under
// Config.Output16). Plans the kernel does not run give an error wrapping
// ErrUnsupported (see Supports).
func (e *Engine) Run(ctx context.Context, p *plan.Plan, q, k, v, out *tensor.Tensor) (*tensor.Tensor, plan.Stats, error) {
	j, err := e.prepare(p, q, k, v)
	if err != nil {
		return nil, plan.Stats{}, err
	}
	return e.runHost(ctx, j, out, func(c *driver.Ctx) error { return e.launch(c, j) })
}

// runHost is the host-tensor path of Run and RunQuantized: it uploads j's
// inputs, clears the counters, poisons the output, calls launch, then
// downloads the output (16-bit under j.v.out16, else float32) and the
// counters,
// and copies the result into out when out is not nil.
func (e *Engine) runHost(ctx context.Context, j *job, out *tensor.Tensor, launch func(c *driver.Ctx) error) (*tensor.Tensor, plan.Stats, error) {
	g := j.p.Geometry
	want := tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.Dv}
	if out != nil && out.Shape() != want {
		return nil, plan.Stats{}, fmt.Errorf("%w: out is %v, want %v", ErrMismatch, out.Shape(), want)
	}
	out16 := j.v.out16
	n := g.B * g.Hq * g.Nq * g.Dv
	var host []float32
	var host16 []uint16
	if out16 {
		host16 = make([]uint16, n)
	} else {
		host = make([]float32, n)
	}
	var stats plan.Stats
	err := e.dev.Do(ctx, func(c *driver.Ctx) error {
		if err := e.upload(c, j); err != nil {
			return err
		}
		if err := c.Memset(e.bufs.counters.ptr, 0, counterBytes); err != nil {
			return err
		}
		// Poison the output (all-ones bits are NaN): an element the kernel
		// fails to write cannot pass for a result.
		if err := c.Memset(e.bufs.o.ptr, 0xff, int64(n)*j.v.outBytes()); err != nil {
			return err
		}
		if err := launch(c); err != nil {
			return err
		}
		if err := c.Sync(); err != nil {
			return err
		}
		var cerr error
		if out16 {
			cerr = driver.CopyOut(c, host16, e.bufs.o.ptr)
		} else {
			cerr = driver.CopyOut(c, host, e.bufs.o.ptr)
		}
		if cerr != nil {
			return cerr
		}
		var err error
		stats, err = e.stats(c, j)
		return err
	})
	if err != nil {
		return nil, plan.Stats{}, err
	}
	var res *tensor.Tensor
	if out16 {
		res, err = tensor.FromBits16(j.dt, tensor.BHND, want, host16)
	} else {
		res, err = tensor.FromFloat32(tensor.BHND, want, host)
	}
	if err != nil {
		return nil, plan.Stats{}, err
	}
	if out == nil {
		return res, stats, nil
	}
	row := make([]float32, g.Dv)
	for b := range g.B {
		for h := range g.Hq {
			for n := range g.Nq {
				res.ReadRow(b, h, n, row)
				out.WriteRow(b, h, n, row)
			}
		}
	}
	return out, stats, nil
}

// variantFor chooses the kernel for the host plan p with dt inputs; plans
// with levels, token orders, a stop rule or an Init plan get the gathering
// kernel.
func (e *Engine) variantFor(p *plan.Plan, dt tensor.DType) (variant, error) {
	return e.variantWith(p, dt, skipsBlocks(p), rowsAlike(p.RowStart), true)
}

// skipsBlocks reports whether p lists fewer blocks than a dense
// non-causal pass visits.
func skipsBlocks(p *plan.Plan) bool {
	g := p.Geometry
	return int64(len(p.KVBlock)) < int64(p.QBlocks())*int64(p.KBlocks())*int64(g.B*g.Hq)
}

// variantOf chooses the kernel for a plan with p's tiling and options
// (its rows need not be filled in): sparse says whether it skips blocks a
// non-causal dense pass visits, alike whether all rows list as many.
// Plans that need the gathering kernel give an error wrapping
// ErrUnsupported: a device plan carries no levels or orders yet.
func (e *Engine) variantOf(p *plan.Plan, dt tensor.DType, sparse, alike bool) (variant, error) {
	return e.variantWith(p, dt, sparse, alike, false)
}

// variantWith is variantOf, allowing the gathering kernel when gen is set.
func (e *Engine) variantWith(p *plan.Plan, dt tensor.DType, sparse, alike, gen bool) (variant, error) {
	kc := e.choice()
	kc.gen = gen
	vr, err := chooseVariant(p, dt, kc)
	if err != nil {
		return vr, err
	}
	vr.out16 = e.out16
	if vr.gen.on {
		return vr, nil
	}
	if vr.ws {
		vr.pingPong = pingPong(e.pingPong, p.Causal, sparse)
		vr.dynamic = !alike
		if e.wsStages >= 2 {
			vr.stages = e.wsStages
		}
		for vr.stages > 2 && vr.sharedBytes() > e.dev.MaxSharedOptin {
			vr.stages--
		}
		if vr.tmaOut = true; vr.sharedBytes() > e.dev.MaxSharedOptin {
			vr.tmaOut = false
		}
	} else {
		if vr.stages = min(e.stages, 2); vr.sharedBytes() > e.dev.MaxSharedOptin {
			vr.stages = 1
		}
		if vr.wgmma && e.pipe {
			vr.pipe, vr.stages = true, 2
		}
		vr.skipFuture = vr.wgmma && !vr.pipe && e.skipFut && p.Causal
	}
	return vr, nil
}

// KernelFor names the kernel configuration that Run would launch for p
// with inputs of type dt, or says why p does not run on e's device.
func (e *Engine) KernelFor(p *plan.Plan, dt tensor.DType) (Variant, error) {
	if dt == tensor.Float32 {
		dt = tensor.BFloat16
	}
	v, err := e.variantFor(p, dt)
	if err != nil {
		return "", err
	}
	return Variant(v.String()), nil
}
