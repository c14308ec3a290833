package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
)

// devicePlanner predicts plans on the device. Each method's planner
// (package method/...) that runs on the GPU has one, found by
// devicePlannerFor; it reads the method's own configuration, so one
// planner value serves the CPU and the GPU.
type devicePlanner interface {
	// header returns a plan with tiling t and the plan-wide options the
	// method attaches (its λ filter), and no rows; it checks the method's
	// parameters.
	header(t plan.Tiling) (*plan.Plan, error)
	// sparse reports whether the method's plans may skip blocks that a
	// dense pass visits (false only for dense).
	sparse() bool
	// plan writes each row's length to in.rowLen and its KV blocks, in
	// ascending order, to in.lists at row·in.stride, on the device.
	plan(c *driver.Ctx, in *planInput) error
}

// passPlanner is a device planner whose plans carry what CSR rows cannot
// (token orders, Init rows, stop rules: S2O): it writes the gathering
// kernel's pass buffers itself, and Runner.plan and DownloadPlan use
// these methods instead of plan and the CSR arrays.
type passPlanner interface {
	devicePlanner
	// planPasses writes the plan for in's inputs into gb, whose passes
	// it fills from header (the runner's) as needed.
	planPasses(c *driver.Ctx, in *planInput, header *plan.Plan, gb *genBufs) error
}

// planInput is what a device planner reads and writes.
type planInput struct {
	e       *Engine
	t       plan.Tiling
	q, k, v view
	rowLen  driver.Ptr // int32 [rows]
	lists   driver.Ptr // int32 [rows·stride]
	stride  int        // KBlocks
	scratch *scratchPool
}

// rows is the number of plan rows, B·Hq·QBlocks.
func (in *planInput) rows() int {
	g := in.t.Geometry
	return g.B * g.Hq * qBlocks(in.t)
}

// qBlocks and kBlocks are ⌈Nq/BlockQ⌉ and ⌈Nk/BlockK⌉.
func qBlocks(t plan.Tiling) int { return (t.Geometry.Nq + t.BlockQ - 1) / t.BlockQ }
func kBlocks(t plan.Tiling) int { return (t.Geometry.Nk + t.BlockK - 1) / t.BlockK }

// scratchPool holds a runner's named device scratch buffers; each grows to
// the largest size asked and is reused from call to call.
type scratchPool struct {
	bufs map[string]*deviceBuf
}

// get returns the buffer called name with room for n bytes.
func (s *scratchPool) get(c *driver.Ctx, name string, n int64) (driver.Ptr, error) {
	if s.bufs == nil {
		s.bufs = map[string]*deviceBuf{}
	}
	b := s.bufs[name]
	if b == nil {
		b = &deviceBuf{}
		s.bufs[name] = b
	}
	if err := b.ensure(c, n); err != nil {
		return 0, fmt.Errorf("scratch %s: %w", name, err)
	}
	return b.ptr, nil
}

func (s *scratchPool) free(c *driver.Ctx) error {
	var err error
	for _, b := range s.bufs {
		if e := c.Free(b.ptr); e != nil && err == nil {
			err = e
		}
		*b = deviceBuf{}
	}
	return err
}

// devicePlannerFor returns the device planner of p, or an error wrapping
// ErrUnsupported for methods that plan on the CPU only. A nil p is dense.
func devicePlannerFor(p plan.Planner) (devicePlanner, error) {
	switch m := p.(type) {
	case nil, plan.DensePlanner, *plan.DensePlanner:
		return densePlanner{}, nil
	case plan.Fixed:
		return fixedPlanner{m.P}, nil
	case *plan.Fixed:
		return fixedPlanner{m.P}, nil
	case window.Planner:
		return windowPlanner{m}, nil
	case *window.Planner:
		return windowPlanner{*m}, nil
	case sparge.Planner:
		return newSpargePlanner(m)
	case *sparge.Planner:
		return newSpargePlanner(*m)
	case unisparse.Planner:
		return newUnisparsePlanner(m)
	case *unisparse.Planner:
		return newUnisparsePlanner(*m)
	case xattn.Planner:
		return newXattnPlanner(m.Resolve())
	case *xattn.Planner:
		return newXattnPlanner(m.Resolve())
	case flexprefill.Planner:
		return newFlexprefillPlanner(m.Resolve())
	case *flexprefill.Planner:
		return newFlexprefillPlanner(m.Resolve())
	case minference.Planner:
		return newMinferencePlanner(m)
	case *minference.Planner:
		return newMinferencePlanner(*m)
	case psa.Planner:
		return newPsaPlanner(m)
	case *psa.Planner:
		return newPsaPlanner(*m)
	case oracle.Planner:
		return newOraclePlanner(m.Resolve())
	case *oracle.Planner:
		return newOraclePlanner(m.Resolve())
	case s2o.Planner:
		return newS2OPlanner(m)
	case *s2o.Planner:
		return newS2OPlanner(*m)
	case choosingPlanner: // auto.Planner
		return newAutoPlanner(m)
	case composedPlanner: // auto.Compose
		return newComposePlanner(m)
	}
	return nil, fmt.Errorf("%w: the %s planner runs on the CPU only", ErrUnsupported, p.Name())
}

// planArgs mirrors struct PlanArgs in kernels/device.cuh.
type planArgs struct {
	rowLen, lists         uint64
	rows, stride, qBlocks int32
	b, hq, hkv, nq, nk, d int32
	bq, bk, causal        int32
	scale                 float32
}

// args returns the kernels' PlanArgs of in.
func (in *planInput) args() planArgs {
	g := in.t.Geometry
	a := planArgs{rowLen: uint64(in.rowLen), lists: uint64(in.lists), rows: int32(in.rows()), stride: int32(in.stride), qBlocks: int32(qBlocks(in.t)),
		b: int32(g.B), hq: int32(g.Hq), hkv: int32(g.Hkv), nq: int32(g.Nq), nk: int32(g.Nk), d: int32(g.D),
		bq: int32(in.t.BlockQ), bk: int32(in.t.BlockK), scale: in.t.SoftmaxScale()}
	if in.t.Causal {
		a.causal = 1
	}
	return a
}

// grid1 is a one-dimensional launch shape of n threads in blocks of
// threads.
func grid1(n, threads int) (grid, block driver.Dim3) {
	return driver.Dim3{X: uint32(max((n+threads-1)/threads, 1)), Y: 1, Z: 1}, driver.Dim3{X: uint32(threads), Y: 1, Z: 1}
}

// densePlanner lists every causally visible block.
type densePlanner struct{}

func (densePlanner) header(t plan.Tiling) (*plan.Plan, error) { return &plan.Plan{Tiling: t}, nil }
func (densePlanner) sparse() bool                             { return false }
func (densePlanner) plan(c *driver.Ctx, in *planInput) error {
	fn, err := in.e.auxFunction(c, "runtime.cu", "dense_plan")
	if err != nil {
		return err
	}
	a := in.args()
	return c.Launch(fn, driver.Dim3{X: uint32(a.rows), Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0, driver.Arg(&a))
}

// windowPlanner is window.Planner on the device.
type windowPlanner struct{ w window.Planner }

func (p windowPlanner) header(t plan.Tiling) (*plan.Plan, error) {
	if p.w.Sink < 0 || p.w.Window < 0 {
		return nil, fmt.Errorf("%w: window planner needs Sink ≥ 0 and Window ≥ 0, got %d and %d", plan.ErrInvalid, p.w.Sink, p.w.Window)
	}
	return &plan.Plan{Tiling: t}, nil
}
func (windowPlanner) sparse() bool { return true }
func (p windowPlanner) plan(c *driver.Ctx, in *planInput) error {
	fn, err := in.e.auxFunction(c, "plan_window.cu", "window_plan")
	if err != nil {
		return err
	}
	a := in.args()
	g := in.t.Geometry
	sink := int32(min(p.w.Sink, g.Nk+g.Nq))
	win := int32(min(p.w.Window, g.Nk+g.Nq))
	grid, block := grid1(int(a.rows), 128)
	return c.Launch(fn, grid, block, 0, driver.Arg(&a), driver.Arg(&sink), driver.Arg(&win))
}

// fixedPlanner uploads a plan made on the host: its rows are copied into
// the runner's CSR arrays, and the kernel runs it as any device plan.
type fixedPlanner struct{ p *plan.Plan }

func (f fixedPlanner) header(t plan.Tiling) (*plan.Plan, error) {
	if f.p == nil {
		return nil, fmt.Errorf("%w: Fixed planner without a plan", plan.ErrInvalid)
	}
	if f.p.Tiling != t {
		return nil, fmt.Errorf("%w: a fixed plan for %+v asked for %+v", plan.ErrInvalid, f.p.Tiling, t)
	}
	if err := f.p.Validate(); err != nil {
		return nil, err
	}
	// The whole plan, for the kernel choice to see its levels and orders.
	return f.p, nil
}

func (f fixedPlanner) sparse() bool { return skipsBlocks(f.p) }

// plan writes each row's length and blocks from the host plan.
func (f fixedPlanner) plan(c *driver.Ctx, in *planInput) error {
	rows := in.rows()
	lens := make([]int32, rows)
	lists := make([]int32, rows*in.stride)
	for r := range rows {
		kb, _ := f.p.Entries(r)
		lens[r] = int32(len(kb))
		copy(lists[r*in.stride:], kb)
	}
	if err := driver.CopyIn(c, in.rowLen, lens); err != nil {
		return err
	}
	return driver.CopyIn(c, in.lists, lists)
}
