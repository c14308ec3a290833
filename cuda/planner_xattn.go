package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
)

// xattnPlanner is xattn.Planner on the device (kernels/plan_xattn.cu). It
// repeats the CPU planner's canonical arithmetic operation for operation,
// so its plans are the CPU planner's.
type xattnPlanner struct{ x xattn.Planner }

// newXattnPlanner returns the device planner of p.
func newXattnPlanner(p xattn.Planner) (devicePlanner, error) {
	return xattnPlanner{p}, nil
}

// xattnArgs mirrors struct XattnArgs in kernels/plan_xattn.cu.
type xattnArgs struct {
	rq, rk    uint64
	scratch   uint64
	s, per    int32
	tk, spi   int32
	threshold float64
}

func (p xattnPlanner) header(t plan.Tiling) (*plan.Plan, error) {
	if err := p.x.Check(t); err != nil {
		return nil, err
	}
	if per := t.BlockK / p.x.Stride; per > uniMaxKeys {
		return nil, fmt.Errorf("%w: the xattn device planner takes at most %d key groups per KV block, got BlockK/Stride = %d", ErrUnsupported, uniMaxKeys, per)
	}
	return &plan.Plan{Tiling: t}, nil
}

func (xattnPlanner) sparse() bool { return true }

func (p xattnPlanner) plan(c *driver.Ctx, in *planInput) error {
	if err := p.x.Check(in.t); err != nil {
		return err
	}
	a := in.args()
	g := in.t.Geometry
	per := in.t.BlockK / p.x.Stride
	// The heads of a KV head share work items, so that staged key groups
	// serve all of them.
	tk, spi, ctas, perCTA, shared := massLaunch(in.e, in.t, per, in.t.BlockQ/p.x.Stride, qBlocks(in.t)*g.B*g.Hq)
	scratch, err := in.scratch.get(c, "xattn.mass", int64(ctas*perCTA)*8)
	if err != nil {
		return err
	}
	// The reshaped rows: query groups reversed, key groups in order
	// (XAttention §2.1), as float32.
	S := p.x.Stride
	qg, kgr := (g.Nq+S-1)/S, (g.Nk+S-1)/S
	rq, err := in.scratch.get(c, "xattn.rq", int64(g.B*g.Hq*qg*S*g.D)*4)
	if err != nil {
		return err
	}
	rk, err := in.scratch.get(c, "xattn.rk", int64(g.B*g.Hkv*kgr*S*g.D)*4)
	if err != nil {
		return err
	}
	fnR, err := in.e.auxFunction(c, "plan_xattn.cu", "xattn_reshape")
	if err != nil {
		return err
	}
	for _, r := range []struct {
		x          view
		out        driver.Ptr
		sets, grps int
		reverse    int32
	}{{in.q, rq, g.B * g.Hq, qg, 1}, {in.k, rk, g.B * g.Hkv, kgr, 0}} {
		x, out, sets, ngroups, s32, rev := r.x, uint64(r.out), int32(r.sets), int32(r.grps), int32(S), r.reverse
		grid, block := grid1(r.sets*r.grps*S*g.D, 256)
		if err := c.Launch(fnR, grid, block, 0, driver.Arg(&x), driver.Arg(&out), driver.Arg(&sets), driver.Arg(&ngroups), driver.Arg(&s32), driver.Arg(&rev)); err != nil {
			return err
		}
	}
	fn, err := in.e.auxFunction(c, "plan_xattn.cu", "xattn_mass")
	if err != nil {
		return err
	}
	if shared > 48<<10 {
		if err := c.SetMaxDynamicShared(fn, shared); err != nil {
			return err
		}
	}
	x := xattnArgs{rq: uint64(rq), rk: uint64(rk), scratch: uint64(scratch), s: int32(p.x.Stride), per: int32(per), tk: int32(tk), spi: int32(spi), threshold: p.x.Threshold}
	return c.Launch(fn, driver.Dim3{X: uint32(ctas), Y: 1, Z: 1}, driver.Dim3{X: uniThreads, Y: 1, Z: 1}, shared, driver.Arg(&a), driver.Arg(&x))
}
