package sparge

import (
	"math"
	"slices"
	"sort"

	"github.com/sparseattn/sparseattn/plan"
)

// HeadMask is M_g for one query head: for each query block, the key blocks
// to compute, in ascending order, CSR-style.
type HeadMask struct {
	RowStart []int   // len QBlocks+1
	KVBlock  []int32 // kept key blocks of row i: KVBlock[RowStart[i]:RowStart[i+1]]
}

// Kept is the number of kept block pairs.
func (m *HeadMask) Kept() int { return len(m.KVBlock) }

// Row returns the kept key blocks of query block i.
func (m *HeadMask) Row(i int) []int32 { return m.KVBlock[m.RowStart[i]:m.RowStart[i+1]] }

// MaskOptions are the parts of the mask rule that are not per-head
// hyperparameters.
type MaskOptions struct {
	// Sink always keeps key block 0 (the attention-sink tokens).
	Sink bool
}

// Mask derives M_g from the estimate (SpargeAttn §3.2, Alg. 1 lines 5–6)
// for hyperparameters p (defaults filled in; λ plays no part here):
//
//  1. a key block is non-self-similar when KSim < θ, a query block when
//     QSim < θ (θ ≤ 0 switches the judge off: CosSim is never negative);
//  2. Ŝ[:, j] = −∞ for non-self-similar key blocks and for causally invisible
//     ones, and P̂[i] = softmax(Ŝ[i]), unnormalized: e^(Ŝ[i,j] − max Ŝ[i])
//     with plan.Exp64, the exponential the device planner repeats;
//  3. the row's blocks are ordered by P̂[i] descending, ties by block index;
//     row i keeps the fewest top blocks whose cumulative mass reaches
//     τ·ΣP̂[i] (TopCdf; τ = 1 keeps every block; masses in fixed point, see
//     mass), or, in top-k mode, the ⌈k·V_i⌉ most probable of its V_i
//     causally visible blocks;
//  4. fix blocks: every visible block of a non-self-similar query row and
//     every visible non-self-similar key column is kept (Eq. 5);
//  5. at least one block per row; under causal masking the diagonal blocks
//     holding the queries' own positions, so no query loses every key; with
//     Sink, key block 0.
//
// The paper's pseudo-code keeps the blocks whose cumulative sum is ≤ τ,
// which can fall short of τ; we keep the block that crosses τ too, so the
// kept predicted mass is always at least τ.
func (e *HeadEstimate) Mask(p Params, o MaskOptions) *HeadMask {
	p = p.resolve()
	m := &HeadMask{RowStart: make([]int, 1, e.QBlocks+1)}
	s := newMaskScratch(e.KBlocks)
	for i := range e.QBlocks {
		m.KVBlock = s.row(e, i, p, o, m.KVBlock)
		m.RowStart = append(m.RowStart, len(m.KVBlock))
	}
	return m
}

// massBits is the fixed-point precision of TopCdf's masses: see mass.
const massBits = 44

// mass is a probability p in [0, 1] of the compressed softmax (whose row
// maximum is exactly Exp64(0) = 1) in fixed point, ⌊p·2^44⌋. TopCdf sums
// masses as integers: the sums are exact in any order, so the device
// planner reduces them in parallel and gets the CPU's bits, and a row of
// up to 2^20 blocks cannot overflow. Truncation moves each mass by less
// than 2^-44 of the row's top probability.
func mass(p float64) uint64 { return uint64(p * (1 << massBits)) }

// maskScratch is reusable per-row working space.
type maskScratch struct {
	keep  []bool
	prob  []float64
	order []int
}

func newMaskScratch(nkb int) *maskScratch {
	return &maskScratch{keep: make([]bool, nkb), prob: make([]float64, nkb), order: make([]int, 0, nkb)}
}

// row appends the kept blocks of query block i to dst.
func (s *maskScratch) row(e *HeadEstimate, i int, p Params, o MaskOptions, dst []int32) []int32 {
	vis := e.Visible[i]
	if vis == 0 {
		return dst
	}
	keep := s.keep[:vis]
	clear(keep)
	judge := p.Theta > 0
	if judge && e.QSim[i] < p.Theta { // Eq. 5: a non-self-similar query row is computed in full
		for j := range keep {
			dst = append(dst, int32(j))
		}
		return dst
	}
	// Ŝ[:, j] = −∞ for non-self-similar key blocks; softmax over the rest.
	lg := e.Logits[i*e.KBlocks : i*e.KBlocks+vis]
	order := s.order[:0]
	top := math.Inf(-1)
	for j := range vis {
		if judge && e.KSim[j] < p.Theta {
			keep[j] = true // Eq. 5: a non-self-similar key column is always computed
			continue
		}
		order = append(order, j)
		top = max(top, lg[j])
	}
	if len(order) > 0 {
		prob := s.prob
		var total uint64
		for _, j := range order {
			prob[j] = plan.Exp64(lg[j] - top)
			total += mass(prob[j])
		}
		sort.SliceStable(order, func(a, b int) bool { return prob[order[a]] > prob[order[b]] })
		var n int
		switch {
		case p.CDF >= 1 || p.TopK >= 1:
			n = len(order)
		case p.CDF > 0: // TopCdf(P̂[i], τ), in fixed point (see mass)
			thr := p.CDF * float64(total)
			var cum uint64
			for n < len(order) {
				cum += mass(prob[order[n]])
				n++
				if float64(cum) >= thr {
					break
				}
			}
		default: // top-k over the row's causally visible blocks
			n = min(len(order), int(math.Ceil(p.TopK*float64(vis))))
		}
		for _, j := range order[:max(n, 1)] {
			keep[j] = true
		}
	}
	if d := e.Diag[i]; d >= 0 {
		for j := d; j < vis; j++ { // blocks from the first query's position to the last's
			keep[j] = true
		}
	}
	if o.Sink {
		keep[0] = true
	}
	s.order = order
	for j, k := range keep {
		if k {
			dst = append(dst, int32(j))
		}
	}
	return dst
}

// visibleBlocks is the number of block pairs a dense causal-aware pass of
// this head computes.
func (e *HeadEstimate) visibleBlocks() int {
	var n int
	for _, v := range e.Visible {
		n += v
	}
	return n
}

// Sparsity is the fraction of causally visible block pairs the mask skips:
// M_g's sparsity for this head, before the λ filter.
func (m *HeadMask) Sparsity(e *HeadEstimate) float64 {
	v := e.visibleBlocks()
	if v == 0 {
		return 0
	}
	return 1 - float64(m.Kept())/float64(v)
}

// Equal reports whether two masks keep the same blocks.
func (m *HeadMask) Equal(o *HeadMask) bool {
	return slices.Equal(m.RowStart, o.RowStart) && slices.Equal(m.KVBlock, o.KVBlock)
}
