package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/tensor"
)

// The tiling of bm_mass in kernels/block_mass.cuh (BM_T, BM_R, BM_C,
// BM_SPI).
const (
	bmThreads = 256
	bmRows    = 128
	bmCols    = 128
	bmMaxSegs = 16
)

// bmOp mirrors struct BmOp in kernels/block_mass.cuh: one operand of the
// block-mass kernel, 16-bit rows of s tokens.
type bmOp struct {
	hi, lo     uint64
	sb, sh, sn int64
	n, s       int32
	rev, vec   int32
}

// bmArgs mirrors struct BmArgs in kernels/block_mass.cuh.
type bmArgs struct {
	q, k           bmOp
	ework, mass    uint64
	extra          uint64
	chunks, subs   int32
	nrows, ncols   int32
	cq, ck         int32
	visLast        int32
	per, cs        int32
	hk, hpi        int32
	ksets, ch, spi int32
	rule           int32
	lscale         float32
	thresh         float64
	xkey, next     uint64
	slices, slicew int32
}

// The selection rules of bm_mass.
const (
	bmRuleThreshold = 0 // XAttention §2.2
	bmRuleTopP      = 1 // UniSparse Eq. 6
)

// log2e converts natural-log logits to the kernel's log2 units.
const log2e = 1.4426950408889634

// bmOpOf describes a 16-bit [B, H, N, D] operand at hi (and lo) with
// element strides sb, sh, sn, read as rows of s tokens (reversed when
// rev). Rows move by cp.async when every 8-element piece is 16-byte
// aligned.
func bmOpOf(hi, lo uint64, sb, sh, sn int64, n, d, s int, rev bool) bmOp {
	o := bmOp{hi: hi, lo: lo, sb: sb, sh: sh, sn: sn, n: int32(n), s: int32(s)}
	if rev {
		o.rev = 1
	}
	aligned := (hi|lo)%16 == 0 && sb%8 == 0 && sh%8 == 0 && sn%8 == 0 && d%8 == 0
	if aligned {
		o.vec = 1
	}
	return o
}

// bmMass is one launch of bm_mass: the operands, the geometry of rows and
// columns, and the rule.
type bmMass struct {
	file         string // the kernel source that includes block_mass.cuh
	q, k         bmOp
	f16, split   bool // f16 operands (else bf16); hi and lo halves
	nrows, ncols int  // query rows per query set, key columns per key set
	cq, ck       int  // tokens per query row and per key column
	visLast      bool
	per          int // columns per KV block
	hk, hpi      int // key sets per batch, query sets per key set
	ch           int // plan heads per query set
	rule         int
	lscale       float64 // the logit scale, natural units
	thresh       float64
	// extra is the int32 table [B][hk·hpi][query rows] of blocks Top-P
	// keeps besides its own (−1: none; 0: no table).
	extra uint64
	// With argmax the launch selects nothing: it writes each row's
	// heaviest KV block to xkey instead, [B][hk·hpi][query rows] u64 keys
	// (bm_okey; zero before the launch, and 0 after it for a row that sees
	// no key), taking its units from the int32 counter at next (zero
	// before the launch). A row then stands for group query blocks at once
	// (segments of group rows, so that work items fill their 128 rows).
	xkey, next uint64
	argmax     bool
	group      int
}

// bmShape is the geometry of one bm_mass launch (bmMass.shape).
type bmShape struct {
	a      planArgs // the kernel's PlanArgs (segments of group query blocks)
	ctas   int
	spi    int // segments per work item
	cs     int // columns per chunk
	slices int // column slices per work item (1 without argmax)
	slicew int // columns per slice
	ework  int64
	mass   int64
}

// bmCheck returns an error wrapping ErrUnsupported when bm_mass cannot
// take a tiling with rows query rows per query block.
func bmCheck(rows int) error {
	if rows < 1 || rows > bmRows {
		return fmt.Errorf("%w: the device block-mass kernel takes 1 to %d query rows per query block, got %d", ErrUnsupported, bmRows, rows)
	}
	return nil
}

// gcd is the greatest common divisor of a and b.
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// bmSliceUnits is how many (work item, column slice) units an argmax
// launch aims at per multiprocessor, counting the empty ones (under causal
// masking about half): enough for the heaviest items not to leave the
// device idle, few enough that a unit's fixed cost (its rows' setup, the
// pipeline's fill, the block sums) stays small against its tiles.
const bmSliceUnits = 16

// bmMinSlice is the fewest columns of an argmax slice, rounded up to the
// slice unit.
const bmMinSlice = 512

// bmMaxBlocks bounds the KV blocks of an argmax launch: bm_okey keeps a
// block index in BM_XBITS = 16 bits.
const bmMaxBlocks = 1 << 16

// shape returns the geometry of m's launch: the kernels' PlanArgs (a
// segment of m.group query blocks when m.group > 1), the CTAs it runs, its
// segments per work item, its chunk width, its column slices, and the
// bytes of its two scratch arrays.
func (m bmMass) shape(in *planInput) (sh bmShape, err error) {
	t := in.t
	g := t.Geometry
	a := in.args()
	bq := t.BlockQ * max(1, m.group) // a segment's query tokens
	if m.group > 1 {
		a.bq, a.qBlocks = int32(bq), int32((g.Nq+bq-1)/bq)
	}
	na := bq / m.cq
	if err = bmCheck(na); err != nil {
		return
	}
	ksets := g.B * m.hk
	spi := min(bmMaxSegs, bmRows/na)
	segs := int(a.qBlocks) * m.hpi
	work := ksets * ((segs + spi - 1) / spi)
	// Argmax launches cut each item's columns into slices of a multiple of
	// both the logit tile and the KV block, so that every block lies in
	// one slice, for bmSliceUnits units a multiprocessor.
	slices, slicew := 1, (m.ncols+bmCols-1)/bmCols*bmCols
	units := work
	if m.argmax {
		if kBlocks(t) > bmMaxBlocks {
			err = fmt.Errorf("%w: the device outlier query takes at most %d KV blocks, got %d", ErrUnsupported, bmMaxBlocks, kBlocks(t))
			return
		}
		unit := bmCols / gcd(bmCols, m.per) * m.per // lcm(bmCols, per)
		want := max(1, (bmSliceUnits*in.e.Info().SMs+work-1)/work)
		slicew = max((m.ncols+want-1)/want, bmMinSlice)
		slicew = (slicew + unit - 1) / unit * unit
		slices = max(1, (m.ncols+slicew-1)/slicew)
		units = work * slices
	}
	ctas := max(1, min(units, 2*in.e.Info().SMs))
	// A chunk of cs columns, the unit of the softmax sums kept per row,
	// lies inside one KV block and one 64-column half tile.
	cs := gcd(m.per, 64)
	chunks, subs := slicew/cs, slicew/64
	sh = bmShape{a: a, ctas: ctas, spi: spi, cs: cs, slices: slices, slicew: slicew,
		ework: int64(ctas) * int64(chunks+subs) * bmRows * 4,
		mass:  int64(ctas) * bmMaxSegs * int64(kBlocks(t)) * 8}
	return
}

// launch runs bm_mass for in's plan.
func (m bmMass) launch(c *driver.Ctx, in *planInput, name string) error {
	t := in.t
	g := t.Geometry
	sh, err := m.shape(in)
	if err != nil {
		return err
	}
	a, cs := sh.a, sh.cs
	// The k chunk and the pipeline depth keep two CTAs of eight warps on a
	// multiprocessor (at most about 110 KB of shared memory each, resident
	// query rows included: bmQueryResident): for 16-bit operands three
	// stages of 64 head dims on Hopper's warpgroup MMA and two on mma.sync,
	// else four of 32; for hi and lo halves two of 32
	// where the head dims allow, else four of 16. On an H100 at 32K
	// tokens, xattn planned in 1.83 ms with 64×2 and 2.17 ms with 32×4
	// (BENCHMARKS.md).
	dp := (g.D + 15) / 16 * 16
	bk, nst := 16, 4
	switch {
	case !m.split && dp%64 == 0 && in.e.wgmma:
		// Warpgroup MMA (BM_WG) in three stages of 64 head dims (97 KiB,
		// still two CTAs a multiprocessor): xattn at 32K tokens causal
		// planned in 1.04 ms against 1.14 with two stages and 1.38 on
		// mma.sync on an H200 (BENCHMARKS.md, "Session 37").
		bk, nst = 64, 3
	case !m.split && dp%64 == 0:
		bk, nst = 64, 2
	case !m.split && dp%32 == 0:
		bk = 32
	case dp%32 == 0:
		// hi and lo halves of 32 head dims in two stages: unisparse's main
		// pass at 32K tokens ran 1.182 ms against 1.339 with 16×4 on an
		// H200 (BENCHMARKS.md, "Planning costs after the psa_score and
		// bm_mass reworks").
		bk, nst = 32, 2
	}
	vec := m.q.vec == 1 && m.k.vec == 1
	// On Hopper, 16-bit operands in chunks of 64 head dims go through
	// warpgroup MMA (BM_WG): rows of 128 bytes, no padding, the stages
	// 1024-byte aligned (1 KiB more to align them in).
	wg := in.e.wgmma && !m.split && bk == 64
	opb := bmRows * (bk + 8) * 2
	if wg {
		opb = bmRows * bk * 2
	}
	stage := opb * 2
	if m.split {
		stage *= 2
	}
	staging := nst * stage
	if wg {
		staging += 1024
	}
	qres := bmQueryResident(m, dp, nst, opb, in.e.dev.MaxSharedOptin)
	if qres {
		staging = 2*bmRows*(dp+8)*2 + nst*opb*2 // both query halves, then stages of key halves
	}
	defs := []string{fmt.Sprintf("BM_F16=%d", uniFlag(m.f16)), fmt.Sprintf("BM_SPLIT=%d", uniFlag(m.split)),
		fmt.Sprintf("BM_DP=%d", dp), fmt.Sprintf("BM_BK=%d", bk), fmt.Sprintf("BM_NST=%d", nst),
		fmt.Sprintf("BM_CS=%d", cs), fmt.Sprintf("BM_VEC=%d", uniFlag(vec))}
	if m.argmax {
		defs = append(defs, "BM_ARGMAX=1")
	}
	if qres {
		defs = append(defs, "BM_QRES=1")
	}
	if wg {
		defs = append(defs, "BM_WG=1")
	}
	fn, err := in.e.auxFunction(c, m.file, "bm_mass", defs...)
	if err != nil {
		return err
	}
	kb := kBlocks(t)
	p2 := 1
	for p2 < kb {
		p2 <<= 1
	}
	shared := max(staging, p2*13, bmThreads/32*bmRows*4) // the last: each warp's block masses
	if m.argmax {
		shared = max(shared, bmThreads/32*bmRows*8) // each warp's rows' u64 keys
	}
	if shared > in.e.dev.MaxSharedOptin {
		return fmt.Errorf("%w: the device block-mass kernel needs %d bytes of shared memory for %d KV blocks, the device allows %d", ErrUnsupported, shared, kb, in.e.dev.MaxSharedOptin)
	}
	if shared > 48<<10 {
		if err := c.SetMaxDynamicShared(fn, shared); err != nil {
			return err
		}
	}
	ework, err := in.scratch.get(c, name+".e", sh.ework)
	if err != nil {
		return err
	}
	mass, err := in.scratch.get(c, name+".mass", sh.mass)
	if err != nil {
		return err
	}
	chunks, subs := sh.slicew/cs, sh.slicew/64
	args := bmArgs{q: m.q, k: m.k, ework: uint64(ework), mass: uint64(mass), extra: m.extra, chunks: int32(chunks), subs: int32(subs),
		nrows: int32(m.nrows), ncols: int32(m.ncols), cq: int32(m.cq), ck: int32(m.ck), visLast: uniFlag(m.visLast),
		per: int32(m.per), cs: int32(cs), hk: int32(m.hk), hpi: int32(m.hpi), ksets: int32(g.B * m.hk), ch: int32(m.ch), spi: int32(sh.spi),
		rule: int32(m.rule), lscale: float32(m.lscale * log2e), thresh: m.thresh,
		xkey: m.xkey, next: m.next, slices: int32(sh.slices), slicew: int32(sh.slicew)}
	return c.Launch(fn, driver.Dim3{X: uint32(sh.ctas), Y: 1, Z: 1}, driver.Dim3{X: bmThreads, Y: 1, Z: 1}, shared, driver.Arg(&a), driver.Arg(&args))
}

// bmStaticShared bounds bm_mass's static shared memory (its tables: 4384
// bytes for every variant TestCompileBlockMass compiles), and
// bmReservedShared is the shared memory the device keeps for each block.
const (
	bmStaticShared   = 4608
	bmReservedShared = 1024
)

// bmQueryResident reports whether m's launch keeps its query rows in
// shared memory (BM_QRES): hi and lo halves of rows of one token, outside
// argmax, where both halves' rows at every head dim and nst stages of key
// halves still let two blocks share a multiprocessor (the device's
// per-multiprocessor shared memory taken as maxOptin plus one block's
// reserve, as on sm_80 and sm_90). A logit tile then stages key columns
// alone, half the bytes of staging both operands.
func bmQueryResident(m bmMass, dp, nst, opb, maxOptin int) bool {
	if !m.split || m.argmax || m.q.s != 1 {
		return false
	}
	dyn := 2*bmRows*(dp+8)*2 + nst*opb*2
	return 2*(dyn+bmStaticShared+bmReservedShared) <= maxOptin+bmReservedShared
}

// bmSplit writes x as bf16 high and low halves, [B][H][N][D] contiguous,
// into scratch buffers called name; it returns the operand's pointers and
// strides.
func bmSplit(c *driver.Ctx, in *planInput, file, name string, x view) (hi, lo uint64, sb, sh, sn int64, err error) {
	n := int64(x.b) * int64(x.h) * int64(x.n) * int64(x.d)
	h, err := in.scratch.get(c, name+".hi", n*2)
	if err != nil {
		return
	}
	l, err := in.scratch.get(c, name+".lo", n*2)
	if err != nil {
		return
	}
	fn, err := in.e.auxFunction(c, file, "bm_split", bmStubDefs...)
	if err != nil {
		return
	}
	hi, lo = uint64(h), uint64(l)
	grid, block := grid1(int(n), 256)
	if err = c.Launch(fn, grid, block, 0, driver.Arg(&x), driver.Arg(&hi), driver.Arg(&lo)); err != nil {
		return
	}
	sn = int64(x.d)
	sh = sn * int64(x.n)
	sb = sh * int64(x.h)
	return
}

// bmStubDefs compile a block_mass.cuh includer for its other kernels
// (bm_split, the pooling kernels); bm_mass itself is compiled per shape.
var bmStubDefs = []string{"BM_F16=0", "BM_SPLIT=0", "BM_DP=16", "BM_BK=16", "BM_NST=2", "BM_CS=1", "BM_VEC=0"}

// bmViewOp is operand x (a bf16 or f16 input view) read as rows of s
// tokens.
func bmViewOp(x view, s int, rev bool) bmOp {
	return bmOpOf(x.ptr, 0, x.sb, x.sh, x.sn, int(x.n), int(x.d), s, rev)
}

// isF32 reports whether view x holds float32 values.
func isF32(x view) bool { return x.dtype == dtypeCode(tensor.Float32) }
