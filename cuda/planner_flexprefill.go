package cuda

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/plan"
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
	f := p.f
	if !(f.Gamma > 0 && f.Gamma <= 1) {
		return nil, fmt.Errorf("%w: flexprefill γ=%v must be in (0, 1]", plan.ErrInvalid, f.Gamma)
	}
	if !(f.Tau >= 0) || math.IsInf(f.Tau, 0) {
		return nil, fmt.Errorf("%w: flexprefill τ=%v must be finite and ≥ 0", plan.ErrInvalid, f.Tau)
	}
	if f.MinBudget < 0 || f.MaxBudget < 0 || (f.MaxBudget > 0 && f.MaxBudget < f.MinBudget) {
		return nil, fmt.Errorf("%w: flexprefill budgets %d..%d must be ≥ 0 with MaxBudget ≥ MinBudget (0: no bound)", plan.ErrInvalid, f.MinBudget, f.MaxBudget)
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

// qaScratchBytes bounds the query-aware pair weights of one head group.
const qaScratchBytes = 1 << 30

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
	if err != nil {
		return err
	}
	if err := c.Launch(keymeans, driver.Dim3{X: uint32(nkb), Y: uint32(g.B * g.Hkv), Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
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
		if err := c.Launch(qmeans, driver.Dim3{X: uint32(qbs), Y: uint32(heads), Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
			driver.Arg(&a), driver.Arg(&in.q), driver.Arg(&x)); err != nil {
			return err
		}
		for h0 := 0; h0 < heads; h0 += grpQA {
			x.head0, x.g = int32(h0), int32(min(grpQA, heads-h0))
			if err := c.Launch(qad, driver.Dim3{X: uint32((qbs + 15) / 16), Y: uint32(x.g), Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0,
				driver.Arg(&a), driver.Arg(&x)); err != nil {
				return err
			}
			grid, block := grid1(int(x.g)*qbs*32, 256)
			if err := c.Launch(qasm, grid, block, 0, driver.Arg(&a), driver.Arg(&x)); err != nil {
				return err
			}
			if err := c.Launch(qas, driver.Dim3{X: uint32(x.g), Y: 1, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0,
				driver.Arg(&a), driver.Arg(&x)); err != nil {
				return err
			}
		}
	}
	grid, block := grid1(int(a.rows)*32, 256)
	return c.Launch(rows, grid, block, 0, driver.Arg(&a), driver.Arg(&f), driver.Arg(&x))
}
