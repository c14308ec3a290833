package cuda

import (
	"math"
	"math/bits"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// flexprefillPlanner is flexprefill.Planner on the device
// (kernels/plan_flexprefill.cu, with the tensor-core probe of
// kernels/probe.cuh): every head's decision is computed as the CPU
// computes it from the probe's line scores, which differ from the CPU's by
// about 1e-6 relative; a decision that close to a cut or to τ may differ
// (cuda/selftest's flexprefillTieBreak bounds the difference).
type flexprefillPlanner struct{ f flexprefill.Planner }

// newFlexprefillPlanner returns the device planner of p.
func newFlexprefillPlanner(p flexprefill.Planner) (devicePlanner, error) {
	return flexprefillPlanner{p}, nil
}

func (p flexprefillPlanner) header(t plan.Tiling) (*plan.Plan, error) {
	if err := p.f.Validate(); err != nil {
		return nil, err
	}
	return &plan.Plan{Tiling: t}, nil
}

func (flexprefillPlanner) sparse() bool { return true }

// fpArgs mirrors struct FpArgs in kernels/plan_flexprefill.cu.
type fpArgs struct {
	km, vb, sb, est, vflag, sflag, qa, counts, list uint64
	gamma, tau                                      float64
	minb, maxb, smin, nsd                           int32
}

// qaArgs mirrors struct QaArgs in kernels/plan_flexprefill.cu.
type qaArgs struct {
	pw, flag, qa, km, qm, list uint64
	budget                     uint64
	head0, g, shift            int32
}

// qaSel mirrors struct QaSel in kernels/plan_flexprefill.cu: the scratch
// of the query-aware selection, spread over chunks blocks of chunk pairs
// per head.
type qaSel struct {
	cnt, fs, ccnt, cut uint64
	chunks, chunk      int32
}

// qaBins is QA_BINS in kernels/plan_flexprefill.cu: the bins of the
// query-aware selection's histogram.
const qaBins = 2048

// qaScratchBytes bounds the query-aware pair weights of one head group.
const qaScratchBytes = 1 << 30

// qaQG is QA_QG in kernels/plan_flexprefill.cu: the query blocks of one
// fp_qa_dots block.
const qaQG = 8

// rows8 reports whether x is 16-bit with every 8-element piece of a row
// 16-byte aligned and at most 128 such pieces a row, as fp_keymeans8 and
// fp_qmeans8 load it (128/(D/8) blocks a 128-thread block).
func rows8(x view) bool {
	return x.dtype != dtypeCode(tensor.Float32) && x.ptr%16 == 0 && (x.sb|x.sh|x.sn)%8 == 0 && x.d%8 == 0 && x.d <= 8*128
}

// floorDiv is ⌊a/b⌋ for b > 0.
func floorDiv(a, b int) int {
	if a >= 0 {
		return a / b
	}
	return -((-a + b - 1) / b)
}

func (p flexprefillPlanner) plan(c *driver.Ctx, in *planInput) error {
	g := in.t.Geometry
	a := in.args()
	heads := g.B * g.Hq
	nkb, qbs := kBlocks(in.t), qBlocks(in.t)
	bk := in.t.BlockK
	smin := floorDiv(-(g.Nk - 1), bk)
	nsd := (g.Nk-1)/bk - smin + 1
	n := min(in.t.BlockQ, g.Nq)
	perQA := int64(qbs) * int64(nkb) * 8
	grpQA := int(max(1, min(int64(heads), qaScratchBytes/max(perQA, 1))))
	var err error
	ptr := func(name string, bytes int64) uint64 {
		if err != nil {
			return 0
		}
		var d driver.Ptr
		d, err = in.scratch.get(c, name, max(bytes, 8))
		return uint64(d)
	}
	f := fpArgs{gamma: p.f.Gamma, tau: p.f.Tau, minb: int32(p.f.MinBudget), maxb: int32(p.f.MaxBudget), smin: int32(smin), nsd: int32(nsd)}
	f.km = ptr("fp.km", int64(g.B*g.Hkv)*int64(nkb)*int64(g.D)*4)
	f.vb = ptr("fp.vb", int64(heads)*int64(nkb)*8)
	f.sb = ptr("fp.sb", int64(heads)*int64(nsd)*8)
	f.est = ptr("fp.est", int64(heads)*int64(nkb)*8)
	f.vflag = ptr("fp.vflag", int64(heads)*int64(nkb))
	f.sflag = ptr("fp.sflag", int64(heads)*int64(nsd))
	f.qa = ptr("fp.qa", int64(heads)*4)
	f.counts = ptr("fp.counts", int64(heads)*8)
	f.list = ptr("fp.coverlist", int64(heads)*2*int64(2*g.Nk)*4)
	x := qaArgs{qa: f.qa, km: f.km}
	x.pw = ptr("fp.pw", int64(grpQA)*perQA)
	x.flag = ptr("fp.qaflag", int64(heads)*int64(qbs)*int64(nkb))
	x.qm = ptr("fp.qm", int64(heads)*int64(qbs)*int64(g.D)*4)
	x.list = ptr("fp.qalist", int64(grpQA)*perQA/2)
	// The selection's pairs go in chunks of at least 256 (one pass of a
	// block), about four blocks a multiprocessor over a group's heads.
	pairs := qbs * nkb
	sel := qaSel{chunks: int32(max(1, min((4*in.e.Info().SMs+grpQA-1)/grpQA, (pairs+255)/256)))}
	sel.chunk = int32((pairs + int(sel.chunks) - 1) / int(sel.chunks))
	sel.cnt = ptr("fp.qacnt", int64(grpQA)*qaBins*4)
	sel.fs = ptr("fp.qafs", int64(grpQA)*qaBins*8)
	sel.ccnt = ptr("fp.qaccnt", int64(grpQA)*int64(sel.chunks)*4)
	sel.cut = ptr("fp.qacut", int64(grpQA)*3*8)
	if err != nil {
		return err
	}
	defs := kernelDefines(in, n)
	fn := func(name string) driver.Function {
		if err != nil {
			return 0
		}
		var k driver.Function
		k, err = in.e.auxFunction(c, "plan_flexprefill.cu", name, defs...)
		return k
	}
	keymeans, cover, head, qmeans, qad, qasm, qas, rows := fn("fp_keymeans"), fn("fp_cover"), fn("fp_head"), fn("fp_qmeans"), fn("fp_qa_dots"), fn("fp_qa_softmax"), fn("fp_qa_select"), fn("fp_rows")
	keymeans8, qmeans8, qah, qam, qal := fn("fp_keymeans8"), fn("fp_qmeans8"), fn("fp_qa_hist"), fn("fp_qa_mark"), fn("fp_qa_list")
	if err != nil {
		return err
	}
	kgrid := driver.Dim3{X: uint32(nkb), Y: uint32(g.B * g.Hkv), Z: 1}
	if rows8(in.k) {
		per := 128 / (int(in.k.d) / 8)
		keymeans, kgrid.X = keymeans8, uint32((nkb+per-1)/per)
	}
	if err := c.Launch(keymeans, kgrid, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
		driver.Arg(&a), driver.Arg(&in.k), driver.Arg(&f)); err != nil {
		return err
	}
	pa, err := runProbe(c, in, "plan_flexprefill.cu", n, true)
	if err != nil {
		return err
	}
	if err := c.Launch(cover, driver.Dim3{X: uint32(pa.g), Y: 2, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0,
		driver.Arg(&a), driver.Arg(pa), driver.Arg(&f)); err != nil {
		return err
	}
	if err := c.Launch(head, driver.Dim3{X: uint32(pa.g), Y: 1, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0,
		driver.Arg(&a), driver.Arg(&in.q), driver.Arg(pa), driver.Arg(&f)); err != nil {
		return err
	}
	// Query-aware heads (FlexPrefill §3.2): rows are the query blocks
	// with a visible block, the budget γ·rows in fixed point.
	dense := &plan.Plan{Tiling: in.t}
	visRows := 0
	for qb := range qbs {
		if v, _ := dense.BlockVisibility(qb, 0); v {
			visRows++
		}
	}
	if visRows > 0 {
		x.shift = int32(62 - bits.Len(uint(visRows)))
		x.budget = uint64(math.Ldexp(p.f.Gamma*float64(visRows), int(x.shift)))
		qgrid := driver.Dim3{X: uint32(qbs), Y: uint32(heads), Z: 1}
		if rows8(in.q) {
			per := 128 / (int(in.q.d) / 8)
			qmeans, qgrid.X = qmeans8, uint32((qbs+per-1)/per)
		}
		if err := c.Launch(qmeans, qgrid, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
			driver.Arg(&a), driver.Arg(&in.q), driver.Arg(&x)); err != nil {
			return err
		}
		for h0 := 0; h0 < heads; h0 += grpQA {
			x.head0, x.g = int32(h0), int32(min(grpQA, heads-h0))
			if err := c.Launch(qad, driver.Dim3{X: uint32((qbs + qaQG - 1) / qaQG), Y: uint32(x.g), Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
				driver.Arg(&a), driver.Arg(&x)); err != nil {
				return err
			}
			grid, block := grid1(int(x.g)*qbs*32, 256)
			if err := c.Launch(qasm, grid, block, 0, driver.Arg(&a), driver.Arg(&x)); err != nil {
				return err
			}
			if err := c.Memset(driver.Ptr(sel.cnt), 0, int64(x.g)*qaBins*4); err != nil {
				return err
			}
			if err := c.Memset(driver.Ptr(sel.fs), 0, int64(x.g)*qaBins*8); err != nil {
				return err
			}
			chunked := driver.Dim3{X: uint32(sel.chunks), Y: uint32(x.g), Z: 1}
			for _, k := range []driver.Function{qah, qam, qal} {
				if err := c.Launch(k, chunked, driver.Dim3{X: 256, Y: 1, Z: 1}, 0, driver.Arg(&a), driver.Arg(&x), driver.Arg(&sel)); err != nil {
					return err
				}
			}
			if err := c.Launch(qas, driver.Dim3{X: uint32(x.g), Y: 1, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0,
				driver.Arg(&a), driver.Arg(&x), driver.Arg(&sel)); err != nil {
				return err
			}
		}
	}
	grid, block := grid1(int(a.rows)*32, 256)
	return c.Launch(rows, grid, block, 0, driver.Arg(&a), driver.Arg(&f), driver.Arg(&x))
}
