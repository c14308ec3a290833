package cuda

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
)

// Plans made of other plans (package method/auto), on the device: auto's
// per-head choices and Compose's pooled fill. Package cuda does not import
// method/auto (it imports the CPU executor for tuning); it recognizes the
// two by the methods they export for it.

// choosingPlanner is a planner that takes each query head's rows from one
// of several planners (auto.Planner, and the CLI's wrapper of it):
// Choices returns them and each head's index, or none when the choice is
// made on the CPU (auto tuning on its input).
type choosingPlanner interface {
	plan.Planner
	Choices(t plan.Tiling) (planners []plan.Planner, owner []int, err error)
}

// composedPlanner is auto.Compose: a binary planner whose skipped blocks
// the pooled planner's levels fill.
type composedPlanner interface {
	plan.Planner
	Parts() (binary, pooled plan.Planner)
}

// mergeArgs mirrors struct MergeArgs in kernels/plan_merge.cu.
type mergeArgs struct {
	len, lists, start, lv, owner, dstLv uint64
	idx                                 int32
}

// composeArgs mirrors struct ComposeArgs in kernels/plan_merge.cu.
type composeArgs struct {
	bLen, bLists, bStart, bLv uint64
	pLen, pLists, pStart, pLv uint64
	lv                        uint64
}

// subPlanner is a device planner that plans into buffers of its own,
// with scratch of its own: two planners of one method (two sparge knobs)
// keep their scratch and cached uploads apart. Its buffers are entered in
// the runner's scratch pool under its tag, so the runner frees them.
//
// One subPlanner may serve several users in one plan call (auto's psa
// heads and the pooled side of its compositions): it plans once per
// call, and ran, cleared by the owner of the call, says it has.
type subPlanner struct {
	dp   devicePlanner
	src  plan.Planner // what it plans, to find equal ones
	name string       // the method, for errors
	tag  string
	pool scratchPool
	ran  bool    // out holds this plan call's rows
	out  subRows // valid while ran
}

// subRows is where a subPlanner's plan lies: row lengths and lists as a
// devicePlanner writes them, and for a pooling planner the CSR row starts
// and per-entry levels.
type subRows struct {
	len, lists, start, lv driver.Ptr
}

// newSubPlanner returns the device planner of p, refusing what a merge
// of rows cannot carry.
func newSubPlanner(p plan.Planner, tag, what string) (*subPlanner, error) {
	dp, err := devicePlannerFor(p)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", what, p.Name(), err)
	}
	if _, ok := dp.(passPlanner); ok {
		return nil, fmt.Errorf("%w: %s (%s) plans token orders and passes (S2O), which a merge of plan rows cannot carry", ErrUnsupported, what, p.Name())
	}
	return &subPlanner{dp: dp, src: p, name: p.Name(), tag: tag}, nil
}

// top is the coarsest level the planner's plans may hold.
func (s *subPlanner) top() plan.Level {
	if lp, ok := s.dp.(levelPlanner); ok {
		return max(lp.topLevel(), plan.Full)
	}
	return plan.Full
}

// header is the planner's header, checked as auto's merge checks a
// sub-plan: the tiling asked for, and no orders, stop rule or first pass.
func (s *subPlanner) header(t plan.Tiling, what string) (*plan.Plan, error) {
	h, err := s.dp.header(t)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", what, s.name, err)
	}
	if h.Tiling != t || h.Order != nil || h.Stop != nil || h.Init != nil {
		return nil, fmt.Errorf("%w: %s (%s) plans another tiling, token orders, a stop rule or a first pass, which a merge of plan rows cannot carry", ErrUnsupported, what, s.name)
	}
	return h, nil
}

// run plans in's inputs into the sub-planner's buffers, unless it ran
// already in this plan call; for a pooling planner it also scans the row
// lengths and writes the levels in CSR order.
func (s *subPlanner) run(c *driver.Ctx, in *planInput) (out subRows, err error) {
	if s.ran {
		return s.out, nil
	}
	defer s.adopt(in.scratch)
	defer func() { s.out, s.ran = out, err == nil }()
	rows := int64(in.rows())
	sin := *in
	sin.scratch = &s.pool
	if sin.rowLen, err = s.pool.get(c, "own.len", max(rows*4, 4)); err != nil {
		return out, err
	}
	if sin.lists, err = s.pool.get(c, "own.lists", max(rows*int64(in.stride)*4, 4)); err != nil {
		return out, err
	}
	if err := s.dp.plan(c, &sin); err != nil {
		return out, fmt.Errorf("%s: %w", s.name, err)
	}
	out = subRows{len: sin.rowLen, lists: sin.lists}
	lp, ok := s.dp.(levelPlanner)
	if !ok || lp.topLevel() <= plan.Full {
		return out, nil
	}
	if out.start, err = s.pool.get(c, "own.start", (rows+1)*4); err != nil {
		return out, err
	}
	if err := csrScan(c, in.e, out.len, out.start, int(rows)); err != nil {
		return out, err
	}
	if out.lv, err = s.pool.get(c, "own.lv", max(rows*int64(in.stride), 1)); err != nil {
		return out, err
	}
	if err := lp.levels(c, &sin, out.start, out.lv); err != nil {
		return out, fmt.Errorf("%s: levels: %w", s.name, err)
	}
	return out, nil
}

// adopt enters the sub-planner's buffers in parent under its tag: the
// same buffers, so that whoever frees parent frees them.
func (s *subPlanner) adopt(parent *scratchPool) {
	if parent.bufs == nil {
		parent.bufs = map[string]*deviceBuf{}
	}
	for name, b := range s.pool.bufs {
		parent.bufs[s.tag+"/"+name] = b
	}
}

// csrScan writes rowStart[0..rows] = the exclusive prefix sums of rowLen
// (kernels/runtime.cu).
func csrScan(c *driver.Ctx, e *Engine, rowLen, rowStart driver.Ptr, rows int) error {
	fn, err := e.auxFunction(c, "runtime.cu", "csr_scan")
	if err != nil {
		return err
	}
	rl, rs, n := uint64(rowLen), uint64(rowStart), int32(rows)
	return c.Launch(fn, driver.Dim3{X: 1, Y: 1, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0, driver.Arg(&rl), driver.Arg(&rs), driver.Arg(&n))
}

// levelsCSR copies positional levels ([rows][stride], beside the lists)
// to the CSR entries that rowStart places.
func levelsCSR(c *driver.Ctx, in *planInput, pos, rowStart, level driver.Ptr) error {
	fn, err := in.e.auxFunction(c, "plan_merge.cu", "levels_csr")
	if err != nil {
		return err
	}
	a := in.args()
	p, rs, lv := uint64(pos), uint64(rowStart), uint64(level)
	return c.Launch(fn, driver.Dim3{X: uint32(max(a.rows, 1)), Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
		driver.Arg(&a), driver.Arg(&p), driver.Arg(&rs), driver.Arg(&lv))
}

// autoPlanner is auto.Planner with a profile on the device: each distinct
// choice of the layer plans every head with its own device planner, into
// its own buffers, and merge_rows (kernels/plan_merge.cu) copies the rows
// of the heads it owns, with their levels when the merged plan pools. The
// λ filters merge per head by plan.MergeFilters, as on the CPU; one
// choice for every head is that choice's planner, its plan and filter
// unchanged, as on the CPU. The merge copies integers, so the plan is the
// CPU's exactly where each choice's device plan is.
//
// Equal planners plan once per call: a psa choice and the pooled side of
// every composition at the same PSA settings share one plan, and so do a
// binary choice and a composition's binary side. Each choice plans all
// heads, those it does not own too: a planner's kernels take whole
// tensors, and a strided view cannot pick an arbitrary set of heads. A
// runner owns its planner; the runner serializes calls.
type autoPlanner struct {
	src   choosingPlanner
	subs  []*subPlanner // per choice
	all   []*subPlanner // every sub-planner, compositions' parts too, each once
	owner []int32       // per query head, its index in subs
	at    driver.Ptr    // the scratch buffer owner was last copied to
	lvl   plan.Level    // the coarsest level of any choice
}

// autoScratch names the merged plan's positional levels and the owner
// table in the runner's scratch pool.
const (
	autoLevels = "auto.lvl"
	autoOwner  = "auto.owner"
)

// newAutoPlanner returns the device planner of p; its choices are made
// for the tiling the runner gives header.
func newAutoPlanner(p choosingPlanner) (devicePlanner, error) {
	return &autoPlanner{src: p}, nil
}

func (p *autoPlanner) header(t plan.Tiling) (*plan.Plan, error) {
	planners, owner, err := p.src.Choices(t)
	if err != nil {
		return nil, err
	}
	if len(planners) == 0 {
		return nil, fmt.Errorf("%w: auto without a profile tunes its heads on the input itself, on the CPU", ErrUnsupported)
	}
	if len(owner) != t.Geometry.Hq {
		return nil, fmt.Errorf("%w: auto chose for %d heads, the input has %d", plan.ErrInvalid, len(owner), t.Geometry.Hq)
	}
	p.subs, p.all, p.owner, p.at, p.lvl = nil, nil, make([]int32, len(owner)), 0, plan.Full
	own := make([]*plan.Filter, len(owner))
	hdrs := make([]*plan.Plan, len(planners))
	for i, pl := range planners {
		h := slices.Index(owner, i)
		if h < 0 {
			return nil, fmt.Errorf("%w: auto's choice %d (%s) has no head", plan.ErrInvalid, i, pl.Name())
		}
		what := fmt.Sprintf("auto head %d", h)
		s, err := p.shared(pl, what)
		if err != nil {
			return nil, err
		}
		if hdrs[i], err = s.header(t, what); err != nil {
			return nil, err
		}
		p.subs = append(p.subs, s)
		p.lvl = max(p.lvl, s.top())
	}
	for h, i := range owner {
		if i < 0 || i >= len(planners) {
			return nil, fmt.Errorf("%w: auto head %d takes choice %d of %d", plan.ErrInvalid, h, i, len(planners))
		}
		p.owner[h] = int32(i)
		own[h] = hdrs[i].Filter
	}
	if len(p.subs) == 1 {
		return hdrs[0], nil // the CPU's plan is that choice's own
	}
	f, err := plan.MergeFilters(own)
	if err != nil {
		return nil, err
	}
	return &plan.Plan{Tiling: t, Filter: f}, nil
}

// shared returns the sub-planner of pl: one made before for an equal
// planner, else a new one (a composition's parts shared the same way).
func (p *autoPlanner) shared(pl plan.Planner, what string) (*subPlanner, error) {
	for _, s := range p.all {
		if reflect.DeepEqual(s.src, pl) {
			return s, nil
		}
	}
	var s *subPlanner
	if cp, ok := pl.(composedPlanner); ok {
		dp, err := newComposeFrom(cp, func(part plan.Planner, side string) (*subPlanner, error) {
			return p.shared(part, what+" "+side)
		})
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", what, pl.Name(), err)
		}
		dp.shared = true
		// Tagged after its parts, so that every tag names one sub-planner.
		s = &subPlanner{dp: dp, src: pl, name: pl.Name(), tag: fmt.Sprintf("auto.%d", len(p.all))}
	} else {
		var err error
		if s, err = newSubPlanner(pl, fmt.Sprintf("auto.%d", len(p.all)), what); err != nil {
			return nil, err
		}
	}
	p.all = append(p.all, s)
	return s, nil
}

func (p *autoPlanner) sparse() bool {
	for _, s := range p.subs {
		if s.dp.sparse() {
			return true
		}
	}
	return false
}

func (p *autoPlanner) topLevel() plan.Level { return p.lvl }

// plan plans each choice and merges the rows of its heads.
func (p *autoPlanner) plan(c *driver.Ctx, in *planInput) error {
	if len(p.subs) == 0 {
		return fmt.Errorf("%w: auto planner without a header", plan.ErrInvalid)
	}
	for _, s := range p.all {
		s.ran = false // this call's inputs are new
	}
	if len(p.subs) == 1 {
		return p.subs[0].dp.plan(c, in)
	}
	owner, err := in.scratch.get(c, autoOwner, int64(len(p.owner))*4)
	if err != nil {
		return err
	}
	if owner != p.at {
		if err := driver.CopyIn(c, owner, p.owner); err != nil {
			return err
		}
		if err := c.Sync(); err != nil { // the copy is on the legacy stream; the kernels may run on another
			return err
		}
		p.at = owner
	}
	var dst driver.Ptr
	if p.lvl > plan.Full {
		if dst, err = in.scratch.get(c, autoLevels, max(int64(in.rows())*int64(in.stride), 1)); err != nil {
			return err
		}
	}
	fn, err := in.e.auxFunction(c, "plan_merge.cu", "merge_rows")
	if err != nil {
		return err
	}
	a := in.args()
	for i, s := range p.subs {
		r, err := s.run(c, in)
		if err != nil {
			return err
		}
		m := mergeArgs{len: uint64(r.len), lists: uint64(r.lists), start: uint64(r.start), lv: uint64(r.lv),
			owner: uint64(owner), dstLv: uint64(dst), idx: int32(i)}
		if err := c.Launch(fn, driver.Dim3{X: uint32(max(a.rows, 1)), Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0, driver.Arg(&a), driver.Arg(&m)); err != nil {
			return err
		}
	}
	return nil
}

// levels writes the merged plan's levels in CSR order.
func (p *autoPlanner) levels(c *driver.Ctx, in *planInput, rowStart, level driver.Ptr) error {
	if len(p.subs) == 1 {
		lp, ok := p.subs[0].dp.(levelPlanner)
		if !ok {
			return fmt.Errorf("%w: auto's %s plans no levels", plan.ErrInvalid, p.subs[0].name)
		}
		return lp.levels(c, in, rowStart, level)
	}
	pos, err := in.scratch.get(c, autoLevels, max(int64(in.rows())*int64(in.stride), 1))
	if err != nil {
		return err
	}
	return levelsCSR(c, in, pos, rowStart, level)
}

// composePlanner is auto.Compose on the device: the binary and the
// pooled planner plan into buffers of their own, and compose_rows
// (kernels/plan_merge.cu) writes each row as Compose.Plan does, the
// binary plan's kept blocks then the pooled plan's other blocks at a
// pooled level. The binary plan's λ filter carries over. The composition
// is integer work, so the plan is the CPU's exactly where the two device
// plans are.
type composePlanner struct {
	binary, pooled *subPlanner
	// shared: the parts belong to an enclosing auto planner, which
	// clears their ran flags once per plan call; else plan does.
	shared bool
}

// composeLevels names the composed plan's positional levels in the
// runner's (or the enclosing planner's) scratch pool.
const composeLevels = "compose.lvl"

// newComposePlanner returns the device planner of a composition. Its
// binary planner must list blocks in ascending order, as every method's
// device planner does; a nested composition or a host plan is refused.
func newComposePlanner(p composedPlanner) (devicePlanner, error) {
	return newComposeFrom(p, func(part plan.Planner, side string) (*subPlanner, error) {
		return newSubPlanner(part, "compose."+side, "the "+side+" planner")
	})
}

// newComposeFrom is newComposePlanner with the parts' sub-planners from
// sub (side "binary" or "pooled").
func newComposeFrom(p composedPlanner, sub func(part plan.Planner, side string) (*subPlanner, error)) (*composePlanner, error) {
	bin, pool := p.Parts()
	if bin == nil || pool == nil {
		return nil, fmt.Errorf("%w: a composition needs a binary and a pooled planner", plan.ErrInvalid)
	}
	b, err := sub(bin, "binary")
	if err != nil {
		return nil, err
	}
	switch b.dp.(type) {
	case *composePlanner, *autoPlanner, fixedPlanner:
		return nil, fmt.Errorf("%w: a composition's binary planner %s does not list its blocks in ascending order on the device", ErrUnsupported, bin.Name())
	}
	q, err := sub(pool, "pooled")
	if err != nil {
		return nil, err
	}
	return &composePlanner{binary: b, pooled: q}, nil
}

func (p *composePlanner) header(t plan.Tiling) (*plan.Plan, error) {
	bh, err := p.binary.header(t, "the binary planner")
	if err != nil {
		return nil, err
	}
	if _, err := p.pooled.header(t, "the pooled planner"); err != nil {
		return nil, err
	}
	return &plan.Plan{Tiling: t, Filter: bh.Filter}, nil
}

func (*composePlanner) sparse() bool { return true }

// topLevel is at least 2: the pooled plan's blocks are raised to it.
func (p *composePlanner) topLevel() plan.Level {
	return max(2, p.binary.top(), p.pooled.top())
}

// plan plans both and composes their rows.
func (p *composePlanner) plan(c *driver.Ctx, in *planInput) error {
	if !p.shared {
		p.binary.ran, p.pooled.ran = false, false
	}
	br, err := p.binary.run(c, in)
	if err != nil {
		return err
	}
	pr, err := p.pooled.run(c, in)
	if err != nil {
		return err
	}
	lv, err := in.scratch.get(c, composeLevels, max(int64(in.rows())*int64(in.stride), 1))
	if err != nil {
		return err
	}
	fn, err := in.e.auxFunction(c, "plan_merge.cu", "compose_rows")
	if err != nil {
		return err
	}
	a := in.args()
	m := composeArgs{bLen: uint64(br.len), bLists: uint64(br.lists), bStart: uint64(br.start), bLv: uint64(br.lv),
		pLen: uint64(pr.len), pLists: uint64(pr.lists), pStart: uint64(pr.start), pLv: uint64(pr.lv), lv: uint64(lv)}
	const warps = 4 // rows per CTA, a warp each
	grid := driver.Dim3{X: uint32(max((int(a.rows)+warps-1)/warps, 1)), Y: 1, Z: 1}
	return c.Launch(fn, grid, driver.Dim3{X: 32 * warps, Y: 1, Z: 1}, 0, driver.Arg(&a), driver.Arg(&m))
}

// levels writes the composed plan's levels in CSR order.
func (p *composePlanner) levels(c *driver.Ctx, in *planInput, rowStart, level driver.Ptr) error {
	pos, err := in.scratch.get(c, composeLevels, max(int64(in.rows())*int64(in.stride), 1))
	if err != nil {
		return err
	}
	return levelsCSR(c, in, pos, rowStart, level)
}
