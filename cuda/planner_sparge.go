package cuda

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"unsafe"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// spargePlanner is sparge.Planner on the device (kernels/plan_sparge.cu):
// SpargeAttn's prediction (§3.2) in two launches, block pooling with
// CosSim for Q and K (K once per KV head; sparge_pool_vec where
// spargeVecPool allows), then per plan row the compressed logits, the θ
// judge, the compressed softmax, TopCdf or top-k (a bitonic sort, or from
// spargeSearchMin key blocks a sort in registers or a radix select of the
// last kept block), the fix, diagonal and sink blocks. Its plans equal the CPU planner's row for row
// except where a block's self-similarity lies within the float32 CosSim's
// error bound of θ (spargeSimTol in cuda/selftest): the pooled means,
// logits, softmax and selection repeat the CPU's float64 operations in the
// same order, the self-similarities are float32. Each head's
// τ or top-k and θ come from sparge.Planner.HeadParams; the λ filter, one
// λ or one per head, from sparge.Planner.Header, which the attention
// kernels apply (row groups of 64 on the warp-specialized kernel, other
// multiples of 16 on the mma.sync one).
//
// A runner owns its planner; the runner serializes its calls.
type spargePlanner struct {
	p     sparge.Planner
	heads []spargeHead
	// headsAt is the scratch buffer the heads were last copied to; they are
	// copied once per runner.
	headsAt driver.Ptr
	launch  spargeLaunch // reused from call to call
	// prepared is the input launch was prepared for: a call with the same
	// views, rows and scratch launches it as it is, with none of
	// prepare's host work before the first kernel.
	prepared spargeInput
	// searchMin overrides spargeSearchMin when positive, rows sets the
	// plan rows of a rows block (1, 2, 4, or 8 for sparge_rows_search)
	// when positive, and scalarPool keeps sparge_pool where
	// sparge_pool_vec would run (timing and layout tests).
	searchMin, rows int
	scalarPool      bool
	// vecStages and vecBlocks override spargeVecStages and
	// spargeVecBlocksPerSM when positive, and vecNoComp makes
	// sparge_pool_vec only load (timing tests).
	vecStages, vecBlocks int
	vecNoComp            bool
}

// spargeHead mirrors struct SpargeHead in kernels/plan_sparge.cu.
type spargeHead struct {
	theta, cdf, topk float64
}

// spargeThreads is the block size of sparge_rows (__launch_bounds__);
// sparge_pool runs spargePoolWarps warps a block (POOL_WARPS), one block of
// tokens a block.
const (
	spargeThreads   = 128
	spargePoolWarps = 4
)

// sparge_pool_vec (kernels/sparge_pool.cuh) runs spargeVecThreads threads a
// block, with spargeVecStages blocks of at most spargeVecTokens tokens and
// spargeVecStage bytes staged (VPOOL_THREADS, VPOOL_STAGES, VPOOL_TOK,
// VPOOL_STAGE), and spargeVecBlocksPerSM blocks an SM (its
// __launch_bounds__).
const (
	spargeVecThreads     = 256
	spargeVecStage       = 32768
	spargeVecStages      = 2
	spargeVecTokens      = 256
	spargeVecBlocksPerSM = 3
)

// spargeVecPool reports whether sparge_pool_vec can pool q and k: both
// 16-bit, their rows 16-byte aligned (pointer and every stride a multiple
// of 8 elements), a head dimension of 8 times a power of two up to 128,
// and blocks of at most spargeVecTokens tokens and spargeVecStage bytes.
func spargeVecPool(q, k view, d, bq, bk int) bool {
	aligned := func(v view) bool {
		dt := tensor.DType(v.dtype)
		return (dt == tensor.BFloat16 || dt == tensor.Float16) && v.ptr%16 == 0 && v.sb%8 == 0 && v.sh%8 == 0 && v.sn%8 == 0
	}
	lanes := d / 8
	return aligned(q) && aligned(k) && d%8 == 0 && lanes&(lanes-1) == 0 && d <= 128 &&
		max(bq, bk) <= spargeVecTokens && max(bq, bk)*d*2 <= spargeVecStage
}

// spargeSearchMin is the row length, in key blocks, from which
// sparge_rows_search replaces sparge_rows: its radix select of the last
// kept block takes at most 16 passes over the row (usually a few: it
// stops at a digit holding one entry), where the bitonic sort takes
// log²(KBlocks)/2 steps. (Before the radix select, a binary search of ~62
// passes took, on an H100 at B=1 Hq=32 Hkv=8 D=128 bf16 causal, 52 µs
// against the sort's 36 at 128 key blocks (8K) and 4.94 ms against 8.86 at
// 2048 (128K).) With the radix select, 128 key blocks take 30 µs against
// the sort's 37 causal, and 28 against 39 non-causal (H100, same shape,
// TestSpargePlanTimes); shorter rows were not timed and keep the sort.
const spargeSearchMin = 128

// spargeSearchBlocksPerSM is the sparge_rows_search blocks an SM that
// spargeSearchLayout aims for.
const spargeSearchBlocksPerSM = 3

// spargeSearchThreads is sparge_rows_search's block size (ST,
// SEARCH_THREADS) for rows of nkb key blocks: 128 where a row is at most
// spargeSortedMax key blocks (its search a sort in registers, its logits a
// few passes), else 256, whose 8 warps share a block's logits.
func spargeSearchThreads(nkb int) int {
	if nkb <= spargeSortedMax {
		return 128
	}
	return 256
}

// spargeSortedMax is the longest row whose last kept block
// sparge_rows_search finds by a sort in registers (SORTED_MAX) rather than
// the radix select.
const spargeSortedMax = 128

// spargeSearchRowBytes is sparge_rows_search's dynamic shared memory per
// plan row besides its keys: select_last's mass (u64) and count (u16)
// histograms, 16 digits × HP lanes (kernels/plan_sparge.cu).
const spargeSearchRowBytes = 16 * 33 * (8 + 2)

// newSpargePlanner returns the device planner of p.
func newSpargePlanner(p sparge.Planner) (devicePlanner, error) {
	return &spargePlanner{p: p}, nil
}

func (s *spargePlanner) header(t plan.Tiling) (*plan.Plan, error) {
	h, err := s.p.Header(t)
	if err != nil {
		return nil, err
	}
	params, err := s.p.HeadParams(t.Geometry.Hq)
	if err != nil {
		return nil, err
	}
	if d := t.Geometry.D; d > 128 {
		return nil, fmt.Errorf("%w: the sparge device planner takes head dims up to 128, not %d", ErrUnsupported, d)
	}
	if kBlocks(t) >= 1<<20 { // sparge.mass sums at most 2^20 masses of 2^44
		return nil, fmt.Errorf("%w: %d key blocks; the sparge device planner takes fewer than 2^20", ErrUnsupported, kBlocks(t))
	}
	s.heads = make([]spargeHead, len(params))
	for i, hp := range params {
		s.heads[i] = spargeHead{theta: hp.Theta, cdf: hp.CDF, topk: hp.TopK}
	}
	return h, nil
}

func (*spargePlanner) sparse() bool { return true }

// spargeRowsLayout returns the plan rows per sparge_rows block (SR), the sort
// width pmax and the block's dynamic shared bytes: as many rows as fit in
// maxShared, at most 4.
func spargeRowsLayout(nkb, d, maxShared int) (sr, pmax, dyn int, err error) {
	pmax = 1
	for pmax < nkb {
		pmax <<= 1
	}
	kpad := (nkb + 15) &^ 15
	for sr = 4; sr >= 1; sr /= 2 {
		dyn = sr * (pmax*12 + kpad)
		static := sr*d*8 + 1024 // q̄ and the per-row scalars
		if dyn+static <= maxShared {
			return sr, pmax, dyn, nil
		}
	}
	return 0, 0, 0, fmt.Errorf("%w: %d key blocks need %d bytes of shared memory per plan row in the sparge device planner, the device allows %d", ErrUnsupported, nkb, pmax*12+kpad, maxShared)
}

// spargeSearchLayout returns the plan rows per sparge_rows_search block
// (SR, at most 8) and its dynamic shared bytes, one 8-byte key per row and
// key block and spargeSearchRowBytes per row, for rows of nkb key blocks,
// per plan rows of each of nbkv KV heads, on sms SMs: the most rows that
// leave room for two blocks an SM and still make spargeSearchBlocksPerSM
// blocks an SM, else the fewest that leave that room (the most blocks),
// else the most that fit at all. Rows per block matter: each block reads
// its key blocks' float64 means once for all its rows (at 128K, 1 MB a
// block on average, causal), and its select is one warp per row; but the
// blocks run in one wave at 8K (256 of 8 rows, B=1, Hkv=8), where fewer
// rows a block spread the work more evenly over the SMs.
func spargeSearchLayout(nkb, per, nbkv, sms, maxShared int) (sr, dyn int, err error) {
	const static = 1024 // the per-row scalars, with room to spare
	for _, budget := range []int{maxShared / 2, maxShared} {
		fit := 0
		for sr = 8; sr >= 1; sr /= 2 {
			if sr*(nkb*8+spargeSearchRowBytes)+static > budget {
				continue
			}
			fit = sr
			if nbkv*((per+sr-1)/sr) >= spargeSearchBlocksPerSM*max(sms, 1) {
				break
			}
		}
		if fit > 0 {
			return fit, fit * (nkb*8 + spargeSearchRowBytes), nil
		}
	}
	return 0, 0, fmt.Errorf("%w: %d key blocks need %d bytes of shared memory per plan row in the sparge device planner, the device allows %d", ErrUnsupported, nkb, nkb*8+spargeSearchRowBytes+1024, maxShared)
}

// spargeInput identifies what a prepared launch reads and writes.
type spargeInput struct {
	q, k          view
	t             plan.Tiling
	rowLen, lists driver.Ptr
	scratch       *scratchPool
}

func (s *spargePlanner) plan(c *driver.Ctx, in *planInput) error {
	key := spargeInput{q: in.q, k: in.k, t: in.t, rowLen: in.rowLen, lists: in.lists, scratch: in.scratch}
	l := &s.launch
	if s.prepared != key {
		s.prepared = spargeInput{}
		var err error
		if l, err = s.prepare(c, in); err != nil {
			return err
		}
		s.prepared = key
	}
	if err := l.launchPool(c); err != nil {
		return err
	}
	return l.launchRows(c)
}

// spargeLaunch is one planning call's two launches.
type spargeLaunch struct {
	e                             *Engine
	pool, rows                    driver.Function
	a                             planArgs
	q, k                          view
	qm, qsim, kmt, ksim, headsPtr uint64
	qRows, kRows                  int64
	sr, pmax, dyn                 int
	sink                          int32
	// search: the rows kernel is sparge_rows_search (KBlocks ≥
	// spargeSearchMin), whose last argument is KBlocks, not pmax.
	search  bool
	kBlocks int32
	// threads is sparge_rows_search's block size, sms the SMs its block
	// order is for.
	threads int
	sms     int32
	// vec: the pool kernel is sparge_pool_vec (spargeVecPool), run on
	// poolGrid blocks.
	vec       bool
	poolGrid  int64
	vecStages int
}

// prepare gets the scratch buffers (grown once, then reused), copies the
// heads' parameters on the first call, and finds the kernels.
func (s *spargePlanner) prepare(c *driver.Ctx, in *planInput) (*spargeLaunch, error) {
	t := in.t
	g := t.Geometry
	nqb, nkb := qBlocks(t), kBlocks(t)
	l := &s.launch
	var err error
	searchMin := spargeSearchMin
	if s.searchMin > 0 {
		searchMin = s.searchMin
	}
	l.search, l.kBlocks = nkb >= searchMin, int32(nkb)
	if l.search {
		l.sr, l.dyn, err = spargeSearchLayout(nkb, nqb*g.Group(), g.B*g.Hkv, in.e.dev.SMs, in.e.dev.MaxSharedOptin)
	} else {
		l.sr, l.pmax, l.dyn, err = spargeRowsLayout(nkb, g.D, in.e.dev.MaxSharedOptin)
	}
	if err != nil {
		return nil, err
	}
	if s.rows > 0 {
		// Both layouts' bytes are per row; sparge_rows takes up to 4 rows.
		if l.dyn = l.dyn / l.sr * s.rows; l.dyn+1024+s.rows*g.D*8 > in.e.dev.MaxSharedOptin || (!l.search && s.rows > 4) {
			return nil, fmt.Errorf("%w: %d rows of %d key blocks a sparge rows block", ErrUnsupported, s.rows, nkb)
		}
		l.sr = s.rows
	}
	l.threads = spargeSearchThreads(nkb)
	l.sms = int32(in.e.dev.SMs)
	l.qRows = int64(g.B) * int64(g.Hq) * int64(nqb)
	l.kRows = int64(g.B) * int64(g.Hkv) * int64(nkb)
	var ptr [5]driver.Ptr
	for i, b := range []struct {
		name string
		n    int64
	}{
		{"sparge.qm", l.qRows * int64(g.D) * 8}, {"sparge.qsim", l.qRows * 8},
		{"sparge.kmt", l.kRows * int64(g.D) * 8}, {"sparge.ksim", l.kRows * 8},
		{"sparge.heads", int64(len(s.heads)) * int64(unsafe.Sizeof(spargeHead{}))},
	} {
		if ptr[i], err = in.scratch.get(c, b.name, b.n); err != nil {
			return nil, err
		}
	}
	if ptr[4] != s.headsAt {
		if err := driver.CopyIn(c, ptr[4], s.heads); err != nil {
			return nil, err
		}
		if err := c.Sync(); err != nil { // the copy is on the legacy stream; the kernels may run on another
			return nil, err
		}
		s.headsAt = ptr[4]
	}
	defs := []string{"SD=" + strconv.Itoa(g.D), "SR=" + strconv.Itoa(l.sr), "ST=" + strconv.Itoa(l.threads)}
	l.vec = !s.scalarPool && spargeVecPool(in.q, in.k, g.D, t.BlockQ, t.BlockK)
	pool, poolDefs := "sparge_pool", defs
	if l.vec {
		pool = "sparge_pool_vec"
		bps := spargeVecBlocksPerSM
		l.vecStages = spargeVecStages
		if s.vecStages > 0 || s.vecBlocks > 0 || s.vecNoComp {
			l.vecStages, bps = cmp.Or(s.vecStages, l.vecStages), cmp.Or(s.vecBlocks, bps)
			poolDefs = append(slices.Clone(defs), "VPOOL_STAGES="+strconv.Itoa(l.vecStages), "VPOOL_BLOCKS="+strconv.Itoa(bps))
			if s.vecNoComp {
				poolDefs = append(poolDefs, "VPOOL_NOCOMP=1")
			}
		}
		l.poolGrid = min(l.qRows+l.kRows, int64(max(in.e.dev.SMs, 1))*int64(bps))
	}
	if l.pool, err = in.e.auxFunction(c, "plan_sparge.cu", pool, poolDefs...); err != nil {
		return nil, err
	}
	rows := "sparge_rows"
	if l.search {
		rows = "sparge_rows_search"
	}
	if l.rows, err = in.e.auxFunction(c, "plan_sparge.cu", rows, defs...); err != nil {
		return nil, err
	}
	l.e, l.a, l.q, l.k = in.e, in.args(), in.q, in.k
	l.qm, l.qsim, l.kmt, l.ksim, l.headsPtr = uint64(ptr[0]), uint64(ptr[1]), uint64(ptr[2]), uint64(ptr[3]), uint64(ptr[4])
	l.sink = 0
	if s.p.Sink {
		l.sink = 1
	}
	return l, nil
}

// launchPool pools and judges every query and key block.
func (l *spargeLaunch) launchPool(c *driver.Ctx) error {
	blocks, threads, dyn := l.qRows+l.kRows, uint32(32*spargePoolWarps), 0
	if l.vec {
		blocks, threads, dyn = l.poolGrid, spargeVecThreads, l.vecStages*spargeVecStage
		if err := l.e.raiseDynamicShared(c, l.pool, dyn); err != nil {
			return err
		}
	}
	return c.Launch(l.pool, driver.Dim3{X: uint32(blocks), Y: 1, Z: 1}, driver.Dim3{X: threads, Y: 1, Z: 1}, dyn,
		driver.Arg(&l.a), driver.Arg(&l.q), driver.Arg(&l.k), driver.Arg(&l.qm), driver.Arg(&l.qsim), driver.Arg(&l.kmt), driver.Arg(&l.ksim))
}

// launchRows predicts and writes every plan row.
func (l *spargeLaunch) launchRows(c *driver.Ctx) error {
	if l.dyn > 48<<10 {
		// Runners of other shapes share the compiled kernel: the engine
		// keeps the largest allowance.
		if err := l.e.raiseDynamicShared(c, l.rows, l.dyn); err != nil {
			return err
		}
	}
	per := int(l.a.qBlocks) * int(l.a.hq/l.a.hkv)
	grid := driver.Dim3{X: uint32(int(l.a.b) * int(l.a.hkv) * ((per + l.sr - 1) / l.sr)), Y: 1, Z: 1}
	if l.search {
		return c.Launch(l.rows, grid, driver.Dim3{X: uint32(l.threads), Y: 1, Z: 1}, l.dyn,
			driver.Arg(&l.a), driver.Arg(&l.qm), driver.Arg(&l.qsim), driver.Arg(&l.kmt), driver.Arg(&l.ksim), driver.Arg(&l.headsPtr), driver.Arg(&l.sink),
			driver.Arg(&l.kBlocks), driver.Arg(&l.sms))
	}
	pmax := int32(l.pmax)
	return c.Launch(l.rows, grid, driver.Dim3{X: spargeThreads, Y: 1, Z: 1}, l.dyn,
		driver.Arg(&l.a), driver.Arg(&l.qm), driver.Arg(&l.qsim), driver.Arg(&l.kmt), driver.Arg(&l.ksim), driver.Arg(&l.headsPtr), driver.Arg(&l.sink), driver.Arg(&pmax))
}
