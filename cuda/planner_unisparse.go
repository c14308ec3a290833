package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/plan"
)

// unisparsePlanner is unisparse.Planner on the device
// (kernels/plan_unisparse.cu). It repeats the CPU planner's canonical
// arithmetic operation for operation, stochastic pooling's PCG streams
// included, so its plans are the CPU planner's.
type unisparsePlanner struct{ u unisparse.Planner }

// newUnisparsePlanner returns the device planner of p.
func newUnisparsePlanner(p unisparse.Planner) (devicePlanner, error) {
	return unisparsePlanner{p}, nil
}

// The tiling of the mass kernels in kernels/plan_unisparse.cu and
// plan_xattn.cu (UT, URP, UMS, UDC, UTK).
const (
	uniThreads  = 256
	uniPassRows = 32
	uniMaxSegs  = 4
	uniDimTile  = 16
	uniMaxKeys  = 128
)

// massLaunch returns the key tile, the segments per work item, the number
// of CTAs, the per-CTA scratch doubles and the dynamic shared memory of a
// mass kernel for KV blocks of per keys (or key groups), rows query rows
// per query block and work items work.
func massLaunch(e *Engine, t plan.Tiling, per, rows, segments int) (tk, spi, ctas, scratch, shared int) {
	tk = per * (uniMaxKeys / per)
	spi = min(uniMaxSegs, max(1, uniPassRows/max(rows, 1)))
	kb := kBlocks(t)
	work := (segments + spi - 1) / spi
	ctas = max(1, min(work, 2*e.Info().SMs))
	scratch = kb * (uniMaxSegs + 2*uniPassRows)
	p2 := 1
	for p2 < kb {
		p2 <<= 1
	}
	gemm := uniDimTile*uniPassRows*8 + uniPassRows*(tk+tk/per)*8 + uniDimTile*(tk+1)*4 // qs, lg, ks
	shared = max(gemm, p2*13)
	return
}

// uniArgs mirrors struct UniArgs in kernels/plan_unisparse.cu.
type uniArgs struct {
	cq, ck, scratch uint64
	nq, nk, l       int32
	cqf, ckf, ch    int32
	ksets, keyPerKV int32
	per, tk         int32
	hpi, spi        int32
	topP            float64
}

func (p unisparsePlanner) header(t plan.Tiling) (*plan.Plan, error) {
	c, err := p.u.Resolve(t)
	if err != nil {
		return nil, err
	}
	if per := t.BlockK / c.CK; per > uniMaxKeys {
		return nil, fmt.Errorf("%w: the unisparse device planner takes at most %d composite keys per KV block, got BlockK/CK = %d", ErrUnsupported, uniMaxKeys, per)
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
	cq, err := in.scratch.get(c, "unisparse.cq", int64(groups*nq*g.D)*4)
	if err != nil {
		return err
	}
	ck, err := in.scratch.get(c, "unisparse.ck", int64(keySets*nk*g.D)*4)
	if err != nil {
		return err
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
		fnN, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_norms")
		if err != nil {
			return err
		}
		fnD, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_draw")
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
	// Composite queries (scaled) and keys (UniSparse Eq. 2–3).
	fnP, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_pool")
	if err != nil {
		return err
	}
	pooling := int32(cfg.Pooling)
	for _, s := range []struct {
		x           view
		out         driver.Ptr
		sets, ntok  int
		comp, c     int
		keys, perKV bool
		pick        driver.Ptr
		scale       float32
	}{
		{in.q, cq, groups, g.Nq, nq, cfg.CQ, false, false, pickQ, a.scale},
		{in.k, ck, keySets, g.Nk, nk, cfg.CK, true, perKV, pickK, 0},
	} {
		x, out, sets, ntok, ncomp, cc, ch := s.x, uint64(s.out), int32(s.sets), int32(s.ntok), int32(s.comp), int32(s.c), int32(cfg.CH)
		keys, pkv, pick, scale := uniFlag(s.keys), uniFlag(s.perKV), uint64(s.pick), s.scale
		grid, block := grid1(s.sets*s.comp*g.D, 256)
		if err := c.Launch(fnP, grid, block, 0, driver.Arg(&a), driver.Arg(&x), driver.Arg(&out), driver.Arg(&sets), driver.Arg(&ntok), driver.Arg(&ncomp),
			driver.Arg(&cc), driver.Arg(&ch), driver.Arg(&keys), driver.Arg(&pkv), driver.Arg(&pooling), driver.Arg(&pick), driver.Arg(&scale)); err != nil {
			return err
		}
	}
	// Compressed attention, block masses and Top-P (Eq. 4–6). A key set's
	// head groups share work items, so that staged keys serve all of them.
	per := in.t.BlockK / cfg.CK
	hpi := 1
	if perKV {
		hpi = g.Hq / g.Hkv
	}
	tk, spi, ctas, perCTA, shared := massLaunch(in.e, in.t, per, in.t.BlockQ/cfg.CQ, qBlocks(in.t)*hpi*keySets)
	scratch, err := in.scratch.get(c, "unisparse.mass", int64(ctas*perCTA)*8)
	if err != nil {
		return err
	}
	fnM, err := in.e.auxFunction(c, "plan_unisparse.cu", "uni_mass")
	if err != nil {
		return err
	}
	if shared > 48<<10 {
		if err := c.SetMaxDynamicShared(fnM, shared); err != nil {
			return err
		}
	}
	u := uniArgs{cq: uint64(cq), ck: uint64(ck), scratch: uint64(scratch), nq: int32(nq), nk: int32(nk), l: int32(g.D),
		cqf: int32(cfg.CQ), ckf: int32(cfg.CK), ch: int32(cfg.CH), ksets: int32(keySets), keyPerKV: uniFlag(perKV),
		per: int32(per), tk: int32(tk), hpi: int32(hpi), spi: int32(spi), topP: cfg.TopP}
	return c.Launch(fnM, driver.Dim3{X: uint32(ctas), Y: 1, Z: 1}, driver.Dim3{X: uniThreads, Y: 1, Z: 1}, shared, driver.Arg(&a), driver.Arg(&u))
}

// uniFlag is 1 for true and 0 for false, as the kernels take flags.
func uniFlag(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
