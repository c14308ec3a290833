package cuda

import (
	"fmt"
	"slices"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// pingPong reports whether the warp-specialized kernel takes turns under
// mode m for a plan that is causal or sparse (skips blocks a non-causal
// dense pass visits).
func pingPong(m PingPongMode, causal, sparse bool) bool {
	switch m {
	case PingPongOn:
		return true
	case PingPongOff:
		return false
	}
	return causal || sparse
}

// rowOrder returns the order in which the kernel v launches plan p's rows
// under order o, or nil for head by head (each head's last query block
// first), which the kernels take without an uploaded order.
func rowOrder(o LaunchOrder, p *plan.Plan, v variant) []int32 {
	n := len(p.RowStart) - 1
	switch o {
	case OrderHead:
		return nil
	case OrderLongest:
		return longestFirst(p.RowStart, n)
	}
	g := p.Geometry
	if v.ws {
		// The persistent kernel's blocks draw rows as they finish: head by
		// head keeps the rows in flight on one or two heads' K and V in
		// L2, and longest first within each head lets its short rows
		// fill the gaps. Rows all alike need no order uploaded.
		if rowsAlike(p.RowStart) {
			return nil
		}
		return longestFirst(p.RowStart, max(p.QBlocks(), 1))
	}
	if int64(g.Nk)*int64(max(g.D, g.Dv)) <= 1<<21 {
		return longestFirst(p.RowStart, n)
	}
	return nil
}

// Supports reports whether the GPU kernels run p on every GPU the engine
// supports (the mma.sync kernel of sm_80 and newer), with an error
// wrapping ErrUnsupported that says why not. Engine.Supports answers for
// one engine's device, which may take more.
func Supports(p *plan.Plan) error {
	_, err := chooseVariant(p, tensor.BFloat16, kernelChoice{warpRows: 32, tileK: 64, gen: true})
	return err
}

// Supports reports whether e's kernels run p on its device, with an error
// wrapping ErrUnsupported that says why not. On Hopper it accepts plans
// the package-level Supports rejects: the warp-specialized kernel has no
// limit of 65535 on B·Hq.
func (e *Engine) Supports(p *plan.Plan) error {
	_, err := chooseVariant(p, tensor.BFloat16, e.choice())
	return err
}

// choice is the engine's configuration as chooseVariant takes it.
func (e *Engine) choice() kernelChoice {
	return kernelChoice{warpRows: e.warpRows, tileK: e.tileK, wgmma: e.wgmma, ws: e.ws, wsTileK: e.wsTileK, ctaRows: e.ctaRows, minBlock: e.minBlk, genStages: e.genStage, genNarrow: e.genNarr, gen: true}
}

// kernelChoice is the engine's configuration that chooseVariant applies.
type kernelChoice struct {
	warpRows, tileK   int
	wgmma, ws         bool
	wsTileK           int
	ctaRows, minBlock int
	genStages         int  // the warp-specialized gathering kernel's STAGES (0: genWSStages)
	genNarrow         bool // Tactics.GenNarrowTiles: no genWideKT tiles
	// gen allows the gathering kernel (levels, token orders, stop rules,
	// Init plans), which only Engine.Run feeds so far.
	gen bool
}

func chooseVariant(p *plan.Plan, dt tensor.DType, kc kernelChoice) (variant, error) {
	warpRows, tileK, wgmma := kc.warpRows, kc.tileK, kc.wgmma
	g := p.Geometry
	v := variant{bf16: dt != tensor.Float16, kt: 64, mt: 1}
	switch d := max(g.D, g.Dv); {
	case d <= 64:
		v.headDim = 64
	case d <= 128:
		v.headDim = 128
	default:
		return v, fmt.Errorf("%w: head dims D=%d, Dv=%d; the GPU kernel takes up to 128", ErrUnsupported, g.D, g.Dv)
	}
	if p.BlockQ != 64 && p.BlockQ != 128 {
		return v, fmt.Errorf("%w: BlockQ %d; the GPU kernel takes 64 or 128", ErrUnsupported, p.BlockQ)
	}
	v.blockQ = p.BlockQ
	if p.BlockK%64 != 0 {
		return v, fmt.Errorf("%w: BlockK %d; the GPU kernel takes multiples of 64", ErrUnsupported, p.BlockK)
	}
	if gen, why := needsGen(p); gen {
		if !kc.gen {
			return v, why
		}
		return chooseGen(p, v, kc)
	}
	if f := p.Filter; f != nil {
		v.filter = true
		// The λ decision is per KV block, so a tile must be a whole block,
		// and per 16-row MMA atom or a whole number of them.
		if p.BlockK != 64 && p.BlockK != 128 {
			return v, fmt.Errorf("%w: λ filter with BlockK %d; the GPU kernel takes 64 or 128", ErrUnsupported, p.BlockK)
		}
		if f.RowGroup%16 != 0 {
			return v, fmt.Errorf("%w: λ filter row group %d; the GPU kernel takes multiples of 16", ErrUnsupported, f.RowGroup)
		}
		v.kt = p.BlockK
	}
	if p.Filter == nil && p.BlockK%tileK == 0 {
		v.kt = tileK
	}
	if wgmma && kc.ws && p.BlockQ == 128 && (!v.filter || p.Filter.RowGroup == 64) {
		// Warp-specialized: two consumer warpgroups of 64 rows, tiles of
		// 128 keys unless asked for 64 or the blocks are 64 wide. A λ
		// filter takes one decision per warpgroup, so its row group must
		// be the warpgroup's 64 rows, and its tiles whole blocks.
		v.ws, v.wgmma, v.stages = true, true, 2
		v.kt = 128
		if p.BlockK%128 != 0 || kc.wsTileK == 64 || kc.wsTileK == 32 {
			v.kt = 64
		}
		if v.filter {
			v.kt = p.BlockK
		}
		return v, nil
	}
	// The other kernels launch one grid row per batch and head.
	if g.B*g.Hq > 65535 {
		return v, fmt.Errorf("%w: B·Hq = %d above 65535", ErrUnsupported, g.B*g.Hq)
	}
	if wgmma && !v.filter {
		// One warpgroup per 64 query rows, 16 rows a warp; tiles of 64 or
		// 128 keys.
		v.wgmma = true
		if v.kt != 128 {
			v.kt = 64
		}
		if p.BlockQ%kc.ctaRows == 0 {
			v.blockQ = kc.ctaRows
		}
		v.minBlocks = kc.minBlock
		return v, nil
	}
	if v.blockQ == 128 && warpRows == 32 && !v.filter {
		v.mt = 2
		v.kt = min(v.kt, 64)
	}
	if v.blockQ == 128 && warpRows == 32 && v.filter && v.kt == 64 {
		v.mt = 2
	}
	return v, nil
}

// longestFirst returns the plan rows (one per batch, head and query block)
// in windows of window consecutive rows, each window ordered by decreasing
// number of listed KV blocks; rows of equal length keep their plan order.
func longestFirst(rowStart []int, window int) []int32 {
	n := len(rowStart) - 1
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	length := func(r int32) int { return rowStart[r+1] - rowStart[r] }
	window = max(window, 1)
	for lo := 0; lo < n; lo += window {
		w := order[lo:min(lo+window, n)]
		slices.SortStableFunc(w, func(a, b int32) int { return length(b) - length(a) })
	}
	return order
}
