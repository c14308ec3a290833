package cuda

import (
	"fmt"
	"strconv"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// levelPlanner is a devicePlanner whose plans carry pyramid levels (PSA):
// besides each row's blocks it keeps each listed block's level, and once
// the CSR row starts exist it writes them per entry for the gathering
// kernel. Runners assert it where levels matter, so devicePlanner stays
// as it is.
type levelPlanner interface {
	devicePlanner
	// topLevel is the coarsest level its plans may hold; Full means they
	// pool nothing (one level: a binary block mask).
	topLevel() plan.Level
	// levels writes the level of each entry of the plan that in's lists
	// hold, after csr_scan wrote rowStart, to level (one byte per entry).
	levels(c *driver.Ctx, in *planInput, rowStart, level driver.Ptr) error
}

// levelsScratch names the runner's scratch buffer of per-entry levels.
const levelsScratch = "levels"

// psaArgs mirrors struct PsaArgs in kernels/psa.cuh.
type psaArgs struct {
	qh, ql, kh, kl, qtok, ktok, imp, work, cap, lvl uint64 // qh, kh: 0 when psa_score reads q and k (psaShape.direct)
	qout, kout                                      uint64
	cuts                                            [8]float64
	sim                                             [7]float64
	seed                                            uint64
	est, rule, h, s, sq, sk                         int32
	oq, ok                                          int32
	rq, cp, w, wp, un, nt                           int32
	split, slots, heads, blocks                     int32
	lscale                                          float32
}

// psaThreads is PSA_T in kernels/psa.cuh.
const (
	psaThreads = 256
	// psaOutlierThreads is psa_outliers' CTA: a block's dimension pairs
	// (16-bit inputs) or dimensions, then its tokens, a thread each.
	psaOutlierThreads = 128
	// psaOutlierStageMax is the most shared memory psa_outliers stages a
	// block in (two CTAs a multiprocessor); larger blocks read the input
	// directly.
	psaOutlierStageMax = 112 << 10
)

// psaOutlierPitch is psa_outlier_pitch in kernels/psa_outlier.cuh: the 32-bit
// words of a staged row of d elements (16-bit elements in pairs), rounded
// up to an odd count.
func psaOutlierPitch(d int, dtype int32) int {
	w := (d + 1) / 2
	if dtype == dtypeCode(tensor.Float32) {
		w = d
	}
	return w | 1
}

// psaOutlierSmem is psa_outliers' dynamic shared memory for blocks of bs
// tokens of d elements: the float32 means, inverse spreads and scores (d
// rounded up to a multiple of 4), and with staged the block's rows.
func psaOutlierSmem(d, bs int, dtype int32, staged bool) int {
	n := (2*((d+3)&^3) + bs) * 4
	if staged {
		n += bs * psaOutlierPitch(d, dtype) * 4
	}
	return n
}

// psaPlanner is psa.Planner on the device (kernels/plan_psa.cu and
// plan_psa_score.cu). Sampling draws the CPU's tokens bit for bit (the
// outlier scores of its leading draws, psa_outliers, in the CPU's canonical
// float32), the similarity cap and the level
// rules are the CPU's float64 arithmetic, and the logits are float32
// tensor-core sums where the CPU's are float32 kernel.MatMul sums, their
// softmax terms exp2 approximations (ex2.approx) of the scaled shift: a
// block whose importance ranks or accumulates within rounding of a level
// boundary may get a neighbouring level (the self-test's psaTieBreak
// states the bound); every other block gets the CPU's level.
type psaPlanner struct {
	p   psa.Planner
	top plan.Level // H, the number of levels
}

// newPsaPlanner returns the device planner of p.
func newPsaPlanner(p psa.Planner) (devicePlanner, error) {
	h := len(p.Thresholds)
	switch {
	case p.Rule == psa.Quantile && p.Quantiles == nil:
		h = len(psa.DefaultQuantiles())
	case p.Rule == psa.Quantile:
		h = len(p.Quantiles)
	case p.Thresholds == nil:
		h = len(psa.DefaultThresholds())
	}
	if h < 1 || h > int(plan.MaxLevel) {
		return nil, fmt.Errorf("%w: psa with %d levels; give 1 to %d", plan.ErrInvalid, h, plan.MaxLevel)
	}
	return psaPlanner{p: p, top: plan.Level(h)}, nil
}

// psaShape is the estimator's layout for one tiling: rows per query block
// (a multiple of 16), columns per KV block (a power of two), the operand
// width and its padding to a multiple of 64, and the logit scale; and
// psa_score's work item and key pipeline.
type psaShape struct {
	s              psa.Settings
	rq, cp, w, wp  int
	units, tiles   int
	heads          int // G: query heads of one KV head per work item of psa_score
	blocks         int // P: query blocks per work item (rows: P·G·rq ≤ psaItemRows)
	stages         int // key pipeline stages (PSA_NS)
	kc             int // head dims a stage (PSA_KC): 64, or 128
	split          bool
	direct         bool // psa_score reads the rows from q and k (PSA_DIRECT; psaDirect)
	wg             bool // psa_score multiplies on Hopper's warpgroup MMA (PSA_WG: Sampling, bf16)
	lscale         float32
	qBlocks, kBlks int
}

// scoreDefines are psa_score's compile-time settings (PSA_EST, PSA_SPLIT,
// PSA_CPU, PSA_NS, PSA_KC, PSA_DIRECT, PSA_WG in
// kernels/plan_psa_score.cu): with the estimator, the operand split, the
// unit width, where the rows come from and the MMA fixed, the kernel keeps
// only the code its plan runs.
func (sh psaShape) scoreDefines() []string {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	d := []string{"PSA_EST=" + strconv.Itoa(int(sh.s.Estimator)), "PSA_SPLIT=" + flag(sh.split), "PSA_CPU=" + strconv.Itoa(min(sh.cp, 64)),
		"PSA_NS=" + strconv.Itoa(sh.stages), "PSA_KC=" + strconv.Itoa(sh.kc), "PSA_DIRECT=" + flag(sh.direct)}
	if sh.wg {
		d = append(d, "PSA_WG=1")
	}
	return d
}

// shape is the layout at the H100's shared memory (psaMaxSmem a CTA,
// psaItemSmem for two); shapeOn fits it to a device's.
func (p psaPlanner) shape(t plan.Tiling, split bool) (psaShape, error) {
	return p.shapeOn(t, split, false, psaMaxSmem, psaItemSmem)
}

// psaSmemLimits are psa_score's dynamic shared memory limits on a device
// that opts into optin bytes a CTA: one CTA's (its static tables taken
// off) and two CTAs' each (a multiprocessor holding optin plus one CTA's
// reserve), within the H100's psaMaxSmem and psaItemSmem.
func psaSmemLimits(optin int) (one, two int) {
	return min(psaMaxSmem, optin-(psaStatSmem-1024)), min(psaItemSmem, (optin+1024)/2-psaStatSmem)
}

// shapeOn is shape with psa_score's dynamic shared memory within one and,
// for two CTAs a multiprocessor, two bytes (psaSmemLimits), on warpgroup
// MMA where wgmma allows (Sampling without the split).
func (p psaPlanner) shapeOn(t plan.Tiling, split, wgmma bool, one, two int) (psaShape, error) {
	s, err := p.p.Settings(t)
	if err != nil {
		return psaShape{}, err
	}
	if t.BlockQ > 128 || t.BlockK > 256 {
		return psaShape{}, fmt.Errorf("%w: psa on the device takes BlockQ ≤ 128 and BlockK ≤ 256, not %d and %d", ErrUnsupported, t.BlockQ, t.BlockK)
	}
	g := t.Geometry
	sh := psaShape{s: s, split: split, wg: wgmma && !split && s.Estimator == psa.Sampling, qBlocks: qBlocks(t), kBlks: kBlocks(t)}
	nq, nk := s.SampleQ, s.SampleK
	sh.w, sh.lscale = g.D, t.SoftmaxScale()
	if s.Estimator == psa.Antidiagonal {
		nq, nk = (t.BlockQ+s.Stride-1)/s.Stride, (t.BlockK+s.Stride-1)/s.Stride
		sh.w = s.Stride * g.D
		sh.lscale = t.SoftmaxScale() / float32(s.Stride) // XAttention: the mean of the antidiagonal
	}
	sh.rq = (nq + 15) / 16 * 16
	sh.cp = 1
	for sh.cp < nk {
		sh.cp *= 2
	}
	sh.wp = (sh.w + 63) / 64 * 64
	cols := sh.kBlks * sh.cp
	sh.tiles = (cols + 63) / 64
	sh.units = sh.tiles * 64 / min(sh.cp, 64)
	sh.heads, sh.blocks, sh.stages, sh.kc = sh.item(g.Hq/g.Hkv, one, two)
	return sh, nil
}

// item chooses psa_score's work item, G query heads of a KV head (G
// divides hpi) by P query blocks, and its key pipeline: the most rows of
// tensor-core work per multiprocessor (R = P·G·rq ≤ psaItemRows rows a
// CTA, two CTAs when the shared memory is at most two, one CTA up to one
// bytes), then the
// widest stages (128 head dims where the operand width allows: half the
// barriers of 64), then the most stages, then the most heads (the rows of
// P blocks of a causal item see different key ranges). Every row of an
// item shares its key tiles.
func (sh psaShape) item(hpi, one, two int) (heads, blocks, stages, kc int) {
	heads, blocks, stages, kc = 1, 1, 2, 64
	best := -1
	for g := hpi; g >= 1; g-- {
		if hpi%g != 0 || g*sh.rq > psaItemRows {
			continue
		}
		for p := max(1, min(psaItemRows/(g*sh.rq), sh.qBlocks)); p >= 1; p-- {
			for _, c := range []int{128, 64} {
				if sh.wp%c != 0 {
					continue
				}
				for ns := psaMaxStages; ns >= 2; ns-- {
					x := sh
					x.heads, x.blocks, x.stages, x.kc = g, p, ns, c
					n := x.smem()
					if n > one {
						continue
					}
					score := p * g * sh.rq
					if n <= two {
						score *= 2
					}
					if score > best {
						best, heads, blocks, stages, kc = score, g, p, ns, c
					}
				}
			}
		}
	}
	return heads, blocks, stages, kc
}

const (
	psaItemRows  = 128       // PSA_R: rows of a psa_score work item, at most
	psaMaxStages = 3         // key pipeline stages, at most
	psaItemSmem  = 104 << 10 // dynamic shared memory of a work item that leaves room for two CTAs a multiprocessor (with psaStatSmem, 224 KiB of the H100's 228)
	psaMaxSmem   = 220 << 10 // psa_score's dynamic shared memory, at most (the H100 opts into 227 KiB a CTA)
	psaStatSmem  = 8 << 10   // psa_score's static shared memory (at most 6688 bytes: PSA_DIRECT at three stages) and the driver's reserve per CTA (1 KiB), at least
)

// rows is R, the estimator rows of one psa_score work item.
func (sh psaShape) rows() int { return max(sh.blocks, 1) * max(sh.heads, 1) * sh.rq }

// smem is psa_score's dynamic shared memory: the query rows of a work
// item and the key pipeline's stages (two 64-column tiles of kc dims, at
// a pitch of kc + 8), twice when split; under wg the rows rounded up to 64
// and the stages at a pitch of kc (swizzled), 1024-byte aligned.
func (sh psaShape) smem() int {
	if sh.wg {
		return 1024 + (sh.rows()+63)/64*64*sh.wp*2 + max(sh.stages, 2)*128*max(sh.kc, 64)*2
	}
	n := sh.rows()*(sh.wp+8)*2 + max(sh.stages, 2)*128*(max(sh.kc, 64)+8)*2
	if sh.split {
		n *= 2
	}
	return n
}

func (p psaPlanner) header(t plan.Tiling) (*plan.Plan, error) {
	sh, err := p.shape(t, true)
	if err != nil {
		return nil, err
	}
	if sh.smem() > psaMaxSmem {
		return nil, fmt.Errorf("%w: psa estimator rows of %d × %d elements exceed the device's shared memory", ErrUnsupported, sh.rq, sh.wp)
	}
	return &plan.Plan{Tiling: t}, nil
}

func (psaPlanner) sparse() bool { return true }

func (p psaPlanner) topLevel() plan.Level { return p.top }

// args fills the kernels' PsaArgs from the shape, with the scratch
// buffers of in.
func (p psaPlanner) args(c *driver.Ctx, in *planInput, sh psaShape, slots int) (psaArgs, error) {
	g := in.t.Geometry
	s := sh.s
	a := psaArgs{seed: s.Seed, est: int32(s.Estimator), rule: int32(s.Rule), h: int32(len(s.Cuts)), s: int32(s.Stride),
		sq: int32(s.SampleQ), sk: int32(s.SampleK), rq: int32(sh.rq), cp: int32(sh.cp), w: int32(sh.w), wp: int32(sh.wp),
		un: int32(sh.units), nt: int32(sh.tiles), slots: int32(slots), heads: int32(sh.heads), blocks: int32(sh.blocks), lscale: sh.lscale}
	if sh.split {
		a.split = 1
	}
	if s.Estimator == psa.Sampling {
		a.oq, a.ok = int32(s.OutlierQ), int32(s.OutlierK)
	}
	copy(a.cuts[:], s.Cuts)
	copy(a.sim[:], s.Similarity)
	qrows := int64(g.B*g.Hq) * int64(sh.qBlocks) * int64(sh.rq)
	kcols := int64(g.B*g.Hkv) * int64(sh.kBlks) * int64(sh.cp)
	rows := int64(in.rows())
	// psaBuf is one scratch buffer of the plan: its name, bytes and the
	// argument that receives it.
	type psaBuf struct {
		name string
		n    int64
		dst  *uint64
	}
	bufs := []psaBuf{
		{"psa.qtok", qrows * 4, &a.qtok},
		{"psa.ktok", kcols * 4, &a.ktok},
		{"psa.imp", rows * int64(in.stride) * 8, &a.imp},
		{"psa.work", int64(slots) * int64(sh.rows()) * int64(sh.units+sh.tiles) * 4, &a.work},
		{"psa.lvl", rows * int64(in.stride), &a.lvl},
	}
	if !sh.direct {
		bufs = append(bufs, psaBuf{"psa.qh", qrows * int64(sh.wp) * 2, &a.qh}, psaBuf{"psa.kh", kcols * int64(sh.wp) * 2, &a.kh})
	}
	if sh.split {
		bufs = append(bufs, psaBuf{"psa.ql", qrows * int64(sh.wp) * 2, &a.ql}, psaBuf{"psa.kl", kcols * int64(sh.wp) * 2, &a.kl})
	}
	if s.Similarity != nil {
		bufs = append(bufs, psaBuf{"psa.cap", int64(g.B*g.Hkv) * int64(sh.kBlks), &a.cap})
	}
	if a.oq > 0 {
		bufs = append(bufs, psaBuf{"psa.qout", int64(g.B*g.Hq) * int64(sh.qBlocks) * int64(a.oq) * 4, &a.qout})
	}
	if a.ok > 0 {
		bufs = append(bufs, psaBuf{"psa.kout", int64(g.B*g.Hkv) * int64(sh.kBlks) * int64(a.ok) * 4, &a.kout})
	}
	for _, b := range bufs {
		ptr, err := in.scratch.get(c, b.name, max(b.n, 16))
		if err != nil {
			return a, err
		}
		*b.dst = uint64(ptr)
	}
	return a, nil
}

// plan estimates importance, caps and levels and writes the rows.
func (p psaPlanner) plan(c *driver.Ctx, in *planInput) error {
	split := in.q.dtype != dtypeCode(tensor.BFloat16) || in.k.dtype != dtypeCode(tensor.BFloat16)
	one, two := psaSmemLimits(in.e.dev.MaxSharedOptin)
	sh, err := p.shapeOn(in.t, split, in.e.wgmma, one, two)
	if err != nil {
		return err
	}
	if sh.smem() > one {
		return fmt.Errorf("%w: psa estimator rows of %d × %d elements need %d bytes of shared memory, the device allows %d", ErrUnsupported, sh.rq, sh.wp, sh.smem(), one)
	}
	sh.direct = psaDirect(sh, in.q, in.k)
	const file = "plan_psa.cu"
	fns := map[string]driver.Function{}
	for _, name := range []string{"psa_outliers", "psa_tokens", "psa_gather", "psa_caps"} {
		if fns[name], err = in.e.auxFunction(c, file, name); err != nil {
			return err
		}
	}
	n2 := 64 // psa_assign's least table: psa_sort_rows' 64 positions
	for n2 < in.stride {
		n2 *= 2
	}
	at := psaAssignThreads(n2)
	if fns["psa_assign"], err = in.e.auxFunction(c, file, "psa_assign", "PSA_AT="+strconv.Itoa(at), "PSA_SORT_E="+strconv.Itoa(psaSortPositions(n2))); err != nil {
		return err
	}
	if fns["psa_score"], err = in.e.auxFunction(c, "plan_psa_score.cu", "psa_score", sh.scoreDefines()...); err != nil {
		return err
	}
	rows := in.rows()
	items := rows / sh.heads / sh.qBlocks * ((sh.qBlocks + sh.blocks - 1) / sh.blocks) // P query blocks of G heads each
	perSM := max(1, min(2, (in.e.dev.MaxSharedOptin+1024)/(sh.smem()+psaStatSmem)))    // two CTAs at most: 128 registers a thread
	slots := max(min(items, perSM*max(in.e.dev.SMs, 1)), 1)
	a, err := p.args(c, in, sh, slots)
	if err != nil {
		return err
	}
	pa := in.args()
	g := in.t.Geometry
	// Sampling's outlier-led draws first: psa_tokens swaps them to the
	// front of each block's draw.
	for side, o := range []struct {
		v      view
		blocks int
		m      int32
		bs     int
	}{{in.q, g.B * g.Hq * sh.qBlocks, a.oq, in.t.BlockQ}, {in.k, g.B * g.Hkv * sh.kBlks, a.ok, in.t.BlockK}} {
		if o.m <= 0 {
			continue
		}
		if err := in.e.launchPsaOutliers(c, fns["psa_outliers"], &pa, &a, o.v, int32(side), o.blocks, o.bs, g.D, psaOutlierAuto); err != nil {
			return err
		}
	}
	for side, n := range []int{g.B * g.Hq * sh.qBlocks, g.B * g.Hkv * sh.kBlks} {
		sd := int32(side)
		grid, block := grid1(n, 64)
		if err := c.Launch(fns["psa_tokens"], grid, block, 0, driver.Arg(&pa), driver.Arg(&a), driver.Arg(&sd)); err != nil {
			return err
		}
	}
	for side, x := range []struct {
		v    view
		rows int
	}{{in.q, g.B * g.Hq * sh.qBlocks * sh.rq}, {in.k, g.B * g.Hkv * sh.kBlks * sh.cp}} {
		if sh.direct {
			break // psa_score reads q and k at the tokens
		}
		sd := int32(side)
		v := x.v
		grid, block := grid1(x.rows*sh.wp/8, 256) // a thread a piece of 8 elements
		if err := c.Launch(fns["psa_gather"], grid, block, 0, driver.Arg(&pa), driver.Arg(&a), driver.Arg(&v), driver.Arg(&sd)); err != nil {
			return err
		}
	}
	if err := c.SetMaxDynamicShared(fns["psa_score"], sh.smem()); err != nil {
		return err
	}
	cta := driver.Dim3{X: psaThreads, Y: 1, Z: 1}
	qv, kv := in.q, in.k
	if err := c.Launch(fns["psa_score"], driver.Dim3{X: uint32(slots), Y: 1, Z: 1}, cta, sh.smem(), driver.Arg(&pa), driver.Arg(&a), driver.Arg(&qv), driver.Arg(&kv)); err != nil {
		return err
	}
	if a.cap != 0 {
		k := in.k
		n := g.B * g.Hkv * sh.kBlks
		if err := c.Launch(fns["psa_caps"], driver.Dim3{X: uint32((n + 7) / 8), Y: 1, Z: 1}, cta, 0, driver.Arg(&pa), driver.Arg(&a), driver.Arg(&k)); err != nil {
			return err
		}
	}
	assignSmem := psaAssignSmem(n2)
	if err := c.SetMaxDynamicShared(fns["psa_assign"], assignSmem); err != nil {
		return err
	}
	return c.Launch(fns["psa_assign"], driver.Dim3{X: uint32(rows), Y: 1, Z: 1}, driver.Dim3{X: uint32(at), Y: 1, Z: 1}, assignSmem, driver.Arg(&pa), driver.Arg(&a))
}

// psaAssignThreads is psa_assign's PSA_AT for rows of at most n2 blocks
// (a power of two): 64, or a thread per 8 blocks up to 256, so that the
// longest rows still sort in registers at 8 positions a thread (64
// registers). A plan's rows all get its longest row's shared memory, so
// at 64 threads rows of 2048 blocks (128K tokens at 64-token key blocks)
// left eight warps a multiprocessor: psa_assign took 3.8 ms of PSA's 24 ms
// plan on the H200 then, 3.4–3.5 ms now (BENCHMARKS.md, "Session 38").
func psaAssignThreads(n2 int) int {
	return min(max(n2/8, 64), 256)
}

// psaSortPositions is psa_assign's PSA_SORT_E for rows of at most n2
// blocks (a power of two): the positions a thread sorts in registers,
// only as many as the longest row needs, since the register count, and so
// how many rows a multiprocessor holds, grows with it. Rows of more than
// 32·256 blocks sort in shared memory.
func psaSortPositions(n2 int) int {
	return min(max(n2/psaAssignThreads(n2), 8), 32)
}

// psaSumChunk is PSA_SUM_CHUNK in kernels/plan_psa.cu: psa_assign's sums
// by chunks, as method/psa's.
const psaSumChunk = 32

// psaAssignSmem is psa_assign's dynamic shared memory for rows of at most
// n2 blocks (a power of two, at least 64): per position a key, an
// importance, an index and a level, 21 bytes, and a float64 chunk sum
// per psaSumChunk positions.
func psaAssignSmem(n2 int) int {
	return n2*21 + n2/psaSumChunk*8
}

// levels copies each row's levels to the CSR entries.
func (p psaPlanner) levels(c *driver.Ctx, in *planInput, rowStart, level driver.Ptr) error {
	fn, err := in.e.auxFunction(c, "plan_psa.cu", "psa_levels")
	if err != nil {
		return err
	}
	sh, err := p.shape(in.t, false)
	if err != nil {
		return err
	}
	lvl, err := in.scratch.get(c, "psa.lvl", int64(in.rows())*int64(in.stride))
	if err != nil {
		return err
	}
	a := psaArgs{lvl: uint64(lvl), rq: int32(sh.rq)}
	pa := in.args()
	rs, lv := uint64(rowStart), uint64(level)
	return c.Launch(fn, driver.Dim3{X: uint32(in.rows()), Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
		driver.Arg(&pa), driver.Arg(&a), driver.Arg(&rs), driver.Arg(&lv))
}
