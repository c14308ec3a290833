package cuda

import (
	"errors"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
)

// genParams mirrors struct GenParams in kernels/attention_gen.cu.
type genParams struct {
	kernelParams
	level, pk, pv                   uint64
	lvlRow                          [9]int64
	lvlWidth                        [9]int32
	kBlocks                         int32
	qOrder, kvOrder, kvStart, rowKV uint64
	stM, stL, stAcc                 uint64
	rowAfter                        uint64
	after                           int32
	tau                             float32
	tickets                         uint64
}

// pyramidArgs mirrors struct PyramidArgs in kernels/pyramid.cu: K's
// fields at index 0, V's at 1, then where each level starts.
type pyramidArgs struct {
	src                                           [2]uint64
	sb, sh, sn                                    [2]int64
	dst                                           [2]uint64
	lvlRow                                        [9]int64
	lvlWidth                                      [9]int32
	b, h, nk, blockK, kBlocks, top, headDim, bf16 int32
}

// passBufs hold one pass's plan on the device: CSR, levels, orders,
// per-row stop counts and the rows' launch order. plan is the plan they hold (kept alive, so that
// its address identifies it: a plan is read-only once built) and ptrs
// where; a plan uploaded last time is not uploaded again.
type passBufs struct {
	rows, kv, lvl, qOrder, kvOrder, kvStart, rowKV, rowAfter, order deviceBuf
	plan                                                            *plan.Plan
	ptrs                                                            passPtrs
}

// passPtrs are the fields of genParams that locate one pass's plan.
type passPtrs struct {
	rowStart, kvBlock, level, qOrder, kvOrder, kvStart, rowKV, rowAfter uint64
	after                                                               int32
	tau                                                                 float32
	order                                                               uint64 // launch order of the rows, or 0
}

func (pp passPtrs) apply(gp *genParams) {
	gp.rowStart, gp.kvBlock, gp.level, gp.order = pp.rowStart, pp.kvBlock, pp.level, pp.order
	gp.qOrder, gp.kvOrder, gp.kvStart, gp.rowKV = pp.qOrder, pp.kvOrder, pp.kvStart, pp.rowKV
	gp.rowAfter, gp.after, gp.tau = pp.rowAfter, pp.after, pp.tau
}

// genBufs are the gathering kernel's device allocations: the Init pass's
// and the main pass's plans, the pooled pyramid and the per-query states.
type genBufs struct {
	pass            [2]passBufs
	pk, pv          deviceBuf
	stM, stL, stAcc deviceBuf
}

func (b *genBufs) all() []*deviceBuf {
	out := []*deviceBuf{&b.pk, &b.pv, &b.stM, &b.stL, &b.stAcc}
	for i := range b.pass {
		p := &b.pass[i]
		out = append(out, &p.rows, &p.kv, &p.lvl, &p.qOrder, &p.kvOrder, &p.kvStart, &p.rowKV, &p.rowAfter, &p.order)
	}
	return out
}

func (b *genBufs) free(c *driver.Ctx) error {
	var errs []error
	for _, d := range b.all() {
		errs = append(errs, c.Free(d.ptr))
		*d = deviceBuf{}
	}
	for i := range b.pass {
		b.pass[i].plan = nil
	}
	return errors.Join(errs...)
}

// put uploads xs into d (grown as needed) and returns its address, or 0
// for an empty slice.
func put[T any](c *driver.Ctx, d *deviceBuf, xs []T, size int64) (uint64, error) {
	if len(xs) == 0 {
		return 0, nil
	}
	if err := d.ensure(c, int64(len(xs))*size); err != nil {
		return 0, err
	}
	if err := driver.CopyIn(c, d.ptr, xs); err != nil {
		return 0, err
	}
	return uint64(d.ptr), nil
}

// uploadPass uploads plan p's rows, levels, orders and stop counts into
// pb, unless pb holds p already, and points gp at them.
func uploadPass(c *driver.Ctx, pb *passBufs, p *plan.Plan, gp *genParams) error {
	if pb.plan != p {
		pb.plan = nil
		pp, err := pb.upload(c, p)
		if err != nil {
			return err
		}
		pb.plan, pb.ptrs = p, pp
	}
	pb.ptrs.apply(gp)
	return nil
}

func (pb *passBufs) upload(c *driver.Ctx, p *plan.Plan) (passPtrs, error) {
	var pp passPtrs
	rows := make([]int32, len(p.RowStart))
	for i, r := range p.RowStart {
		rows[i] = int32(r)
	}
	var err error
	if pp.rowStart, err = put(c, &pb.rows, rows, 4); err != nil {
		return pp, err
	}
	kv := p.KVBlock
	if len(kv) == 0 {
		kv = []int32{0} // the kernel never reads it, but wants an address
	}
	if pp.kvBlock, err = put(c, &pb.kv, kv, 4); err != nil {
		return pp, err
	}
	if pp.order, err = put(c, &pb.order, genRowOrder(p), 4); err != nil {
		return pp, err
	}
	if hasLevels(p) {
		lv := make([]uint8, len(p.Level))
		for i, l := range p.Level {
			lv[i] = uint8(l)
		}
		if pp.level, err = put(c, &pb.lvl, lv, 1); err != nil {
			return pp, err
		}
	}
	if o := p.Order; o != nil {
		if pp.qOrder, err = put(c, &pb.qOrder, o.Query, 4); err != nil {
			return pp, err
		}
		if o.RowKV != nil && len(o.KVStart) > 0 {
			starts := make([]int32, len(o.KVStart))
			for i, s := range o.KVStart {
				starts[i] = int32(s)
			}
			kvo := o.KV
			if len(kvo) == 0 {
				kvo = []int32{0}
			}
			if pp.kvOrder, err = put(c, &pb.kvOrder, kvo, 4); err != nil {
				return pp, err
			}
			if pp.kvStart, err = put(c, &pb.kvStart, starts, 4); err != nil {
				return pp, err
			}
			if pp.rowKV, err = put(c, &pb.rowKV, o.RowKV, 4); err != nil {
				return pp, err
			}
		}
	}
	if s := p.Stop; s != nil {
		pp.after, pp.tau = int32(s.After), s.Tau
		if pp.rowAfter, err = put(c, &pb.rowAfter, s.RowAfter, 4); err != nil {
			return pp, err
		}
	}
	return pp, nil
}

// genRowOrder is the order in which the gathering kernel's persistent
// CTAs take plan p's rows: each head's rows longest first, as rowOrder
// gives the warp-specialized dense kernel, so that the short rows fill
// the gaps at the end; nil (head by head, each head's last query block
// first) when the rows are all alike. A row's length is its listed
// entries, or with levels its key slots (a pooled entry of a block of n
// keys at level h has ⌈n/2^(h−1)⌉, a skipped one none).
func genRowOrder(p *plan.Plan) []int32 {
	if !hasLevels(p) {
		if rowsAlike(p.RowStart) {
			return nil
		}
		return longestFirst(p.RowStart, max(p.QBlocks(), 1))
	}
	// Cumulative slots, so that longestFirst reads row lengths from them.
	g := p.Geometry
	slots := make([]int, len(p.RowStart))
	for r := range len(p.RowStart) - 1 {
		n := slots[r]
		for e := p.RowStart[r]; e < p.RowStart[r+1]; e++ {
			if lv := p.Level[e]; lv != plan.Skip {
				keys := min(p.BlockK, g.Nk-int(p.KVBlock[e])*p.BlockK)
				n += (keys + lv.Pool() - 1) / lv.Pool()
			}
		}
		slots[r+1] = n
	}
	if rowsAlike(slots) {
		return nil
	}
	return longestFirst(slots, max(p.QBlocks(), 1))
}

// buildPyramid pools the staged keys and values of job j into levels
// 2..top in gb (PSA §3) and records where each level starts in gp.
func (e *Engine) buildPyramid(c *driver.Ctx, j *job, top plan.Level, gp *genParams, gb *genBufs) error {
	p, g := j.p, j.p.Geometry
	kb := p.KBlocks()
	var rows int64
	for lv := plan.Level(2); lv <= top; lv++ {
		w := (p.BlockK + lv.Pool() - 1) / lv.Pool()
		gp.lvlRow[lv], gp.lvlWidth[lv] = rows, int32(w)
		rows += int64(g.B*g.Hkv) * int64(kb) * int64(w)
	}
	hd := int64(j.v.headDim)
	if err := gb.pk.ensure(c, rows*hd*2); err != nil {
		return err
	}
	if err := gb.pv.ensure(c, rows*hd*2); err != nil {
		return err
	}
	gp.pk, gp.pv = uint64(gb.pk.ptr), uint64(gb.pv.ptr)
	fn, err := e.auxFunction(c, "pyramid.cu", "pyramid")
	if err != nil {
		return err
	}
	// One launch for every level of K and V: a thread per group of the
	// coarsest level's tokens and 8-element column chunk, grid row 0 K, 1 V.
	a := pyramidArgs{
		src: [2]uint64{gp.k, gp.v}, sb: [2]int64{j.k.sb, j.vv.sb}, sh: [2]int64{j.k.sh, j.vv.sh}, sn: [2]int64{j.k.sn, j.vv.sn},
		dst: [2]uint64{gp.pk, gp.pv}, lvlRow: gp.lvlRow, lvlWidth: gp.lvlWidth,
		b: int32(g.B), h: int32(g.Hkv), nk: int32(g.Nk), blockK: int32(p.BlockK), kBlocks: int32(kb),
		top: int32(top), headDim: int32(hd), bf16: pyramidBF16(j.dt)}
	groups := (p.BlockK + top.Pool() - 1) / top.Pool()
	n := int(int64(g.B*g.Hkv) * int64(kb) * int64(groups) * hd / 8)
	grid, block := grid1(n, 256)
	grid.Y = 2
	return c.Launch(fn, grid, block, 0, driver.Arg(&a))
}

// launchGen runs job j on the gathering kernel: the pyramid first when a
// pass pools, then the Init plan's pass saving its states, then the plan's
// own pass, with the plans and states in gb. The inputs are staged and
// j.params points at them; the caller zeroes the counters.
func (e *Engine) launchGen(c *driver.Ctx, j *job, gb *genBufs) error {
	p, g := j.p, j.p.Geometry
	gp := genParams{kernelParams: *j.params, kBlocks: int32(p.KBlocks())}
	gp.order, gp.split = 0, 1
	head := e.order == OrderHead // no uploaded order: head by head
	top := maxPlanLevel(p)
	if j.levels != nil {
		top = max(top, j.levels.top)
	}
	if top > plan.Full {
		if err := e.buildPyramid(c, j, top, &gp, gb); err != nil {
			return err
		}
	}
	if p.Init != nil {
		n := int64(g.B) * int64(g.Hq) * int64(g.Nq)
		for _, s := range []struct {
			buf *deviceBuf
			n   int64
			dst *uint64
		}{{&gb.stM, n, &gp.stM}, {&gb.stL, n, &gp.stL}, {&gb.stAcc, n * int64(g.Dv), &gp.stAcc}} {
			if err := s.buf.ensure(c, s.n*4); err != nil {
				return err
			}
			*s.dst = uint64(s.buf.ptr)
		}
		vi, err := initVariant(p, j.v)
		if err != nil {
			return err
		}
		if err := uploadPass(c, &gb.pass[0], p.Init, &gp); err != nil {
			return err
		}
		if head {
			gp.order = 0
		}
		gp.tickets = j.params.counters + 8*genInitTickets
		if err := e.launchPass(c, vi, p, &gp); err != nil {
			return err
		}
	}
	if j.levels != nil {
		// A device plan: its CSR arrays are j.params', its levels here,
		// its rows head by head (their lengths are on the device).
		gp.level, gp.order = j.levels.ptr, j.params.order
	} else if err := uploadPass(c, &gb.pass[1], p, &gp); err != nil {
		return err
	}
	if head {
		gp.order = 0
	}
	gp.tickets = j.params.counters + 8*genTickets
	return e.launchPass(c, j.v, p, &gp)
}

// launchPass launches one pass of the gathering kernel: under ws a
// persistent grid of at most one CTA per multiprocessor, whose CTAs take
// the plan rows in gp's order and draw tickets from gp.tickets; else a
// CTA per plan row.
func (e *Engine) launchPass(c *driver.Ctx, v variant, p *plan.Plan, gp *genParams) error {
	fn, err := e.function(c, v)
	if err != nil {
		return err
	}
	g := p.Geometry
	grid := driver.Dim3{X: uint32(p.QBlocks()), Y: uint32(g.B * g.Hq), Z: 1}
	if grid.X == 0 || grid.Y == 0 {
		return nil
	}
	if v.gen.ws {
		grid = driver.Dim3{X: uint32(min(p.QBlocks()*g.B*g.Hq, e.dev.SMs)), Y: 1, Z: 1}
	}
	return c.Launch(fn, grid, driver.Dim3{X: uint32(v.threads()), Y: 1, Z: 1}, v.sharedBytes(), driver.Arg(gp))
}

// readGenStats reads the gathering kernel's counters at counters back as
// the stats of plan p, whose dense pass has dense blocks.
func readGenStats(c *driver.Ctx, counters driver.Ptr, p *plan.Plan, dense int64) (plan.Stats, error) {
	n := make([]uint64, genCounters)
	if err := driver.CopyOut(c, n, counters); err != nil {
		return plan.Stats{}, err
	}
	return genStats(n, p, dense), nil
}
