package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/plan"
)

// unisparsePlanner is unisparse.Planner on the device
// (kernels/plan_unisparse.cu and block_mass.cuh). Its composite tokens are
// the CPU planner's, bit for bit (stochastic pooling's PCG streams
// included); their logits are float32 tensor-core sums of bf16 halves
// where the CPU sums in float64, so a block whose cumulative mass lands
// within rounding of Top-P may be kept by one side only (the self-test's
// unisparseTieBreak states the bound). With the outlier query (the
// default) each query block's outlier token is the CPU's too, bit for bit;
// its logits against the individual keys are tensor-core sums as well, so
// of two blocks within rounding of its heaviest either may be kept.
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
		if m.extra, err = p.outliers(c, in, cfg, m, groups, keySets, hk, hpi, perKV); err != nil {
			return err
		}
	}
	return m.launch(c, in, "unisparse")
}

// outliers runs the outlier query (method/unisparse's outlier.go, our
// extension of the paper's block selection) and returns its table of
// extra blocks, [B][Hq/CH][query blocks] int32: each query block's outlier
// token (uni_outlier), scaled, against every individual key its block sees
// (uni_pool with one token per composite), each row's heaviest KV block
// (bm_mass with BM_ARGMAX). Work items take eight query blocks' outlier
// rows of one head at a time, so that their 128 rows fill.
//
// Both bm_mass launches share the scratch arrays "unisparse.e" and
// ".mass", grown here to the larger launch's needs before either runs, so
// that neither reallocates them while the other may be in flight.
func (p unisparsePlanner) outliers(c *driver.Ctx, in *planInput, cfg unisparse.Config, main bmMass, groups, keySets, hk, hpi int, perKV bool) (uint64, error) {
	a := in.args()
	g := in.t.Geometry
	qbs := qBlocks(in.t)
	var o [4]driver.Ptr // outlier tokens' and individual keys' halves
	for i, n := range []int{groups * qbs, groups * qbs, keySets * g.Nk, keySets * g.Nk} {
		var err error
		if o[i], err = in.scratch.get(c, fmt.Sprintf("unisparse.o%d", i), int64(n*g.D)*2); err != nil {
			return 0, err
		}
	}
	extra, err := in.scratch.get(c, "unisparse.extra", int64(groups*qbs)*4)
	if err != nil {
		return 0, err
	}
	fnO, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_outlier", bmStubDefs...)
	if err != nil {
		return 0, err
	}
	x, hi, lo, cq, ch, scale := in.q, uint64(o[0]), uint64(o[1]), int32(cfg.CQ), int32(cfg.CH), a.scale
	if err := c.Launch(fnO, driver.Dim3{X: uint32(groups * qbs), Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, g.D*4,
		driver.Arg(&a), driver.Arg(&x), driver.Arg(&hi), driver.Arg(&lo), driver.Arg(&cq), driver.Arg(&ch), driver.Arg(&scale)); err != nil {
		return 0, err
	}
	// The individual keys: composites of one token, averaged (exactly the
	// token, head-averaged for c_h > 1) whatever the pooling.
	kx, khi, klo, sets, ntok, one, keys, pkv, zero := in.k, uint64(o[2]), uint64(o[3]), int32(keySets), int32(g.Nk), int32(1), int32(1), uniFlag(perKV), float32(0)
	grid, block := grid1(keySets*g.Nk*((g.D+7)/8), 256)
	if cfg.CH == 1 {
		fnA, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_pool_avg", bmStubDefs...)
		if err != nil {
			return 0, err
		}
		if err := c.Launch(fnA, grid, block, 0, driver.Arg(&a), driver.Arg(&kx), driver.Arg(&khi), driver.Arg(&klo), driver.Arg(&sets), driver.Arg(&ntok), driver.Arg(&ntok),
			driver.Arg(&one), driver.Arg(&keys), driver.Arg(&pkv), driver.Arg(&zero)); err != nil {
			return 0, err
		}
	} else {
		fnP, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_pool", bmStubDefs...)
		if err != nil {
			return 0, err
		}
		average, pick := int32(unisparse.Average), uint64(0)
		if err := c.Launch(fnP, grid, block, 0, driver.Arg(&a), driver.Arg(&kx), driver.Arg(&khi), driver.Arg(&klo), driver.Arg(&sets), driver.Arg(&ntok), driver.Arg(&ntok),
			driver.Arg(&one), driver.Arg(&ch), driver.Arg(&keys), driver.Arg(&pkv), driver.Arg(&average), driver.Arg(&pick), driver.Arg(&zero)); err != nil {
			return 0, err
		}
	}
	D := int64(g.D)
	m := bmMass{file: "plan_unisparse.cu", split: true, nrows: qbs, ncols: g.Nk, cq: in.t.BlockQ, ck: 1, visLast: true,
		per: in.t.BlockK, hk: hk, hpi: hpi, ch: cfg.CH, rule: bmRuleTopP, thresh: cfg.TopP,
		lscale: 1, // the outlier tokens carry the softmax scale
		q:      bmOpOf(uint64(o[0]), uint64(o[1]), int64(g.Hq/cfg.CH*qbs)*D, int64(qbs)*D, D, qbs, g.D, 1, false),
		k:      bmOpOf(uint64(o[2]), uint64(o[3]), int64(hk*g.Nk)*D, int64(g.Nk)*D, D, g.Nk, g.D, 1, false),
		extra:  uint64(extra), argmax: true, group: 8}
	var ework, mass int64
	for _, x := range []bmMass{m, main} {
		_, _, _, _, e, ms, err := x.shape(in)
		if err != nil {
			return 0, err
		}
		ework, mass = max(ework, e), max(mass, ms)
	}
	if _, err := in.scratch.get(c, "unisparse.e", ework); err != nil {
		return 0, err
	}
	if _, err := in.scratch.get(c, "unisparse.mass", mass); err != nil {
		return 0, err
	}
	return uint64(extra), m.launch(c, in, "unisparse")
}

// uniFlag is 1 for true and 0 for false, as the kernels take flags.
func uniFlag(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
