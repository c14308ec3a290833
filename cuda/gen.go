package cuda

import (
	_ "embed"
	"fmt"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// The gathering kernels' sources: attention_gen.cuh goes between
// common.cuh and either kernel.
var (
	//go:embed kernels/attention_gen.cuh
	genHeader string
	//go:embed kernels/attention_gen.cu
	genSource string
	//go:embed kernels/attention_gen_ws.cu
	genWSSource string
)

// genFlags configures the gathering kernel, which runs what the plain
// kernels cannot: PSA's pooled levels, S2O's token orders, early stop and
// two-pass state. It is kernels/attention_gen.cu (mma.sync, sm_80 and
// newer), or on Hopper for 128-row query blocks kernels/attention_gen_ws.cu
// (warp-specialized wgmma, when ws).
type genFlags struct {
	on     bool
	ws     bool // the warp-specialized Hopper kernel
	levels bool // entries carry levels other than Full (LEVELS)
	gather bool // token orders (GATHER)
	stop   bool // a stop rule (STOP)
	state  int8 // 1: save the softmax states (an Init plan); 2: resume them
	// tile1: the plan's blocks are one tile (variant.kt keys) wide, so each
	// entry is one tile (ONE_TILE; ws without levels)
	tile1 bool
}

// genKT is KT in kernels/attention_gen*.cu: key slots per tile.
const genKT = 64

// genWideKT is the warp-specialized gathering kernel's KT for plans with
// levels (whose slots pack into tiles of any width) and for plans whose
// blocks are a multiple of it wide, in genWideStages stages (K and V
// tiles of 32 KiB each at D 128).
const (
	genWideKT     = 128
	genWideStages = 2
)

// genWSStages is STAGES in kernels/attention_gen_ws.cu: K/V tile slots
// the producer fills ahead of the consumers.
const genWSStages = 4

// source returns the NVRTC program body of the kernel f selects (after
// common.cuh) and its file name; a #line directive keeps NVRTC's messages
// pointing into the kernel file.
func (f genFlags) source() (body, name string) { return f.sourceWith(nil) }

// sourceWith is source with the kernel files in files in place of the
// embedded ones (Tactics.KernelDir).
func (f genFlags) sourceWith(files kernelFiles) (body, name string) {
	name, src := "attention_gen.cu", genSource
	if f.ws {
		name, src = "attention_gen_ws.cu", genWSSource
	}
	return "#line 1 \"attention_gen.cuh\"\n" + files.or("attention_gen.cuh", genHeader) + "#line 1 \"" + name + "\"\n" + files.or(name, src), name
}

// threads is the kernel's block size: a warp per 16·MT query rows, or
// under ws a producer and two consumer warpgroups.
func (f genFlags) threads(v variant) int {
	if f.ws {
		return 384
	}
	return v.blockQ / (16 * v.mt) * 32
}

func (f genFlags) String() string {
	s := "_gen"
	if f.ws {
		s += "_ws"
	}
	if f.levels {
		s += "_lvl"
	}
	if f.gather {
		s += "_gather"
	}
	if f.stop {
		s += "_stop"
	}
	switch f.state {
	case 1:
		s += "_save"
	case 2:
		s += "_resume"
	}
	if f.tile1 {
		s += "_t1"
	}
	return s
}

// sharedBytes is the gathering kernel's dynamic shared memory: the Q tile,
// v.stages stages of K and V tiles and, with levels, the staged entry list
// (MAX_LIST int32), the entries' slot offsets (MAX_LIST+4 int32) and
// levels (MAX_LIST bytes). Under ws the entry list is always staged and
// the tiles are realigned to 1024 bytes.
func (f genFlags) sharedBytes(v variant) int {
	n := (v.blockQ + 2*v.stages*v.kt) * v.headDim * 2
	if f.ws {
		n += 1024 + maxList*4
		if f.levels {
			n += (maxList+4)*4 + maxList
		}
		return n
	}
	if f.levels {
		n += maxList*4 + (maxList+4)*4 + maxList
	}
	return n
}

func (f genFlags) options(v variant, arch string) []string {
	o := []string{
		"--gpu-architecture=" + arch,
		"-std=c++17",
		fmt.Sprintf("-DHEAD_DIM=%d", v.headDim),
		fmt.Sprintf("-DIS_BF16=%d", b2i(v.bf16)),
		fmt.Sprintf("-DLEVELS=%d", b2i(f.levels)),
		fmt.Sprintf("-DGATHER=%d", b2i(f.gather)),
		fmt.Sprintf("-DSTATE=%d", f.state),
		fmt.Sprintf("-DSTOP=%d", b2i(f.stop)),
		fmt.Sprintf("-DOUT16=%d", b2i(v.out16)),
	}
	if f.ws {
		return append(o, "-DWGMMA=1", fmt.Sprintf("-DSTAGES=%d", v.stages), fmt.Sprintf("-DKT=%d", v.kt), fmt.Sprintf("-DONE_TILE=%d", b2i(f.tile1)))
	}
	return append(o, "-DWGMMA=0", fmt.Sprintf("-DBLOCK_Q=%d", v.blockQ), fmt.Sprintf("-DMT=%d", v.mt))
}

// hasLevels reports whether some entry of p is not Full: pooled (PSA) or
// skipped.
func hasLevels(p *plan.Plan) bool {
	for _, l := range p.Level {
		if l != plan.Full {
			return true
		}
	}
	return false
}

// maxPlanLevel is the coarsest level p or its Init plan uses (Full for
// none).
func maxPlanLevel(p *plan.Plan) plan.Level {
	top := plan.Full
	for q := p; q != nil; q = q.Init {
		for _, l := range q.Level {
			top = max(top, l)
		}
	}
	return top
}

// needsGen reports whether p needs the gathering kernel, with the reason
// as an error wrapping ErrUnsupported for engines that cannot run it.
func needsGen(p *plan.Plan) (bool, error) {
	switch {
	case p.Order != nil:
		return true, fmt.Errorf("%w: token orders (S2O)", ErrUnsupported)
	case p.Stop != nil:
		return true, fmt.Errorf("%w: early-stop rules (S2O)", ErrUnsupported)
	case p.Init != nil:
		return true, fmt.Errorf("%w: first-pass plans whose states the main plan resumes (S2O two-pass)", ErrUnsupported)
	case hasLevels(p):
		return true, fmt.Errorf("%w: pooled or skipped levels (PSA pyramid)", ErrUnsupported)
	}
	return false, nil
}

// genFlagsOf checks that the gathering kernel runs plan p (one pass) and
// returns its flags; state is set by the caller.
func genFlagsOf(p *plan.Plan) (genFlags, error) {
	f := genFlags{on: true, levels: hasLevels(p), gather: p.Order != nil, stop: p.Stop != nil}
	if p.Filter != nil {
		return f, fmt.Errorf("%w: a λ filter with levels, token orders or a stop rule", ErrUnsupported)
	}
	if f.levels && (f.gather || f.stop) {
		return f, fmt.Errorf("%w: pooled levels with token orders or a stop rule", ErrUnsupported)
	}
	if f.levels && p.KBlocks() > maxList {
		return f, fmt.Errorf("%w: pooled levels with %d KV blocks; the GPU kernel takes up to %d", ErrUnsupported, p.KBlocks(), maxList)
	}
	return f, nil
}

// chooseGen completes v, whose head dim and block sizes chooseVariant
// checked, as the gathering kernel for p (the pass that resumes p.Init's
// states when p has one): the warp-specialized one where kc allows it
// (Hopper), the query blocks are 128 rows and a row's entries fit the
// staged list, else the mma.sync one.
func chooseGen(p *plan.Plan, v variant, kc kernelChoice) (variant, error) {
	g := p.Geometry
	if g.B*g.Hq > 65535 {
		return v, fmt.Errorf("%w: B·Hq = %d above 65535", ErrUnsupported, g.B*g.Hq)
	}
	f, err := genFlagsOf(p)
	if err != nil {
		return v, err
	}
	if p.Init != nil {
		if _, err := genFlagsOf(p.Init); err != nil {
			return v, fmt.Errorf("Init plan: %w", err)
		}
		f.state = 2
	}
	f.ws = kc.wgmma && kc.ws && v.blockQ == 128 && p.KBlocks() <= maxList
	v.kt, v.mt, v.stages = genKT, genMT(v.blockQ, f), 2
	if f.ws {
		v.mt, v.stages = 1, genWSStages
		if kc.genStages != 0 {
			v.stages = kc.genStages
		}
		// 128-key tiles where the blocks allow them, as the dense kernel
		// computes them: half the per-tile softmax, barrier and stop-vote
		// work per key. Levels pack their slots into tiles of any width.
		if (f.levels || p.BlockK%genWideKT == 0) && !kc.genNarrow {
			v.kt, v.stages = genWideKT, min(v.stages, genWideStages)
		}
	}
	f.tile1 = f.ws && !f.levels && p.BlockK == v.kt
	v.gen = f
	return v, nil
}

// genMT is the mma.sync gathering kernel's 16-row atoms per warp: two for
// 128-row blocks, so that each K and V fragment serves both (the mma.sync
// dense kernel measured 1.5× faster so, BENCHMARKS.md), except with
// levels, whose staged lists leave room for one CTA of four warps per SM
// only. The warp-specialized kernel takes 1 (its warpgroups own 64 rows).
func genMT(blockQ int, f genFlags) int {
	if f.ws {
		return 1
	}
	if blockQ == 128 && !f.levels {
		return 2
	}
	return 1
}

// initVariant is the variant that runs the Init plan of a plan run by v.
func initVariant(p *plan.Plan, v variant) (variant, error) {
	f, err := genFlagsOf(p.Init)
	if err != nil {
		return v, err
	}
	f.state, f.ws = 1, v.gen.ws
	v.gen, v.mt = f, genMT(v.blockQ, f)
	return v, nil
}

// genCounters is the number of 64-bit device counters the gathering kernel
// uses: the four of Params.counters, the main pass's row tickets
// (genTickets), rows stopped early, per pooled level 2..8 the entries on
// the last KV block and on the others, and the Init pass's row tickets
// (genInitTickets).
const genCounters = 6 + 2*7 + 1

// genTickets and genInitTickets index the counters from which the
// warp-specialized gathering kernel's persistent CTAs draw rows, in the
// main pass and in the Init pass.
const (
	genTickets     = 4
	genInitTickets = genCounters - 1
)

// genStats turns the gathering kernel's counters into plan.Stats. A pooled
// entry counts the share of its block's keys it scores, ⌈n/2^(h-1)⌉/n for
// a block of n keys, as the CPU executor counts it.
func genStats(n []uint64, p *plan.Plan, dense int64) plan.Stats {
	s := plan.Stats{DenseBlocks: float64(dense), QKBlocks: float64(n[0]), PVBlocks: float64(n[1]), Stopped: int64(n[5])}
	last := p.Geometry.Nk - (p.KBlocks()-1)*p.BlockK
	for lv := plan.Level(2); lv <= plan.MaxLevel; lv++ {
		for i, size := range []int{p.BlockK, last} {
			c := n[6+2*int(lv-2)+i]
			if c == 0 {
				continue
			}
			w := float64((size+lv.Pool()-1)/lv.Pool()) / float64(size)
			s.QKBlocks += float64(c) * w
			s.PVBlocks += float64(c) * w
		}
	}
	return s
}

// pyramidBF16 is the pyramid kernel's bf16 flag: the pyramid is stored in
// the staged inputs' 16-bit type, which the tensor cores read; rounding a
// pooled mean to it costs what rounding the inputs did.
func pyramidBF16(dt tensor.DType) int32 {
	if dt == tensor.Float16 {
		return 0
	}
	return 1
}
