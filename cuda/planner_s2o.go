package cuda

import (
	"fmt"
	"unsafe"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/plan"
)

// s2oPlanner is s2o.Planner on the device (kernels/plan_s2o.cu). The
// plan's rows, Init rows, stop rule and order layout depend only on the
// tiling (s2o.Planner.Layout): they are the runner's header, uploaded into
// the gathering kernel's pass buffers on the first call. Each call then
// ranks the orders in place on the device — Q_perm (S2O Eq. 1) and the
// ranked part of every segment's key order (Eq. 2), led by the top keys of
// the segment's outlier queries (our extension, method/s2o/outlier.go) —
// with distances and scores that repeat the CPU planner's float64
// operations bit for bit and a stable sort, so the orders equal the CPU
// planner's. Nothing proportional to N crosses PCIe per call.
type s2oPlanner struct{ s s2o.Planner }

// newS2OPlanner returns the device planner of p.
func newS2OPlanner(p s2o.Planner) (devicePlanner, error) { return s2oPlanner{p}, nil }

func (p s2oPlanner) header(t plan.Tiling) (*plan.Plan, error) {
	if t.Geometry.D > 128 {
		return nil, fmt.Errorf("%w: s2o on the device with D=%d; it takes up to 128", ErrUnsupported, t.Geometry.D)
	}
	return p.s.Layout(t)
}

func (s2oPlanner) sparse() bool { return true }

// plan is not used: Runner.plan calls planPasses.
func (s2oPlanner) plan(*driver.Ctx, *planInput) error {
	return fmt.Errorf("%w: the s2o device planner writes the pass buffers (planPasses)", ErrUnsupported)
}

// s2oArgs mirrors struct S2OArgs in kernels/plan_s2o.cu.
type s2oArgs struct {
	q, k                   view
	guide, qmean           uint64
	qbuf, qbuf2, qorder    uint64
	kbuf, kbuf2            uint64
	kvOrder, kvStart       uint64
	b, hq, hkv, nq, nk, d  int32
	seg, win, causal, segs int32
	oq, otok, otop         uint64
	outliers               int32
}

// s2oKscoreShared is KS_SHARED in kernels/plan_s2o.cu: s2o_kscore's
// dynamic shared memory, a tile of 64 keys as float64 (130 a row) and each
// of its 8 warps' 8 vectors' 32 staged columns.
const s2oKscoreShared = (64*130 + 8*8*32) * 8

// s2oStage is one kernel launch of the S2O device planner.
type s2oStage struct {
	name   string
	launch func() error
}

// planPasses uploads the layout into gb once, points the Init pass's key
// orders at the main pass's (one copy, ranked once), and ranks the orders
// for in's inputs.
func (p s2oPlanner) planPasses(c *driver.Ctx, in *planInput, header *plan.Plan, gb *genBufs) error {
	stages, err := p.stages(c, in, header, gb)
	if err != nil {
		return err
	}
	for _, s := range stages {
		if err := s.launch(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// stages prepares the pass buffers and scratch and returns the planner's
// launches in order: the means, the outlier queries (our extension,
// s2o.Planner.Outliers > 0; with Q_perm they also score the queries), the
// query scores (Q_perm with no outlier queries), the key scores
// (and the outliers' top keys), the outliers' top keys put first, then the
// query lists' sort (Q_perm only) and the key lists', each s2o_sort on
// chunks of s2oSortChunk elements and s2o_merge's levels (sortStages).
func (p s2oPlanner) stages(c *driver.Ctx, in *planInput, header *plan.Plan, gb *genBufs) ([]s2oStage, error) {
	t := in.t
	g := t.Geometry
	var gp genParams
	main := &gb.pass[1]
	if err := uploadPass(c, main, header, &gp); err != nil {
		return nil, err
	}
	if header.Init != nil {
		init := &gb.pass[0]
		if init.plan != header.Init {
			if err := uploadPass(c, init, header.Init, &gp); err != nil {
				return nil, err
			}
			if err := c.Free(init.kvOrder.ptr); err != nil {
				return nil, err
			}
			init.kvOrder = deviceBuf{}
			init.ptrs.kvOrder = main.ptrs.kvOrder
		}
	}
	sp := p.s.Resolve(in.t)
	segs := (g.Nq + sp.Segment - 1) / sp.Segment
	heads := int64(g.B) * int64(g.Hq)
	total := int64(len(header.Order.KV))
	a := &s2oArgs{q: in.q, k: in.k, qorder: main.ptrs.qOrder, kvOrder: main.ptrs.kvOrder, kvStart: main.ptrs.kvStart,
		b: int32(g.B), hq: int32(g.Hq), hkv: int32(g.Hkv), nq: int32(g.Nq), nk: int32(g.Nk), d: int32(g.D),
		seg: int32(sp.Segment), win: int32(min(sp.Window, g.Nq+g.Nk)), segs: int32(segs)}
	if t.Causal {
		a.causal = 1
	}
	perm := header.Order.Query != nil
	outs := int64(max(sp.Outliers, 0))
	a.outliers = int32(outs)
	slots := heads * int64(segs) * outs
	for _, s := range []struct {
		dst  *uint64
		name string
		n    int64
	}{
		{&a.guide, "s2o.guide", int64(g.B*g.Hkv) * int64(g.D) * 4},
		{&a.qmean, "s2o.qmean", heads * int64(segs) * int64(g.D) * 8},
		{&a.kbuf, "s2o.kbuf", total * 8}, {&a.kbuf2, "s2o.kbuf2", total * 8},
		{&a.oq, "s2o.oq", slots * int64(g.D) * 8}, {&a.otok, "s2o.otok", slots * 4}, {&a.otop, "s2o.otop", slots * 8},
	} {
		ptr, err := in.scratch.get(c, s.name, max(s.n, 8))
		if err != nil {
			return nil, err
		}
		*s.dst = uint64(ptr)
	}
	if perm {
		for _, s := range []struct {
			dst  *uint64
			name string
		}{{&a.qbuf, "s2o.qbuf"}, {&a.qbuf2, "s2o.qbuf2"}} {
			ptr, err := in.scratch.get(c, s.name, max(heads*int64(g.Nq)*8, 8))
			if err != nil {
				return nil, err
			}
			*s.dst = uint64(ptr)
		}
	}
	one := func(n int64) driver.Dim3 { return driver.Dim3{X: uint32(n), Y: 1, Z: 1} }
	launchShared := func(name string, grid, block driver.Dim3, shared int, args ...unsafe.Pointer) s2oStage {
		return s2oStage{name, func() error {
			fn, err := in.e.auxFunction(c, "plan_s2o.cu", name)
			if err != nil {
				return err
			}
			if err := in.e.raiseDynamicShared(c, fn, shared); err != nil {
				return err
			}
			return c.Launch(fn, grid, block, shared, args...)
		}}
	}
	launch := func(name string, grid, block driver.Dim3, args ...unsafe.Pointer) s2oStage {
		return launchShared(name, grid, block, 0, args...)
	}
	if s2oKscoreShared > in.e.dev.MaxSharedOptin {
		return nil, fmt.Errorf("%w: s2o_kscore needs %d bytes of shared memory, the device allows %d", ErrUnsupported, s2oKscoreShared, in.e.dev.MaxSharedOptin)
	}
	st := []s2oStage{launch("s2o_means", one(int64(g.B*g.Hkv)+heads*int64(segs)), one(128), driver.Arg(a))}
	if outs > 0 {
		st = append(st, launch("s2o_outq", one(heads*int64(segs)), one(128), driver.Arg(a)))
	}
	if perm && outs == 0 { // s2o_outq scores the queries otherwise
		st = append(st, launch("s2o_qscore", driver.Dim3{X: uint32((g.Nq + 127) / 128), Y: uint32(heads), Z: 1}, one(128), driver.Arg(a)))
	}
	st = append(st, launchShared("s2o_kscore", driver.Dim3{X: uint32((g.Nk + 63) / 64), Y: uint32(g.B * g.Hkv), Z: 1}, one(256), s2oKscoreShared, driver.Arg(a)))
	if outs > 0 {
		st = append(st, launch("s2o_promote", one(heads*int64(segs)), one(32), driver.Arg(a)))
	}
	if perm {
		st = append(st, p.sortStages(launch, a, heads*int64(segs), 0, min(sp.Segment, g.Nq))...)
	}
	return append(st, p.sortStages(launch, a, heads*int64(segs), 1, sp.MaxRanked(t))...), nil
}

// s2oSortChunk is SORT_CHUNK in kernels/plan_s2o.cu: the elements one
// s2o_sort or s2o_merge block sorts or merges.
const s2oSortChunk = 4096

// sortStages returns the launches that sort lists lists of one kind (keys
// 0: the segments' queries; 1: their ranked keys), the longest maxLen
// elements: s2o_sort on every chunk of s2oSortChunk elements, then
// s2o_merge at levels 0, 1, … until the longest list is one run. The
// grids hold cmax blocks a list, cmax the longest list's chunks; a
// shorter list's blocks past its end exit.
func (s2oPlanner) sortStages(launch func(string, driver.Dim3, driver.Dim3, ...unsafe.Pointer) s2oStage, a *s2oArgs, lists int64, keys int32, maxLen int) []s2oStage {
	cmax := int32((maxLen + s2oSortChunk - 1) / s2oSortChunk)
	if cmax == 0 {
		return nil // every list is empty
	}
	kind := "queries"
	if keys == 1 {
		kind = "keys"
	}
	grid := driver.Dim3{X: uint32(lists * int64(cmax)), Y: 1, Z: 1}
	block := driver.Dim3{X: 256, Y: 1, Z: 1}
	st := []s2oStage{launch("s2o_sort", grid, block, driver.Arg(a), driver.Arg(&keys), driver.Arg(&cmax))}
	st[0].name = fmt.Sprintf("s2o_sort (%s)", kind)
	for level := int32(0); 1<<level < cmax; level++ {
		lv := level
		s := launch("s2o_merge", grid, block, driver.Arg(a), driver.Arg(&keys), driver.Arg(&cmax), driver.Arg(&lv))
		s.name = fmt.Sprintf("s2o_merge (%s, level %d)", kind, level)
		st = append(st, s)
	}
	return st
}

// downloadPasses copies the plan in gb's pass buffers back to the host:
// header (the layout) with its rows, Init rows and orders read from the
// device.
func downloadPasses(c *driver.Ctx, header *plan.Plan, gb *genBufs) (*plan.Plan, error) {
	p, err := downloadPass(c, header, &gb.pass[1])
	if err != nil {
		return nil, err
	}
	if header.Init != nil {
		if p.Init, err = downloadPass(c, header.Init, &gb.pass[0]); err != nil {
			return nil, fmt.Errorf("Init plan: %w", err)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("device plan: %w", err)
	}
	return p, nil
}

// downloadPass reads one pass's rows and orders, shaped as h, from pb.
func downloadPass(c *driver.Ctx, h *plan.Plan, pb *passBufs) (*plan.Plan, error) {
	if pb.plan != h {
		return nil, fmt.Errorf("%w: the pass buffers hold another plan", plan.ErrInvalid)
	}
	p := *h
	starts := make([]int32, len(h.RowStart))
	if err := driver.CopyOut(c, starts, driver.Ptr(pb.ptrs.rowStart)); err != nil {
		return nil, err
	}
	p.RowStart = make([]int, len(starts))
	for i, s := range starts {
		p.RowStart[i] = int(s)
	}
	p.KVBlock = make([]int32, len(h.KVBlock))
	if len(p.KVBlock) > 0 {
		if err := driver.CopyOut(c, p.KVBlock, driver.Ptr(pb.ptrs.kvBlock)); err != nil {
			return nil, err
		}
	}
	if o := h.Order; o != nil {
		no := *o
		for _, x := range []struct {
			dst *[]int32
			src uint64
		}{{&no.Query, pb.ptrs.qOrder}, {&no.KV, pb.ptrs.kvOrder}} {
			if len(*x.dst) == 0 {
				continue
			}
			*x.dst = make([]int32, len(*x.dst))
			if err := driver.CopyOut(c, *x.dst, driver.Ptr(x.src)); err != nil {
				return nil, err
			}
		}
		p.Order = &no
	}
	return &p, nil
}
