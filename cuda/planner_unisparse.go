package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// unisparsePlanner is unisparse.Planner on the device
// (kernels/plan_unisparse.cu and block_mass.cuh). Its composite tokens are
// the CPU planner's, bit for bit (stochastic pooling's PCG streams
// included); their logits are float32 tensor-core sums of bf16 halves
// where the CPU sums in float64, so a block whose cumulative mass lands
// within rounding of Top-P may be kept by one side only (the self-test's
// unisparseTieBreak states the bound). With the outlier query (the
// default) each query block's outlier token is the CPU's too, bit for bit;
// its logits against the individual keys are tensor-core sums as well
// (of the exact bf16 or f16 operands for one head per group, else of bf16
// halves), and its block masses are compared across column slices in
// log2 terms, so of two blocks within rounding of its heaviest either may
// be kept.
type unisparsePlanner struct{ u unisparse.Planner }

// newUnisparsePlanner returns the device planner of p.
func newUnisparsePlanner(p unisparse.Planner) (devicePlanner, error) {
	return unisparsePlanner{p}, nil
}

func (p unisparsePlanner) header(t plan.Tiling) (*plan.Plan, error) {
	c, err := p.u.Resolve(t)
	if err != nil {
		return nil, err
	}
	if err := bmCheck(t.BlockQ / c.CQ); err != nil {
		return nil, err
	}
	return &plan.Plan{Tiling: t}, nil
}

func (unisparsePlanner) sparse() bool { return true }

func (p unisparsePlanner) plan(c *driver.Ctx, in *planInput) error {
	cfg, err := p.u.Resolve(in.t)
	if err != nil {
		return err
	}
	a := in.args()
	g := in.t.Geometry
	groups := g.B * g.Hq / cfg.CH
	nq, nk := (g.Nq+cfg.CQ-1)/cfg.CQ, (g.Nk+cfg.CK-1)/cfg.CK
	stochastic := cfg.Pooling == unisparse.Stochastic
	perKV := cfg.CH == 1 && !stochastic
	keySets := groups
	if perKV {
		keySets = g.B * g.Hkv
	}
	// Composites as bf16 halves: [B][query sets][nq][D] and [B][key sets][nk][D].
	var halves [4]driver.Ptr
	for i, n := range []int{groups * nq, groups * nq, keySets * nk, keySets * nk} {
		if halves[i], err = in.scratch.get(c, fmt.Sprintf("unisparse.c%d", i), int64(n*g.D)*2); err != nil {
			return err
		}
	}
	// Stochastic pooling: token norms, then the PCG walks (streams 0 and 1
	// are the query and key draws of each head group).
	var pickQ, pickK driver.Ptr
	if stochastic {
		norms, err := in.scratch.get(c, "unisparse.norms", int64(groups*max(g.Nq, g.Nk))*8)
		if err != nil {
			return err
		}
		if pickQ, err = in.scratch.get(c, "unisparse.pickq", int64(groups*nq)*4); err != nil {
			return err
		}
		if pickK, err = in.scratch.get(c, "unisparse.pickk", int64(groups*nk)*4); err != nil {
			return err
		}
		fnN, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_norms", bmStubDefs...)
		if err != nil {
			return err
		}
		fnD, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_draw", bmStubDefs...)
		if err != nil {
			return err
		}
		for stream, s := range []struct {
			x          view
			ntok, comp int
			c          int
			pick       driver.Ptr
		}{{in.q, g.Nq, nq, cfg.CQ, pickQ}, {in.k, g.Nk, nk, cfg.CK, pickK}} {
			x, sets, ntok, ch, keys := s.x, int32(groups), int32(s.ntok), int32(cfg.CH), int32(stream)
			np, pp := uint64(norms), uint64(s.pick)
			grid, block := grid1(groups*s.ntok, 256)
			if err := c.Launch(fnN, grid, block, 0, driver.Arg(&a), driver.Arg(&x), driver.Arg(&np), driver.Arg(&sets), driver.Arg(&ntok), driver.Arg(&ch), driver.Arg(&keys)); err != nil {
				return err
			}
			ncomp, cc, seed, st := int32(s.comp), int32(s.c), cfg.Seed, int32(stream)
			grid, block = grid1(groups, 32)
			if err := c.Launch(fnD, grid, block, 0, driver.Arg(&a), driver.Arg(&np), driver.Arg(&pp), driver.Arg(&sets), driver.Arg(&ntok),
				driver.Arg(&ncomp), driver.Arg(&cc), driver.Arg(&ch), driver.Arg(&seed), driver.Arg(&st)); err != nil {
				return err
			}
		}
	}
	// Composite queries (scaled) and keys (UniSparse Eq. 2–3); averages
	// over one head per set take uni_pool_avg, the same sums with fewer
	// registers.
	fnP, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_pool", bmStubDefs...)
	if err != nil {
		return err
	}
	avg := cfg.Pooling == unisparse.Average && cfg.CH == 1
	var fnA driver.Function
	if avg {
		if fnA, err = in.e.auxFunction(c, "plan_unisparse.cu", "uni_pool_avg", bmStubDefs...); err != nil {
			return err
		}
	}
	pooling := int32(cfg.Pooling)
	// With the outlier query and average pooling, uni_outlier (outliers,
	// below) writes the composite queries: its means are theirs.
	fused := cfg.Outlier && cfg.Pooling == unisparse.Average
	for _, s := range []struct {
		x           view
		hi, lo      driver.Ptr
		sets, ntok  int
		comp, c     int
		keys, perKV bool
		pick        driver.Ptr
		scale       float32
	}{
		{in.q, halves[0], halves[1], groups, g.Nq, nq, cfg.CQ, false, false, pickQ, a.scale},
		{in.k, halves[2], halves[3], keySets, g.Nk, nk, cfg.CK, true, perKV, pickK, 0},
	} {
		if fused && !s.keys {
			continue
		}
		x, hi, lo, sets, ntok, ncomp, cc, ch := s.x, uint64(s.hi), uint64(s.lo), int32(s.sets), int32(s.ntok), int32(s.comp), int32(s.c), int32(cfg.CH)
		keys, pkv, pick, scale := uniFlag(s.keys), uniFlag(s.perKV), uint64(s.pick), s.scale
		grid, block := grid1(s.sets*s.comp*((g.D+7)/8), 256) // eight elements a thread
		if avg {
			if err := c.Launch(fnA, grid, block, 0, driver.Arg(&a), driver.Arg(&x), driver.Arg(&hi), driver.Arg(&lo), driver.Arg(&sets), driver.Arg(&ntok), driver.Arg(&ncomp),
				driver.Arg(&cc), driver.Arg(&keys), driver.Arg(&pkv), driver.Arg(&scale)); err != nil {
				return err
			}
			continue
		}
		if err := c.Launch(fnP, grid, block, 0, driver.Arg(&a), driver.Arg(&x), driver.Arg(&hi), driver.Arg(&lo), driver.Arg(&sets), driver.Arg(&ntok), driver.Arg(&ncomp),
			driver.Arg(&cc), driver.Arg(&ch), driver.Arg(&keys), driver.Arg(&pkv), driver.Arg(&pooling), driver.Arg(&pick), driver.Arg(&scale)); err != nil {
			return err
		}
	}
	// Compressed attention, block masses and Top-P (Eq. 4–6). A key set's
	// head groups share work items, so that staged keys serve all of them.
	hpi, hk := 1, g.Hq/cfg.CH
	if perKV {
		hpi, hk = g.Hq/g.Hkv, g.Hkv
	}
	D := int64(g.D)
	m := bmMass{file: "plan_unisparse.cu", split: true, nrows: nq, ncols: nk, cq: cfg.CQ, ck: cfg.CK, visLast: true,
		per: in.t.BlockK / cfg.CK, hk: hk, hpi: hpi, ch: cfg.CH, rule: bmRuleTopP, thresh: cfg.TopP,
		lscale: 1, // the composite queries carry the softmax scale
		q:      bmOpOf(uint64(halves[0]), uint64(halves[1]), int64(g.Hq/cfg.CH*nq)*D, int64(nq)*D, D, nq, g.D, 1, false),
		k:      bmOpOf(uint64(halves[2]), uint64(halves[3]), int64(hk*nk)*D, int64(nk)*D, D, nk, g.D, 1, false)}
	if cfg.Outlier {
		var cq [2]driver.Ptr
		if fused {
			cq = [2]driver.Ptr{halves[0], halves[1]}
		}
		if m.extra, err = p.outliers(c, in, cfg, m, cq); err != nil {
			return err
		}
	}
	return m.launch(c, in, "unisparse")
}

// outliers runs the outlier query (method/unisparse's outlier.go, our
// extension of the paper's block selection) and returns its table of
// extra blocks, [B][Hq/CH][query blocks] int32: each query block's outlier
// token (uni_outlier) against every individual key its block sees, each
// row's heaviest KV block (bm_mass with BM_ARGMAX, in column slices, to
// ordered keys that uni_extra decodes). Work items take eight query
// blocks' outlier rows of one head at a time, so that their 128 rows fill.
//
// With one head per group and 16-bit inputs of one type (uniRaw) the
// outlier tokens and the keys are exact inputs: the tokens are written as
// they are, the keys read in place, and the softmax scale is the logit
// scale, so each product takes one MMA of exact operands summed in
// float32 (the CPU rounds the scaled token to float32 first; the two
// differ by rounding well inside the self-test's bound). Otherwise (c_h >
// 1 averages heads; float32 inputs) the scaled tokens and the individual
// keys are written as bf16 halves, as the composites are.
//
// With cq (average pooling) uni_outlier also writes the composite queries,
// scaled, as bf16 halves at cq[0] and cq[1]: the means it takes are
// theirs, so the queries are read once.
//
// Both bm_mass launches share the scratch arrays "unisparse.e" and
// ".mass", grown here to the larger launch's needs before either runs, so
// that neither reallocates them while the other may be in flight.
func (p unisparsePlanner) outliers(c *driver.Ctx, in *planInput, cfg unisparse.Config, main bmMass, cq [2]driver.Ptr) (uint64, error) {
	a := in.args()
	g := in.t.Geometry
	qbs := qBlocks(in.t)
	groups := g.B * g.Hq / cfg.CH
	raw := uniRaw(in, cfg)
	// Key sets: the KV heads for one head per group (the individual keys
	// are the same whatever the pooling), else the head groups.
	keySets, hk, hpi := groups, g.Hq/cfg.CH, 1
	if cfg.CH == 1 {
		keySets, hk, hpi = g.B*g.Hkv, g.Hkv, g.Hq/g.Hkv
	}
	var o [4]driver.Ptr // outlier tokens' and individual keys' halves (raw: o[0] alone)
	for i, n := range []int{groups * qbs, groups * qbs, keySets * g.Nk, keySets * g.Nk} {
		if raw && i > 0 {
			break
		}
		var err error
		if o[i], err = in.scratch.get(c, fmt.Sprintf("unisparse.o%d", i), int64(n*g.D)*2); err != nil {
			return 0, err
		}
	}
	extra, err := in.scratch.get(c, "unisparse.extra", int64(groups*qbs)*4)
	if err != nil {
		return 0, err
	}
	// The argmax keys, then the launch's unit counter; zero before it.
	nkeys := int64(groups * qbs)
	keys, err := in.scratch.get(c, "unisparse.xkey", nkeys*8+8)
	if err != nil {
		return 0, err
	}
	if err := c.Memset(keys, 0, nkeys*8+8); err != nil {
		return 0, err
	}
	fnO, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_outlier", bmStubDefs...)
	if err != nil {
		return 0, err
	}
	// Composite groups' means per pass: a block's, within 32 KB.
	gpp := max(1, min(in.t.BlockQ/cfg.CQ, 8192/g.D))
	x, hi, lo, cc, ch, scale, rw, gp := in.q, uint64(o[0]), uint64(o[1]), int32(cfg.CQ), int32(cfg.CH), a.scale, uniFlag(raw), int32(gpp)
	cqHi, cqLo, nq := uint64(cq[0]), uint64(cq[1]), int32((g.Nq+cfg.CQ-1)/cfg.CQ)
	smemO := gpp * g.D * 4
	if n := uniOutlier16Smem(g.D, in.t.BlockQ, gpp); cfg.CH == 1 && uniOutlier16(g.D, in.q) && n <= min(uniOutlierStageMax, in.e.dev.MaxSharedOptin) {
		if fnO, err = in.e.auxFunction(c, "plan_unisparse.cu", "uni_outlier16", bmStubDefs...); err != nil {
			return 0, err
		}
		if err := in.e.raiseDynamicShared(c, fnO, n); err != nil {
			return 0, err
		}
		smemO = n
	}
	if err := c.Launch(fnO, driver.Dim3{X: uint32(groups * qbs), Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, smemO,
		driver.Arg(&a), driver.Arg(&x), driver.Arg(&hi), driver.Arg(&lo), driver.Arg(&cc), driver.Arg(&ch), driver.Arg(&scale), driver.Arg(&rw), driver.Arg(&gp),
		driver.Arg(&cqHi), driver.Arg(&cqLo), driver.Arg(&nq)); err != nil {
		return 0, err
	}
	D := int64(g.D)
	m := bmMass{file: "plan_unisparse.cu", nrows: qbs, ncols: g.Nk, cq: in.t.BlockQ, ck: 1, visLast: true,
		per: in.t.BlockK, hk: hk, hpi: hpi, ch: cfg.CH, rule: bmRuleTopP, thresh: cfg.TopP,
		xkey: uint64(keys), next: uint64(keys) + uint64(nkeys*8), argmax: true, group: 8}
	if raw {
		m.f16 = in.q.dtype == dtypeCode(tensor.Float16)
		m.lscale = float64(a.scale) // the tokens are unscaled
		m.q = bmOpOf(uint64(o[0]), 0, int64(g.Hq*qbs)*D, int64(qbs)*D, D, qbs, g.D, 1, false)
		m.k = bmViewOp(in.k, 1, false)
	} else {
		if err := p.outlierKeys(c, in, cfg, o[2], o[3], keySets); err != nil {
			return 0, err
		}
		m.split, m.lscale = true, 1 // the outlier tokens carry the softmax scale
		m.q = bmOpOf(uint64(o[0]), uint64(o[1]), int64(g.Hq/cfg.CH*qbs)*D, int64(qbs)*D, D, qbs, g.D, 1, false)
		m.k = bmOpOf(uint64(o[2]), uint64(o[3]), int64(hk*g.Nk)*D, int64(g.Nk)*D, D, g.Nk, g.D, 1, false)
	}
	var ework, mass int64
	for _, x := range []bmMass{m, main} {
		sh, err := x.shape(in)
		if err != nil {
			return 0, err
		}
		ework, mass = max(ework, sh.ework), max(mass, sh.mass)
	}
	if _, err := in.scratch.get(c, "unisparse.e", ework); err != nil {
		return 0, err
	}
	if _, err := in.scratch.get(c, "unisparse.mass", mass); err != nil {
		return 0, err
	}
	if err := m.launch(c, in, "unisparse"); err != nil {
		return 0, err
	}
	fnE, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_extra", bmStubDefs...)
	if err != nil {
		return 0, err
	}
	kp, ep, n := uint64(keys), uint64(extra), int32(nkeys)
	grid, block := grid1(int(nkeys), 256)
	return uint64(extra), c.Launch(fnE, grid, block, 0, driver.Arg(&kp), driver.Arg(&ep), driver.Arg(&n))
}

// uniRaw reports whether the outlier query can read its operands as they
// are: one head per group and 16-bit inputs of one type.
func uniRaw(in *planInput, cfg unisparse.Config) bool {
	return cfg.CH == 1 && in.q.dtype == in.k.dtype && !isF32(in.q)
}

// outlierKeys writes the individual keys of the keySets key sets (KV
// heads for one head per group, else head groups) as bf16 halves at hi
// and lo, [key set][Nk][D]: composites of one token, averaged (exactly the
// token, head-averaged for c_h > 1) whatever the pooling.
func (unisparsePlanner) outlierKeys(c *driver.Ctx, in *planInput, cfg unisparse.Config, hi, lo driver.Ptr, keySets int) error {
	a := in.args()
	g := in.t.Geometry
	kx, khi, klo, sets, ntok, one, keys, pkv, zero := in.k, uint64(hi), uint64(lo), int32(keySets), int32(g.Nk), int32(1), int32(1), uniFlag(cfg.CH == 1), float32(0)
	grid, block := grid1(keySets*g.Nk*((g.D+7)/8), 256)
	if cfg.CH == 1 {
		fnA, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_pool_avg", bmStubDefs...)
		if err != nil {
			return err
		}
		return c.Launch(fnA, grid, block, 0, driver.Arg(&a), driver.Arg(&kx), driver.Arg(&khi), driver.Arg(&klo), driver.Arg(&sets), driver.Arg(&ntok), driver.Arg(&ntok),
			driver.Arg(&one), driver.Arg(&keys), driver.Arg(&pkv), driver.Arg(&zero))
	}
	fnP, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_pool", bmStubDefs...)
	if err != nil {
		return err
	}
	ch, average, pick := int32(cfg.CH), int32(unisparse.Average), uint64(0)
	return c.Launch(fnP, grid, block, 0, driver.Arg(&a), driver.Arg(&kx), driver.Arg(&khi), driver.Arg(&klo), driver.Arg(&sets), driver.Arg(&ntok), driver.Arg(&ntok),
		driver.Arg(&one), driver.Arg(&ch), driver.Arg(&keys), driver.Arg(&pkv), driver.Arg(&average), driver.Arg(&pick), driver.Arg(&zero))
}

// uniFlag is 1 for true and 0 for false, as the kernels take flags.
func uniFlag(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// uniOutlierStageMax is the most shared memory uni_outlier16 stages a block
// in (two CTAs a multiprocessor); larger blocks take uni_outlier.
const uniOutlierStageMax = 112 << 10

// uniOutlier16 reports whether uni_outlier16 (kernels/uni_outlier.cuh)
// takes the queries v at head dimension d, given one head per group:
// 16-bit elements, d a multiple of 8, every row at a 16-byte boundary.
func uniOutlier16(d int, v view) bool {
	half := v.dtype == dtypeCode(tensor.BFloat16) || v.dtype == dtypeCode(tensor.Float16)
	return half && d%8 == 0 && v.ptr%16 == 0 && v.sb%8 == 0 && v.sh%8 == 0 && v.sn%8 == 0
}

// uniOutlier16Smem is uni_outlier16's dynamic shared memory: bq staged
// rows of d 16-bit elements in an odd number of 16-byte pieces, then gpp
// composite means of d floats.
func uniOutlier16Smem(d, bq, gpp int) int { return (bq*(d/8|1)*4 + gpp*d) * 4 }
