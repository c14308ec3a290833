package unisparse

// The compressed-attention scorer behind Plan: composite tokens, block
// masses in the canonical order, and Top-P.

import (
	"slices"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/method/internal/blocksoftmax"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// topP marks in kept the fewest blocks, heaviest first, whose mass reaches
// p of the row's total (UniSparse §4.3, Eq. 6); ties keep key order. p = 1
// keeps every block; a row without mass keeps none (it sees no key). The
// total is plan.Sum64's and the running sum adds in the sorted order. It
// is the reference topP (topp_test.go) with the order kept in s and sorted by
// pdqsort on (mass descending, key order): the same kept blocks, as that
// order is the stable sort's, without an allocation per row. (With a NaN
// mass the total is NaN, no running sum reaches it and every block is kept
// in either version, whatever the order.)
func (s *scorer) topP(mass []float64, p float64, kept []bool) {
	clear(kept)
	total := plan.Sum64(mass)
	if total == 0 {
		return
	}
	if p >= 1 {
		for i := range kept {
			kept[i] = true
		}
		return
	}
	if cap(s.order) < len(mass) {
		s.order = make([]int32, len(mass))
	}
	order := s.order[:len(mass)]
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		switch {
		case mass[a] > mass[b]:
			return -1
		case mass[a] < mass[b]:
			return 1
		}
		return int(a - b)
	})
	var cum float64
	for _, i := range order {
		kept[i] = true
		cum += mass[i]
		if cum >= p*total {
			return
		}
	}
}

// scorer is one worker's compressed-attention state.
//
// Every value is computed in a canonical order: composite tokens in
// float32 with separately rounded multiplies and adds in increasing token
// (and head) order, which the device planner
// (cuda/kernels/plan_unisparse.cu) repeats operation for operation, then
// logits as plan.Dot64 of the float32 composites, the softmax and its
// per-block sums as plan.AddBlockSoftmax (run by blocksoftmax.Scratch,
// the same bits with the exponentials in vectors). (The device scores the
// composites in float32 on the tensor cores instead; its self-test judges
// it against BlockScores.)
type scorer struct {
	p    *plan.Plan
	c    config
	g    tensor.Geometry
	q, k *tensor.Tensor

	nq, nk int       // composite queries and keys
	cq, ck []float32 // composite queries (nq×D, scaled) and keys (nk×D)
	rows   []float32 // tokens of one composite group, head-averaged (c×D)
	buf    []float32 // one token row
	ckT    []float32 // ck in interleaved panels of kernel.Dot64Lanes keys
	aq     []float64 // four composite queries, widened to float64
	out    []float64 // one kernel.Dot64Panel result
	logits []float64 // four composite queries' logits, nk each
	mass   []float64
	sm     blocksoftmax.Scratch // plan.AddBlockSoftmax, exponentials in vectors
	order  []int32              // topP's order

	// The outlier query (outlier.go), when c.outlier.
	mean   []float32 // one composite group's average (pooling other than Average)
	keyT   []float32 // the individual keys (head-averaged), interleaved as ckT
	otok   []int32   // each query block's outlier token
	odist  []float32 // and its squared distance from its composite's mean
	oq     []float32 // the outlier tokens, unscaled (query blocks × D)
	oa     []float64 // eight outlier tokens, scaled, widened to float64
	oout   []float64 // one kernel.Dot64Panel8 result
	ol     []float64 // eight outlier tokens' logits, Nk each
	obm    []float64 // one outlier token's block maxima
	oshift []float64 // its logits less their block maxima (unused)
	ox     []float64 // one block's exponentials
	extra  []int32   // each query block's extra KV block, or −1

	// keysOf is the KV head of batch keysB whose composite keys ck and ckT
	// hold, when keysOK: without head compression or stochastic draws the
	// query heads of one KV head share them.
	keysB, keysOf int
	keysOK        bool
}

func newScorer(p *plan.Plan, c config, q, k *tensor.Tensor) *scorer {
	g := p.Geometry
	s := &scorer{p: p, c: c, g: g, q: q, k: k}
	s.nq, s.nk = (g.Nq+c.cq-1)/c.cq, (g.Nk+c.ck-1)/c.ck
	s.cq = make([]float32, s.nq*g.D)
	s.ck = make([]float32, s.nk*g.D)
	s.rows = make([]float32, max(c.cq, c.ck)*g.D)
	s.buf = make([]float32, g.D)
	keys := (s.nk + 2*kernel.Dot64Lanes - 1) / (2 * kernel.Dot64Lanes) * (2 * kernel.Dot64Lanes)
	s.ckT = make([]float32, keys*g.D) // padding keys stay zero
	s.aq = make([]float64, 4*g.D)
	s.out = make([]float64, 4*2*kernel.Dot64Lanes)
	s.logits = make([]float64, 4*s.nk)
	s.mass = make([]float64, p.KBlocks())
	if c.outlier {
		qbs := p.QBlocks()
		s.mean = make([]float32, g.D)
		keys := (g.Nk + 2*kernel.Dot64Lanes - 1) / (2 * kernel.Dot64Lanes) * (2 * kernel.Dot64Lanes)
		s.keyT = make([]float32, keys*g.D) // padding keys stay zero
		s.otok, s.odist, s.extra = make([]int32, qbs), make([]float32, qbs), make([]int32, qbs)
		s.oq = make([]float32, qbs*g.D)
		s.oa = make([]float64, 8*g.D)
		s.oout = make([]float64, 8*2*kernel.Dot64Lanes)
		s.ol = make([]float64, 8*g.Nk)
		s.obm = make([]float64, p.KBlocks())
		s.oshift = make([]float64, g.Nk)
		s.ox = make([]float64, p.BlockK)
	}
	return s
}

// compress builds the composite queries and keys of the head group whose
// first query head is h0 (UniSparse §4.2, Eq. 2–3), and with the outlier
// query each query block's extra KV block (outlier.go). The keys are kept
// when they are the last call's (the same batch and KV head, no head
// compression and no stochastic draw).
func (s *scorer) compress(b, h0 int) {
	s.compressTokens(b, h0)
	if s.c.outlier {
		s.outlierBlocks()
	}
}

// compressTokens is compress less the outlier blocks: the composites, and
// with the outlier query each query block's outlier token and the
// individual keys.
func (s *scorer) compressTokens(b, h0 int) {
	g, c := s.g, s.c
	scale := s.p.SoftmaxScale()
	pool := newPooler(c, b, h0)
	out := make([]float32, g.D)
	for a := range s.nq {
		lo, hi := a*c.cq, min((a+1)*c.cq, g.Nq)
		s.gather(s.q, b, h0, lo, hi, false)
		rows := s.rows[:(hi-lo)*g.D]
		pool.pool(out, rows, g.D, 0)
		for d, x := range out {
			s.cq[a*g.D+d] = x * scale
		}
		if c.outlier {
			mean := out
			if c.pooling != Average {
				mean = s.mean
				averagePool(mean, rows, g.D)
			}
			s.outlierStats(rows, mean, lo)
		}
	}
	shared := c.ch == 1 && c.pooling != Stochastic
	if shared && s.keysOK && s.keysB == b && s.keysOf == g.KVHead(h0) {
		return
	}
	s.keysOK = false
	for j := range s.nk {
		lo, hi := j*c.ck, min((j+1)*c.ck, g.Nk)
		s.gather(s.k, b, h0, lo, hi, true)
		pool.pool(s.ck[j*g.D:(j+1)*g.D], s.rows[:(hi-lo)*g.D], g.D, 1)
		if c.outlier { // the individual keys, interleaved as ckT below
			for t := lo; t < hi; t++ {
				panel := s.keyT[t/kernel.Dot64Lanes*kernel.Dot64Lanes*g.D:]
				for d, x := range s.rows[(t-lo)*g.D : (t-lo+1)*g.D] {
					panel[d*kernel.Dot64Lanes+t%kernel.Dot64Lanes] = x
				}
			}
		}
	}
	// Interleave in address order: element d of composite key p·8+c at
	// ckT[p·8·D + d·8 + c]; the padding keys stay zero.
	const lanes = kernel.Dot64Lanes
	for p0 := 0; p0 < s.nk; p0 += lanes {
		panel := s.ckT[p0*g.D : (p0+lanes)*g.D]
		keys := min(lanes, s.nk-p0)
		for d := range g.D {
			out := panel[d*lanes : d*lanes+keys]
			for c := range out {
				out[c] = s.ck[(p0+c)*g.D+d]
			}
		}
	}
	s.keysB, s.keysOf, s.keysOK = b, g.KVHead(h0), shared
}

// gather fills s.rows with tokens lo..hi−1, each averaged over the head
// group's c_h query heads (their KV heads, for keys): row += (1/c_h)·x head
// by head in increasing head order, the product rounded before the add.
func (s *scorer) gather(x *tensor.Tensor, b, h0, lo, hi int, keys bool) {
	g, ch := s.g, s.c.ch
	rows := s.rows[:(hi-lo)*g.D]
	clear(rows)
	inv := 1 / float32(ch)
	for h := h0; h < h0+ch; h++ {
		src := h
		if keys {
			src = g.KVHead(h)
		}
		for t := lo; t < hi; t++ {
			if ch == 1 {
				x.ReadRow(b, src, t, rows[(t-lo)*g.D:])
				continue
			}
			x.ReadRow(b, src, t, s.buf)
			dst := rows[(t-lo)*g.D : (t-lo+1)*g.D]
			for i, v := range s.buf {
				dst[i] += float32(inv * v)
			}
		}
	}
}

// blockMass returns, for each of query block qb's visible KV blocks, the
// compressed attention mass its composite queries put on the block's
// composite keys (UniSparse Eq. 4–5), the softmax of each composite query
// running over the composite keys in its valid causal range: those whose
// first token its last token sees.
func (s *scorer) blockMass(qb int, blocks []int32) []float64 {
	p, g, c := s.p, s.g, s.c
	a0 := qb * p.BlockQ / c.cq
	a1 := min(a0+p.BlockQ/c.cq, s.nq)
	clear(s.mass)
	// Visible blocks are a prefix in causal plans, so every composite up to
	// the last visible block's counts.
	last := 0
	for _, kb := range blocks {
		last = max(last, int(kb))
	}
	cols := min(s.nk, (last+1)*p.BlockK/c.ck)
	if len(blocks) == 0 || cols == 0 {
		return s.mass[:0]
	}
	off := g.QueryOffset()
	visible := func(a int) int {
		if !p.Causal {
			return cols
		}
		lastTok := min((a+1)*c.cq, g.Nq) - 1 + off // composite key j is visible when j·c_k ≤ lastTok
		if lastTok < 0 {
			return 0
		}
		return min(cols, lastTok/c.ck+1)
	}
	// Four composite queries at a time against sixteen composite keys in
	// kernel.Dot64Panel, which adds each logit's products in plan.Dot64's
	// order: the bits of one plan.Dot64 per logit, several times faster.
	D, keysPer := g.D, 2*kernel.Dot64Lanes
	for a4 := a0; a4 < a1; a4 += 4 {
		n := min(4, a1-a4)
		most := 0
		for a := a4; a < a4+n; a++ {
			most = max(most, visible(a))
		}
		clear(s.aq)
		for i, x := range s.cq[a4*D : (a4+n)*D] {
			s.aq[i] = float64(x)
		}
		for j0 := 0; j0 < most; j0 += keysPer {
			kernel.Dot64Panel(s.aq, D, D, s.ckT[j0*D:], s.out)
			for r := range n {
				for c, v := range s.out[r*keysPer : (r+1)*keysPer] {
					if j0+c < s.nk {
						s.logits[r*s.nk+j0+c] = v
					}
				}
			}
		}
		for r := range n {
			l := s.logits[r*s.nk : r*s.nk+visible(a4+r)]
			s.sm.Add(s.mass, l, p.BlockK/c.ck) // plan.AddBlockSoftmax's bits
		}
	}
	out := s.mass[:len(blocks)]
	if len(blocks) == p.KBlocks() || blocks[0] == 0 && int(blocks[len(blocks)-1]) == len(blocks)-1 {
		return out // visible blocks are 0..len−1, already in place
	}
	tmp := make([]float64, len(blocks))
	for i, kb := range blocks {
		tmp[i] = s.mass[kb]
	}
	return tmp
}
