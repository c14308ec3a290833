package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/plan"
)

// minferencePlanner is minference.Planner on the device
// (kernels/plan_minference.cu): the probe, the vertical and slash sums and
// the top-k lines are computed as the CPU computes them, so the plans are
// identical.
type minferencePlanner struct{ m minference.Planner }

// newMinferencePlanner returns the device planner of p.
func newMinferencePlanner(p minference.Planner) (devicePlanner, error) {
	return minferencePlanner{p}, nil
}

func (p minferencePlanner) header(t plan.Tiling) (*plan.Plan, error) {
	m := p.m.ForLength(t.Geometry.Nk)
	if m.LastQ < 1 || m.Vertical < 1 || m.Slash < 1 {
		return nil, fmt.Errorf("%w: minference needs LastQ, Vertical and Slash ≥ 1, got %d, %d and %d", plan.ErrInvalid, m.LastQ, m.Vertical, m.Slash)
	}
	return &plan.Plan{Tiling: t}, nil
}

func (minferencePlanner) sparse() bool { return true }

// probeArgs mirrors struct ProbeArgs in kernels/plan_minference.cu.
type probeArgs struct {
	e, m, s, v, sl     uint64
	head0, g, n, tiles int32
}

// miArgs mirrors struct MiArgs in kernels/plan_minference.cu.
type miArgs struct {
	vflag, cs                      uint64
	vertical, slash, sinks, recent int32
}

// probeScratchBytes bounds the float32 exponentials of one head group.
const probeScratchBytes = 256 << 20

// probeGroups runs the probe of the last n queries (probe.Last) for every
// head, in groups of heads whose exponentials fit probeScratchBytes, and
// calls each(group) after the group's vertical and slash sums are in
// group.v and group.sl.
func probeGroups(c *driver.Ctx, in *planInput, n int, each func(pa *probeArgs) error) error {
	g := in.t.Geometry
	a := in.args()
	heads := g.B * g.Hq
	tiles := (g.Nk + minference.ProbeTile - 1) / minference.ProbeTile
	perHead := int64(n) * int64(g.Nk) * 4
	grp := int(max(1, min(int64(heads), probeScratchBytes/max(perHead, 1))))
	var pa probeArgs
	var err error
	ptr := func(name string, bytes int64) uint64 {
		if err != nil {
			return 0
		}
		var p driver.Ptr
		p, err = in.scratch.get(c, name, max(bytes, 8))
		return uint64(p)
	}
	pa.e = ptr("probe.e", int64(grp)*perHead)
	pa.m = ptr("probe.m", int64(grp)*int64(n)*int64(tiles)*8)
	pa.s = ptr("probe.s", int64(grp)*int64(n)*int64(tiles)*8)
	pa.v = ptr("probe.v", int64(grp)*int64(g.Nk)*8)
	pa.sl = ptr("probe.sl", int64(grp)*int64(2*g.Nk-1)*8)
	if err != nil {
		return err
	}
	fns := map[string]driver.Function{}
	for _, name := range []string{"probe_logits", "probe_norm", "probe_vertical", "probe_slash"} {
		if fns[name], err = in.e.auxFunction(c, "plan_minference.cu", name); err != nil {
			return err
		}
	}
	pa.n, pa.tiles = int32(n), int32(tiles)
	for h0 := 0; h0 < heads; h0 += grp {
		pa.head0, pa.g = int32(h0), int32(min(grp, heads-h0))
		G := int(pa.g)
		if err := c.Launch(fns["probe_logits"], driver.Dim3{X: uint32(tiles), Y: uint32((n + 63) / 64), Z: uint32(G)}, driver.Dim3{X: 256, Y: 1, Z: 1}, 0,
			driver.Arg(&a), driver.Arg(&in.q), driver.Arg(&in.k), driver.Arg(&pa)); err != nil {
			return err
		}
		grid, block := grid1(G*n*32, 256)
		if err := c.Launch(fns["probe_norm"], grid, block, 0, driver.Arg(&pa)); err != nil {
			return err
		}
		grid, block = grid1(G*g.Nk, 256)
		if err := c.Launch(fns["probe_vertical"], grid, block, 0, driver.Arg(&a), driver.Arg(&pa)); err != nil {
			return err
		}
		grid, block = grid1(G*(2*g.Nk-1), 256)
		if err := c.Launch(fns["probe_slash"], grid, block, 0, driver.Arg(&a), driver.Arg(&pa)); err != nil {
			return err
		}
		if err := each(&pa); err != nil {
			return err
		}
	}
	return nil
}

func (p minferencePlanner) plan(c *driver.Ctx, in *planInput) error {
	g := in.t.Geometry
	a := in.args()
	heads := g.B * g.Hq
	nkb := kBlocks(in.t)
	vflag, err := in.scratch.get(c, "mi.vflag", int64(heads)*int64(nkb))
	if err != nil {
		return err
	}
	cs, err := in.scratch.get(c, "mi.cs", int64(heads)*int64(2*g.Nk)*4)
	if err != nil {
		return err
	}
	if err := c.Memset(vflag, 0, int64(heads)*int64(nkb)); err != nil {
		return err
	}
	sel, err := in.e.auxFunction(c, "plan_minference.cu", "mi_select")
	if err != nil {
		return err
	}
	rows, err := in.e.auxFunction(c, "plan_minference.cu", "mi_rows")
	if err != nil {
		return err
	}
	m := p.m.ForLength(g.Nk)
	ma := miArgs{vflag: uint64(vflag), cs: uint64(cs), vertical: int32(min(m.Vertical, 1<<30)), slash: int32(min(m.Slash, 1<<30)),
		sinks: minference.SinkKeys, recent: minference.RecentSlashes}
	n := min(m.LastQ, g.Nq)
	err = probeGroups(c, in, n, func(pa *probeArgs) error {
		return c.Launch(sel, driver.Dim3{X: uint32(pa.g), Y: 2, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0,
			driver.Arg(&a), driver.Arg(pa), driver.Arg(&ma))
	})
	if err != nil {
		return err
	}
	grid, block := grid1(int(a.rows)*32, 256)
	return c.Launch(rows, grid, block, 0, driver.Arg(&a), driver.Arg(&ma))
}
