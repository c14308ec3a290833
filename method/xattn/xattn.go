// Package xattn plans XAttention (Xu et al., "XAttention: Block Sparse
// Attention with Antidiagonal Scoring", ICML 2025), a block-sparse baseline
// of the S2O paper.
//
// Queries and keys are cut into groups of Stride tokens. The score of a
// (query group, key group) pair is the sum of the Stride query–key products
// along the antidiagonal of its Stride×Stride tile (XAttention §2.1): query
// i·S+S−1−u against key j·S+u, u = 0..S−1. Scaled by the softmax scale and
// divided by the stride, the scores of each query group are soft-maxed over
// its visible key groups, and summed into BlockQ×BlockK blocks. Each query
// block then keeps the fewest blocks, heaviest first, whose summed score
// reaches Threshold of its total (XAttention §2.2); causal plans always keep
// the first KV block and the diagonal block, as the reference code does.
//
// Planning is quadratic by design: a causal head takes N²·D/(2S) float64
// multiply-adds for the antidiagonal sums, 1/(2S) of dense attention's
// N²·D float32 ones (1/32 at S = 16) but at half its SIMD width, plus
// N²/(2S²) canonical exponentials. The sums run in kernel.Dot64Panel8 at
// about the core's float64 FMA rate. On the 2-core development VM at 16K
// tokens (8 query heads over 2 KV heads, D 128) a plan costs about 9%
// of a dense CPU pass in CPU time (8.8–9.6% in five runs at load 2), some
// 60% of it those sums (about 4.5% of the dense pass), and more on a
// loaded machine; BENCHMARKS.md, "Planning cost at 16K on the CPU".
package xattn

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/method/internal/blocksoftmax"
	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Defaults of a zero Planner: S2O's comparison's stride (XAttention uses
// 8 or 16), and the threshold the CLI runs (S2O's comparison uses 0.9).
const (
	DefaultStride    = 16
	DefaultThreshold = 0.95
)

// Planner plans XAttention. The zero value runs the defaults.
type Planner struct {
	// Stride is S, the antidiagonal stride; it must divide BlockQ and
	// BlockK. 0 means DefaultStride.
	Stride int
	// Threshold is τ in (0, 1], the cumulative share of each query block's
	// estimated attention mass its kept blocks reach; 1 keeps every block
	// with any estimated mass. 0 means DefaultThreshold.
	Threshold float64
}

// Resolve returns x with its zero fields set to the defaults. Check and
// Plan call it, and so does the device planner (package cuda).
func (x Planner) Resolve() Planner {
	if x.Stride == 0 {
		x.Stride = DefaultStride
	}
	if x.Threshold == 0 {
		x.Threshold = DefaultThreshold
	}
	return x
}

// Name returns "xattn".
func (x Planner) Name() string { return "xattn" }

// Check returns an error wrapping plan.ErrInvalid when x's options do not
// suit tiling t. The device planner (package cuda) calls it.
func (x Planner) Check(t plan.Tiling) error {
	x = x.Resolve()
	if x.Stride <= 0 || t.BlockQ%x.Stride != 0 || t.BlockK%x.Stride != 0 {
		return fmt.Errorf("%w: xattn stride %d must be positive and divide BlockQ=%d and BlockK=%d", plan.ErrInvalid, x.Stride, t.BlockQ, t.BlockK)
	}
	if !(x.Threshold > 0 && x.Threshold <= 1) {
		return fmt.Errorf("%w: xattn threshold %v must be in (0, 1]", plan.ErrInvalid, x.Threshold)
	}
	return nil
}

// Plan scores every block by antidiagonals and applies the threshold.
func (x Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	x = x.Resolve()
	if err := x.Check(t); err != nil {
		return nil, err
	}
	if err := heads.CheckInputs(t, q, k, "xattn"); err != nil {
		return nil, err
	}
	if g := t.Geometry; g.Group() >= runtime.GOMAXPROCS(0) {
		return x.planShared(ctx, t, q, k)
	}
	return x.planPerWorker(ctx, t, q, k)
}

// planPerWorker is Plan with one head per worker at a time, each worker
// building (and keeping) the key panels of its heads' KV heads itself.
func (x Planner) planPerWorker(ctx context.Context, t plan.Tiling, q, k *tensor.Tensor) (*plan.Plan, error) {
	return heads.SelectBlocksWorker(ctx, t, func() func(*plan.Plan, int, int) func(int, []int32) []int32 {
		var sc scratch
		return func(dense *plan.Plan, b, h int) func(int, []int32) []int32 {
			mass := x.blockMass(dense, q, k, b, h, &sc)
			return func(qb int, visible []int32) []int32 { return sc.sel.pick(dense, qb, visible, mass[qb], x.Threshold) }
		}
	})
}

// scratch is one worker's buffers for blockMass, kept from head to head so
// that the large ones are allocated (and their pages touched) once.
type scratch struct {
	kt    []float32 // key groups in interleaved panels (keyPanels)
	ktK   *tensor.Tensor
	ktB   int // kt holds KV head ktH of batch ktB of ktK
	ktH   int
	rowsK []float32 // one panel's key rows
	aq    []float64 // a batch of query groups
	buf   []float32 // one token row
	rows  []float64 // a batch's logit rows
	out   []float64 // one Dot64Panel8 result
	sm    blocksoftmax.Scratch
	sel   selector
	mass  []float64 // the head's block masses, QBlocks × KBlocks
}

// blockMass returns, for head h of batch b, the antidiagonal attention
// estimate summed per block: mass[qb][kb]. Its arithmetic is canonical:
// logits are plan.Dot64 of the float32 rows times the float64 scale, and
// the softmax and its block sums are plan.AddBlockSoftmax's. (The device
// planner, cuda/kernels/plan_xattn.cu, scores in float32 on the tensor
// cores instead; its self-test judges it against BlockScores.) The dot products run in
// kernel.Dot64Panel8, eight query groups against sixteen key groups at once,
// which adds every product in plan.Dot64's order: the same bits, about
// eighteen times faster than one dot product after another. sc is the
// caller's scratch; the result lives in it until the next call.
func (x Planner) blockMass(p *plan.Plan, q, k *tensor.Tensor, b, h int, sc *scratch) [][]float64 {
	g := p.Geometry
	s := x.Stride
	// Reshaped rows: query group i is Q[iS+S−1], Q[iS+S−2], …, Q[iS]
	// concatenated, key group j is K[jS], …, K[jS+S−1]; missing tokens of a
	// ragged last group are zeros. One dot product of length S·D is then
	// one antidiagonal sum (XAttention §2.1). Key groups are padded with
	// zero groups to a multiple of 16 and interleaved in panels of
	// kernel.Dot64Lanes: element e of key group j at (j/8)·8·L + e·8 + j%8.
	// Query groups are read a tile at a time, widened to float64 (exactly).
	sc.keyPanels(k, b, g.KVHead(h), s, g.Nk, panelGroups((g.Nk+s-1)/s))
	return x.massFrom(p, q, b, h, sc.kt, sc)
}

// panelGroups is the number of key groups the panels of kg groups hold:
// kg padded to a multiple of the sixteen of one Dot64Panel8 call.
func panelGroups(kg int) int {
	const keysPer = 2 * kernel.Dot64Lanes
	return (kg + keysPer - 1) / keysPer * keysPer
}

// massFrom is blockMass on key panels kt already built (keyPanels'
// layout) for head h's KV head.
func (x Planner) massFrom(p *plan.Plan, q *tensor.Tensor, b, h int, kt []float32, sc *scratch) [][]float64 {
	g := p.Geometry
	s, d := x.Stride, g.D
	qg, kg := (g.Nq+s-1)/s, (g.Nk+s-1)/s
	L := s * d
	const rowsPer, keysPer = 8, 2 * kernel.Dot64Lanes
	sc.buf = grow(sc.buf, d)
	buf := sc.buf
	scale := float64(p.SoftmaxScale()) / float64(s)
	off := g.QueryOffset()
	// The masses are only read until the next head's call.
	sc.mass = grow(sc.mass, p.QBlocks()*p.KBlocks())
	clear(sc.mass)
	mass := make([][]float64, p.QBlocks())
	for qb := range mass {
		mass[qb] = sc.mass[qb*p.KBlocks() : (qb+1)*p.KBlocks()]
	}
	// visibleTo is the number of key groups query group i sees: key group
	// j is visible when its first key is visible to the group's first
	// query.
	visibleTo := func(i int) int {
		if !p.Causal {
			return kg
		}
		if pos := i*s + off; pos >= 0 {
			return min(pos/s+1, kg)
		}
		return 0
	}
	// A tile of tileRows query groups (two Dot64Panel8 batches) passes
	// over the key panels together, so a panel pair is read from memory
	// once per tile and from cache by the other batch.
	const tileRows = 2 * rowsPer
	sc.rows = grow(sc.rows, tileRows*kg)
	sc.aq = grow(sc.aq, tileRows*L)
	sc.out = grow(sc.out, rowsPer*keysPer)
	aq, out := sc.aq, sc.out
	for i0 := 0; i0 < qg; i0 += tileRows {
		most := 0
		for r := range tileRows {
			if i0+r < qg {
				most = max(most, visibleTo(i0+r))
			}
		}
		if most == 0 {
			continue
		}
		clear(aq)
		for i := i0 * s; i < min((i0+tileRows)*s, g.Nq); i++ {
			q.ReadRow(b, h, i, buf)
			grp, u := i/s, s-1-i%s
			row := aq[((grp-i0)*s+u)*d:]
			for t, v := range buf {
				row[t] = float64(v)
			}
		}
		for j0 := 0; j0 < most; j0 += keysPer {
			for r0 := 0; r0 < tileRows && i0+r0 < qg; r0 += rowsPer {
				kernel.Dot64Panel8(aq[r0*L:], L, L, kt[j0*L:], out)
				for r := range rowsPer {
					for c, v := range out[r*keysPer : (r+1)*keysPer] {
						if j0+c < kg {
							sc.rows[(r0+r)*kg+j0+c] = v * scale
						}
					}
				}
			}
		}
		for r := range tileRows {
			if i := i0 + r; i < qg {
				if visible := visibleTo(i); visible > 0 {
					// plan.AddBlockSoftmax's bits, exponentials in vectors.
					sc.sm.Add(mass[i*s/p.BlockQ], sc.rows[r*kg:r*kg+visible], p.BlockK/s)
				}
			}
		}
	}
	return mass
}

// keyPanels fills sc.kt with the key groups of KV head kvh of batch b of
// k (n tokens, groups of s), in interleaved panels of kernel.Dot64Lanes
// groups, padded with zero groups to groups in all: element e of key group
// j at (j/8)·8·L + e·8 + j%8, L = s·D. The query heads of one KV head
// share its panels, so a worker that meets the same (k, b, kvh) again (its
// next head of a GQA group) keeps them. Each panel is built from its 8·s
// key rows read into sc.rowsK, then written in address order.
func (sc *scratch) keyPanels(k *tensor.Tensor, b, kvh, s, n, groups int) {
	if sc.ktK == k && sc.ktB == b && sc.ktH == kvh && len(sc.kt) > 0 {
		return
	}
	L := s * k.Shape().D
	sc.kt = grow(sc.kt, groups*L)
	sc.rowsK = grow(sc.rowsK, kernel.Dot64Lanes*L)
	for pi := range groups / kernel.Dot64Lanes {
		fillPanel(sc.kt, sc.rowsK, k, b, kvh, s, n, pi)
	}
	sc.ktK, sc.ktB, sc.ktH = k, b, kvh
}

// fillPanel writes panel pi of keyPanels' layout into kt: key groups
// 8·pi … 8·pi+7 of KV head kvh of batch b of k (n tokens, groups of s),
// read into rows (8·s·D values) and then written in address order; groups
// past the last token are zeros.
func fillPanel(kt, rows []float32, k *tensor.Tensor, b, kvh, s, n, pi int) {
	d := k.Shape().D
	L, lanes := s*d, kernel.Dot64Lanes
	p0 := pi * lanes * s // first token of the panel
	panel := kt[pi*lanes*L : (pi+1)*lanes*L]
	if p0 >= n {
		clear(panel)
		return
	}
	for j := range lanes * s {
		row := rows[j*d : (j+1)*d]
		if p0+j < n {
			k.ReadRow(b, kvh, p0+j, row)
		} else {
			clear(row)
		}
	}
	// Group c of the panel is rows[c·L : (c+1)·L]; its element e goes to
	// panel[e·8 + c].
	s0, s1, s2, s3 := rows[:L], rows[L:2*L], rows[2*L:3*L], rows[3*L:4*L]
	s4, s5, s6, s7 := rows[4*L:5*L], rows[5*L:6*L], rows[6*L:7*L], rows[7*L:8*L]
	for e := range L {
		out := panel[e*lanes : e*lanes+lanes : e*lanes+lanes]
		out[0], out[1], out[2], out[3] = s0[e], s1[e], s2[e], s3[e]
		out[4], out[5], out[6], out[7] = s4[e], s5[e], s6[e], s7[e]
	}
}

// grow returns s resized to n, reallocated only when too small.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Select applies XAttention's threshold rule to query block qb of plan p:
// among the visible blocks (in key order), it keeps the forced ones (when
// causal: the first KV block and the last visible, diagonal, block), then
// the heaviest others while the mass kept so far is below threshold × the
// total. It returns the kept blocks in key order.
func Select(p *plan.Plan, qb int, visible []int32, mass []float64, threshold float64) []int32 {
	if len(visible) == 0 {
		return nil
	}
	var have float64
	vm := make([]float64, len(visible))
	for i, kb := range visible {
		vm[i] = mass[kb]
	}
	total := plan.Sum64(vm) // canonical
	need := threshold * total
	keep := make([]int32, 0, len(visible))
	rest := make([]int32, 0, len(visible))
	for i, kb := range visible {
		if p.Causal && (i == 0 && kb == 0 || i == len(visible)-1) {
			keep = append(keep, kb)
			have += mass[kb]
			continue
		}
		rest = append(rest, kb)
	}
	slices.SortStableFunc(rest, func(a, b int32) int {
		switch {
		case mass[a] > mass[b]:
			return -1
		case mass[a] < mass[b]:
			return 1
		}
		return 0
	})
	for _, kb := range rest {
		if have >= need {
			break
		}
		keep = append(keep, kb)
		have += mass[kb]
	}
	slices.Sort(keep)
	return keep
}

// selector is Select with one worker's scratch: the kept lists are carved
// from chunks of one arena (they live until the plan is built), the masses
// and the candidates reuse buffers, the candidates are sorted by pdqsort
// on (mass descending, key order), which is the order of Select's stable
// sort, and the kept blocks are marked and emitted in the visible list's
// key order instead of sorted. They are Select's (TestSelectorMatchesSelect).
type selector struct {
	arena []int32 // the unused tail of the current chunk
	vm    []float64
	rest  []int32
	mark  []bool // per KV block: kept in the current row (cleared after each)
}

// pick is Select(p, qb, visible, mass, threshold) without a fresh
// allocation per row.
func (sl *selector) pick(p *plan.Plan, qb int, visible []int32, mass []float64, threshold float64) []int32 {
	if len(visible) == 0 {
		return nil
	}
	if len(sl.arena) < len(visible) {
		sl.arena = make([]int32, max(len(visible), 1<<16))
	}
	sl.vm = grow(sl.vm, len(visible))
	for i, kb := range visible {
		sl.vm[i] = mass[kb]
	}
	total := plan.Sum64(sl.vm) // canonical
	need := threshold * total
	var have float64
	rest := sl.rest[:0]
	sl.mark = grow(sl.mark, p.KBlocks())
	mark := sl.mark // the kept blocks; visible is in key order, so they are emitted sorted
	for i, kb := range visible {
		if p.Causal && (i == 0 && kb == 0 || i == len(visible)-1) {
			mark[kb] = true
			have += mass[kb]
			continue
		}
		rest = append(rest, kb)
	}
	slices.SortFunc(rest, func(a, b int32) int {
		switch {
		case mass[a] > mass[b]:
			return -1
		case mass[a] < mass[b]:
			return 1
		}
		return int(a - b) // visible is in key order: the stable sort's tie order
	})
	for _, kb := range rest {
		if have >= need {
			break
		}
		mark[kb] = true
		have += mass[kb]
	}
	sl.rest = rest
	keep := sl.arena[:0:len(visible)]
	for _, kb := range visible {
		if mark[kb] {
			keep = append(keep, kb)
			mark[kb] = false
		}
	}
	sl.arena = sl.arena[len(keep):]
	return keep[:len(keep):len(keep)] // the arena's next rows follow it
}

// Scores are one head's block scores as Plan computes them, in float64,
// before its selection. The device planner's self-test (package
// cuda/selftest) judges device plans against them.
type Scores struct {
	// Mass[qb][kb] is the antidiagonal softmax weight of query block qb's
	// query groups summed over KV block kb (XAttention §2.1), zero for
	// blocks qb does not see.
	Mass [][]float64
	// Bound is the softmax scale over the stride times the largest
	// reshaped query-group norm times the largest key-group norm: every
	// logit's products sum in absolute value to at most Bound.
	Bound float64
}

// BlockScores returns the scores of head h of batch b that Plan selects
// from (Mass is what Select reads for each query block).
func (x Planner) BlockScores(ctx context.Context, t plan.Tiling, q, k *tensor.Tensor, b, h int) (Scores, error) {
	if err := x.Check(t); err != nil {
		return Scores{}, err
	}
	if err := heads.CheckInputs(t, q, k, "xattn"); err != nil {
		return Scores{}, err
	}
	if err := ctx.Err(); err != nil {
		return Scores{}, err
	}
	dense, err := plan.Dense(t)
	if err != nil {
		return Scores{}, err
	}
	g := t.Geometry
	var sc scratch
	mass := x.blockMass(dense, q, k, b, h, &sc)
	s := Scores{Mass: make([][]float64, len(mass))}
	for qb, m := range mass {
		s.Mass[qb] = slices.Clone(m)
	}
	s.Bound = float64(t.SoftmaxScale()) / float64(x.Stride) * groupNorm(q, b, h, g.Nq, x.Stride) * groupNorm(k, b, g.KVHead(h), g.Nk, x.Stride)
	return s, nil
}

// groupNorm is the largest Euclidean norm of the groups of s consecutive
// tokens of head h of batch b (of n tokens) of x.
func groupNorm(x *tensor.Tensor, b, h, n, s int) float64 {
	buf := make([]float32, x.Shape().D)
	var best, cur float64
	for i := range n {
		if i%s == 0 {
			cur = 0
		}
		x.ReadRow(b, h, i, buf)
		for _, v := range buf {
			cur += float64(v) * float64(v)
		}
		best = max(best, cur)
	}
	return math.Sqrt(best)
}
