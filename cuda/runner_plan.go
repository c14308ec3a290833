package cuda

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
)

// The runner's device plan: the planner's kernels write each row's KV
// blocks, assemble turns them into the CSR arrays the attention kernel
// reads and orders the rows; DownloadPlan brings the result back for
// inspection.

// plan runs the device planner and assembles the CSR arrays and the
// launch order.
func (r *Runner) plan(c *driver.Ctx, q, k, v *Tensor) error {
	b := &r.bufs
	in := &planInput{e: r.e, t: r.t, q: viewOf(q), k: viewOf(k), v: viewOf(v),
		rowLen: b.rowLen.ptr, lists: b.lists.ptr, stride: kBlocks(r.t), scratch: &b.scratch}
	r.planned = false
	if pp, ok := r.planner.(passPlanner); ok {
		if err := pp.planPasses(c, in, r.header, &b.gen); err != nil {
			return fmt.Errorf("planning %s on the device: %w", r.name, err)
		}
		r.planned = true
		return nil
	}
	if err := r.planner.plan(c, in); err != nil {
		return fmt.Errorf("planning %s on the device: %w", r.name, err)
	}
	if err := r.assemble(c, in); err != nil {
		return err
	}
	if lp, ok := r.pooled(); ok {
		lv, err := b.scratch.get(c, levelsScratch, max(r.dense, 1))
		if err != nil {
			return err
		}
		if err := lp.levels(c, in, b.rowStart.ptr, lv); err != nil {
			return fmt.Errorf("planning %s on the device: levels: %w", r.name, err)
		}
	}
	r.planned = true
	return nil
}

// csrRowsMax bounds the plans that csr_rows assembles in one launch
// (kernels/runtime.cu): each of its blocks sums the lengths of every row
// before its own, a read that grows with the square of the rows. At 16384
// rows (64K tokens of 32 heads in 128-row blocks) its 512 blocks read 16 MB
// from L2 in all, and at up to 32 registers a thread they fit the H200's
// 132 SMs in one wave; longer plans take the three launches.
const csrRowsMax = 16384

// csrRowsRows and csrRowsThreads are csr_rows's CSR_ROWS_ROWS and
// CSR_ROWS_THREADS: the rows a block assembles and its threads, a half
// warp a row.
const (
	csrRowsRows    = 32
	csrRowsThreads = csrRowsRows * 16
)

// assemble turns the planner's row lengths and lists into the CSR arrays,
// and orders the rows longest first where the variant reads an order:
// csr_rows for plans of up to csrRowsMax rows (a programmatic dependent
// launch with Tactics.DependentAssembly), else csr_scan, csr_compact and
// longest_first.
func (r *Runner) assemble(c *driver.Ctx, in *planInput) error {
	b := &r.bufs
	rows, qb := in.rows(), qBlocks(r.t)
	stride := int32(in.stride)
	rl, ls, rs, kv, ord := uint64(b.rowLen.ptr), uint64(b.lists.ptr), uint64(b.rowStart.ptr), uint64(b.kvBlock.ptr), uint64(b.order.ptr)
	vr, err := r.variant(r.outType())
	if err != nil {
		return err
	}
	ordered := vr.ws && vr.dynamic && r.e.order == OrderAuto // each head's rows longest first, as rowOrder does on the host
	if rows <= csrRowsMax {
		fn, err := r.e.auxFunction(c, "runtime.cu", "csr_rows")
		if err != nil {
			return err
		}
		if !ordered {
			ord = 0
		}
		n, q32 := int32(rows), int32(qb)
		launch := c.Launch
		if r.e.depAs {
			launch = c.LaunchDependent // csr_rows waits for the planner on the device
		}
		return launch(fn, driver.Dim3{X: uint32((rows + csrRowsRows - 1) / csrRowsRows), Y: 1, Z: 1}, driver.Dim3{X: csrRowsThreads, Y: 1, Z: 1}, 0,
			driver.Arg(&rl), driver.Arg(&ls), driver.Arg(&rs), driver.Arg(&kv), driver.Arg(&ord), driver.Arg(&n), driver.Arg(&q32), driver.Arg(&stride))
	}
	n := int32(rows)
	scan, err := r.e.auxFunction(c, "runtime.cu", "csr_scan")
	if err != nil {
		return err
	}
	one := driver.Dim3{X: 1, Y: 1, Z: 1}
	if err := c.Launch(scan, one, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0, driver.Arg(&rl), driver.Arg(&rs), driver.Arg(&n)); err != nil {
		return err
	}
	compact, err := r.e.auxFunction(c, "runtime.cu", "csr_compact")
	if err != nil {
		return err
	}
	if err := c.Launch(compact, driver.Dim3{X: uint32(rows), Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
		driver.Arg(&rl), driver.Arg(&ls), driver.Arg(&rs), driver.Arg(&kv), driver.Arg(&n), driver.Arg(&stride)); err != nil {
		return err
	}
	if !ordered {
		return nil
	}
	lf, err := r.e.auxFunction(c, "runtime.cu", "longest_first")
	if err != nil {
		return err
	}
	q32, g := int32(qb), r.t.Geometry
	return c.Launch(lf, driver.Dim3{X: uint32(g.B * g.Hq), Y: 1, Z: 1}, driver.Dim3{X: 256, Y: 1, Z: 1}, 0,
		driver.Arg(&rs), driver.Arg(&ord), driver.Arg(&q32))
}

// DownloadPlan copies the runner's current device plan to the host, for
// checks against the CPU planners.
func (r *Runner) DownloadPlan(ctx context.Context) (*plan.Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrRunnerClosed
	}
	if !r.planned {
		return nil, fmt.Errorf("%w: no plan yet", plan.ErrInvalid)
	}
	if _, ok := r.planner.(passPlanner); ok {
		var p *plan.Plan
		err := r.e.dev.Do(ctx, func(c *driver.Ctx) error {
			if err := c.Sync(); err != nil {
				return err
			}
			var err error
			p, err = downloadPasses(c, r.header, &r.bufs.gen)
			return err
		})
		return p, err
	}
	rows := r.t.Geometry.B * r.t.Geometry.Hq * qBlocks(r.t)
	starts := make([]int32, rows+1)
	var kv []int32
	var lv []uint8 // per-entry levels of a levelPlanner's plan
	err := r.e.dev.Do(ctx, func(c *driver.Ctx) error {
		if err := c.Sync(); err != nil {
			return err
		}
		if err := driver.CopyOut(c, starts, r.bufs.rowStart.ptr); err != nil {
			return err
		}
		kv = make([]int32, starts[rows])
		if err := driver.CopyOut(c, kv, r.bufs.kvBlock.ptr); err != nil {
			return err
		}
		if _, ok := r.pooled(); ok && len(kv) > 0 {
			lp, err := r.bufs.scratch.get(c, levelsScratch, max(r.dense, 1))
			if err != nil {
				return err
			}
			lv = make([]uint8, len(kv))
			return driver.CopyOut(c, lv, lp)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	p := *r.header
	p.RowStart = make([]int, rows+1)
	for i, s := range starts {
		p.RowStart[i] = int(s)
	}
	p.KVBlock = kv
	if lv != nil {
		p.Level = make([]plan.Level, len(lv))
		for i, l := range lv {
			p.Level[i] = plan.Level(l)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("device plan: %w", err)
	}
	return &p, nil
}

// RunTiming is what Runner.Benchmark measured: medians over the timed
// calls of the plan, the run and the two together, in milliseconds.
type RunTiming struct {
	PlanMS, RunMS, TotalMS float64
	Last                   Report // the last timed call
	FlushedL2              bool   // see Engine.Benchmark
}
