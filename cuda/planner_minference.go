package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// minferencePlanner is minference.Planner on the device
// (kernels/plan_minference.cu): the probe on the tensor cores, then the
// top-k lines and their blocks as the CPU picks them. The line scores
// differ from the CPU's by about 1e-6 relative, so a line that close to
// the k-th may be kept by one side only (cuda/selftest's
// minferenceTieBreak bounds the difference).
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

// probeArgs mirrors struct ProbeArgs in kernels/probe.cuh.
type probeArgs struct {
	m, s, vp, sp, v, sl, bias  uint64
	head0, g, n, tiles, chunks int32
	mean                       int32
}

// miArgs mirrors struct MiArgs in kernels/plan_minference.cu.
type miArgs struct {
	vflag, cs                      uint64
	vertical, slash, sinks, recent int32
}

// probeTilesPerBlock is PR_TILES of kernels/probe.cuh, the key tiles a
// block walks; probeKeyTile is PR_PT, the keys per tile (32 for float32
// inputs with D > 128, else 64).
const probeTilesPerBlock = 8

// probeWarps is PR_WARPS of kernels/probe.cuh for n probe rows: a block
// holds 16 rows a warp, 64 or (past 64 rows) 128, so that FlexPrefill's
// 128-row probe reads each key tile once.
func probeWarps(n int) int {
	if n > 64 {
		return 8
	}
	return 4
}

func probeKeyTile(in *planInput) int {
	if in.q.dtype == int32(tensor.Float32) && in.t.Geometry.D > 128 {
		return 32
	}
	return 64
}

// kernelDefines are the compile-time settings of kernels/probe.cuh (and
// the planner files that include it) for n probe rows: the padded head
// dim, the dtype and the warps per probe block.
func kernelDefines(in *planInput, n int) []string {
	return []string{fmt.Sprintf("HEAD_DIM_PAD=%d", (in.t.Geometry.D+15)/16*16), fmt.Sprintf("DTYPE=%d", in.q.dtype),
		fmt.Sprintf("PR_WARPS=%d", probeWarps(n))}
}

// runProbe runs the probe of the last n queries (probe.Last, on the tensor
// cores) of every head with the kernels of file, leaving the vertical and
// slash sums of head x at pa.v + x·Nk and pa.sl + x·(2Nk − 1), divided by
// n when mean is set.
func runProbe(c *driver.Ctx, in *planInput, file string, n int, mean bool) (*probeArgs, error) {
	g := in.t.Geometry
	a := in.args()
	heads := g.B * g.Hq
	pt := probeKeyTile(in)
	tiles := (g.Nk + pt - 1) / pt
	warps := probeWarps(n)
	rowChunk := 16 * warps
	chunks := (n + rowChunk - 1) / rowChunk
	win := int64(pt + rowChunk - 1)
	pa := &probeArgs{g: int32(heads), n: int32(n), tiles: int32(tiles), chunks: int32(chunks)}
	if mean {
		pa.mean = 1
	}
	var err error
	ptr := func(name string, bytes int64) uint64 {
		if err != nil {
			return 0
		}
		var p driver.Ptr
		p, err = in.scratch.get(c, name, max(bytes, 8))
		return uint64(p)
	}
	rows := int64(heads) * int64(n)
	pa.m = ptr("probe.m", rows*int64(tiles)*4)
	pa.s = ptr("probe.s", rows*int64(tiles)*4)
	pa.vp = ptr("probe.vp", int64(heads)*int64(chunks)*int64(g.Nk)*8)
	pa.sp = ptr("probe.sp", int64(heads)*int64(chunks)*int64(tiles)*win*8)
	pa.v = ptr("probe.v", int64(heads)*int64(g.Nk)*8)
	pa.sl = ptr("probe.sl", int64(heads)*int64(2*g.Nk-1)*8)
	pa.bias = ptr("probe.bias", rows*4)
	if err != nil {
		return nil, err
	}
	if n == 0 || g.Nk == 0 {
		// No probe rows: every score is zero.
		if err := c.Memset(driver.Ptr(pa.v), 0, int64(heads)*int64(g.Nk)*8); err != nil {
			return nil, err
		}
		return pa, c.Memset(driver.Ptr(pa.sl), 0, int64(heads)*int64(max(2*g.Nk-1, 0))*8)
	}
	defs := kernelDefines(in, n)
	fns := map[string]driver.Function{}
	for _, name := range []string{"probe_stats", "probe_norm", "probe_lines", "probe_combine"} {
		if fns[name], err = in.e.auxFunction(c, file, name, defs...); err != nil {
			return nil, err
		}
	}
	// Dynamic shared memory: two key tiles (PrTile: PR_PT rows of
	// HEAD_DIM_PAD+8 16-bit elements, twice for float32's two halves), and
	// for probe_lines the warps' merged strips (PR_DM_FLOATS: a lead of 8
	// float32, then 8 rows of PR_PT+24 a warp).
	tileBytes := pt * ((g.D+15)/16*16 + 8) * 2
	if in.q.dtype == int32(tensor.Float32) {
		tileBytes *= 2
	}
	statsBytes, linesBytes := 2*tileBytes, 2*tileBytes+(8+warps*8*(pt+24))*4
	if err := c.SetMaxDynamicShared(fns["probe_stats"], statsBytes); err != nil {
		return nil, err
	}
	if err := c.SetMaxDynamicShared(fns["probe_lines"], linesBytes); err != nil {
		return nil, err
	}
	tileGrid := driver.Dim3{X: uint32((tiles + probeTilesPerBlock - 1) / probeTilesPerBlock), Y: uint32(heads), Z: uint32(chunks)}
	probeBlock := driver.Dim3{X: uint32(32 * warps), Y: 1, Z: 1}
	if err := c.Launch(fns["probe_stats"], tileGrid, probeBlock, statsBytes, driver.Arg(&a), driver.Arg(&in.q), driver.Arg(&in.k), driver.Arg(pa)); err != nil {
		return nil, err
	}
	grid, block := grid1(heads*n*32, 256)
	if err := c.Launch(fns["probe_norm"], grid, block, 0, driver.Arg(pa)); err != nil {
		return nil, err
	}
	if err := c.Launch(fns["probe_lines"], tileGrid, probeBlock, linesBytes, driver.Arg(&a), driver.Arg(&in.q), driver.Arg(&in.k), driver.Arg(pa)); err != nil {
		return nil, err
	}
	grid, block = grid1(heads*(3*g.Nk-1), 256)
	return pa, c.Launch(fns["probe_combine"], grid, block, 0, driver.Arg(&a), driver.Arg(pa))
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
	m := p.m.ForLength(g.Nk)
	n := min(m.LastQ, g.Nq)
	defs := kernelDefines(in, n)
	sel, err := in.e.auxFunction(c, "plan_minference.cu", "mi_select", defs...)
	if err != nil {
		return err
	}
	rows, err := in.e.auxFunction(c, "plan_minference.cu", "mi_rows", defs...)
	if err != nil {
		return err
	}
	ma := miArgs{vflag: uint64(vflag), cs: uint64(cs), vertical: int32(min(m.Vertical, 1<<30)), slash: int32(min(m.Slash, 1<<30)),
		sinks: minference.SinkKeys, recent: minference.RecentSlashes}
	pa, err := runProbe(c, in, "plan_minference.cu", n, false)
	if err != nil {
		return err
	}
	if err := c.Launch(sel, driver.Dim3{X: uint32(pa.g), Y: 2, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0,
		driver.Arg(&a), driver.Arg(pa), driver.Arg(&ma)); err != nil {
		return err
	}
	grid, block := grid1(int(a.rows)*32, 256)
	return c.Launch(rows, grid, block, 0, driver.Arg(&a), driver.Arg(&ma))
}
