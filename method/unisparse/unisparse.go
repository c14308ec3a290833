// Package unisparse plans UniSparse attention (§4 of "A Unified Sparse
// Attention via Multi-Granularity Compression"): queries and keys are
// compressed into composite tokens — each the average of c_q (or c_k)
// consecutive tokens, and optionally of c_h consecutive heads — attention is
// computed in that compressed space, its weights are summed per original
// block pair, and each query block keeps the fewest KV blocks whose share of
// the mass reaches Top-P. The result is a binary block mask for the
// ordinary block-sparse executor.
//
// Besides Top-P, each query block also keeps the heaviest KV block of its
// outlier query (outlier.go): this project's extension of the paper's
// block selection, which keeps a lone query–key pair (a needle) that the
// composites average away. Planner.NoOutlier turns it off, leaving the
// paper's rule alone.
package unisparse

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/method/internal/blocksoftmax"
	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Pooling is how consecutive tokens are merged into a composite token.
type Pooling uint8

const (
	// Average takes their mean (UniSparse Eq. 2, the method's choice).
	Average Pooling = iota
	// Max takes their elementwise maximum (the paper's ablation, §6.4).
	Max
	// Stochastic picks one of them at random with probability proportional
	// to its L2 norm (the paper's ablation, §6.4); the draw is seeded.
	Stochastic
)

// String returns "average", "max" or "stochastic".
func (p Pooling) String() string {
	switch p {
	case Average:
		return "average"
	case Max:
		return "max"
	case Stochastic:
		return "stochastic"
	}
	return fmt.Sprintf("Pooling(%d)", p)
}

// Defaults chosen from this project's ablation (RESULTS.md, UniSparse):
// Top-P 0.95, the paper's more accurate setting, and c_q·c_k = 64 split
// 16×4. At equal sparsity the 16×4 split erred 10–27% less than the
// balanced 8×8 on the llm workload and tied with it on video, for the same
// arithmetic (the compressed score matrix has N²/64 entries either way);
// finer factors (4×4, 2×2) erred less still but planned 3–10× slower. The
// paper found balanced compression best on its models (§6.4, Table 6); set
// CQ = CK = 8 for that.
const (
	DefaultTopP = 0.95
	DefaultCQ   = 16
	DefaultCK   = 4
)

// Planner builds UniSparse plans. The zero value uses DefaultTopP,
// c_q = DefaultCQ, c_k = DefaultCK, no head compression and average pooling.
// A Planner is safe for concurrent use.
type Planner struct {
	// TopP is the share of each query block's compressed attention mass
	// its kept KV blocks must reach (Eq. 6), in (0, 1]; 1 keeps every
	// block. 0 means DefaultTopP.
	TopP float64
	// CQ and CK are the sequence compression factors c_q and c_k: tokens
	// per composite query and key. CQ must divide BlockQ and CK BlockK, so
	// composite tokens never straddle blocks. 0 means DefaultCQ or
	// DefaultCK (or their greatest common divisor with the block size).
	CQ, CK int
	// CH is the head compression factor c_h (Eq. 3): consecutive query
	// heads averaged into one, whose mask all of them share. It must divide
	// Hq. 0 or 1 means no head compression.
	CH int
	// Pooling merges tokens into composite tokens; Average is UniSparse.
	Pooling Pooling
	// Seed selects the Stochastic pooling draw.
	Seed uint64
	// NoOutlier turns off the outlier query, this project's extension of
	// UniSparse's block selection (§4.3; see outlier.go): by default each
	// query block also keeps the KV block that takes the most of the
	// softmax of its outlier query — the token farthest from its
	// composite's mean — over the individual keys the block sees, besides
	// its Top-P blocks. With NoOutlier the rows are Top-P's alone, the
	// paper's rule.
	NoOutlier bool
}

// Name returns "unisparse".
func (u Planner) Name() string { return "unisparse" }

type config struct {
	topP       float64
	cq, ck, ch int
	pooling    Pooling
	seed       uint64
	outlier    bool
}

// Config is a Planner's configuration resolved for one tiling: defaults
// filled in and every value checked. The device planner (package cuda)
// reads it.
type Config struct {
	TopP       float64
	CQ, CK, CH int
	Pooling    Pooling
	Seed       uint64
	// Outlier is !Planner.NoOutlier: each query block also keeps its
	// outlier query's heaviest KV block (outlier.go).
	Outlier bool
}

// Resolve returns u's configuration for tiling t, or an error wrapping
// plan.ErrInvalid.
func (u Planner) Resolve(t plan.Tiling) (Config, error) {
	c, err := u.config(t)
	return Config{TopP: c.topP, CQ: c.cq, CK: c.ck, CH: c.ch, Pooling: c.pooling, Seed: c.seed, Outlier: c.outlier}, err
}

func (u Planner) config(t plan.Tiling) (config, error) {
	c := config{topP: u.TopP, cq: u.CQ, ck: u.CK, ch: u.CH, pooling: u.Pooling, seed: u.Seed, outlier: !u.NoOutlier}
	if c.topP == 0 {
		c.topP = DefaultTopP
	}
	if !(c.topP > 0 && c.topP <= 1) {
		return c, fmt.Errorf("%w: unisparse TopP %v must be in (0, 1] (0 means %v)", plan.ErrInvalid, u.TopP, DefaultTopP)
	}
	if c.cq == 0 {
		c.cq = gcd(DefaultCQ, t.BlockQ)
	}
	if c.ck == 0 {
		c.ck = gcd(DefaultCK, t.BlockK)
	}
	if c.cq < 1 || t.BlockQ%c.cq != 0 {
		return c, fmt.Errorf("%w: unisparse CQ %d must be a positive divisor of BlockQ %d (0 means %d)", plan.ErrInvalid, u.CQ, t.BlockQ, DefaultCQ)
	}
	if c.ck < 1 || t.BlockK%c.ck != 0 {
		return c, fmt.Errorf("%w: unisparse CK %d must be a positive divisor of BlockK %d (0 means %d)", plan.ErrInvalid, u.CK, t.BlockK, DefaultCK)
	}
	if c.ch == 0 {
		c.ch = 1
	}
	if c.ch < 1 || t.Geometry.Hq%c.ch != 0 {
		return c, fmt.Errorf("%w: unisparse CH %d must be a positive divisor of the %d query heads (0 or 1: no head compression)", plan.ErrInvalid, u.CH, t.Geometry.Hq)
	}
	if c.pooling > Stochastic {
		return c, fmt.Errorf("%w: unisparse pooling %d must be Average, Max or Stochastic", plan.ErrInvalid, u.Pooling)
	}
	return c, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Plan compresses Q and K, scores block pairs in the compressed space and
// keeps each query block's Top-P KV blocks, and (unless NoOutlier) its
// outlier query's heaviest KV block.
func (u Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	dense, err := plan.Dense(t) // causally visible blocks of each row
	if err != nil {
		return nil, err
	}
	c, err := u.config(t)
	if err != nil {
		return nil, err
	}
	if err := heads.CheckInputs(t, q, k, "unisparse"); err != nil {
		return nil, err
	}
	g := t.Geometry
	keep := make([]bool, len(dense.KVBlock)) // aligned with dense's entries
	groups := g.B * g.Hq / c.ch
	err = heads.ForEachWorker(ctx, groups, func() func(int) {
		s := newScorer(dense, c, q, k)
		return func(i int) {
			b, h0 := i/(g.Hq/c.ch), (i%(g.Hq/c.ch))*c.ch
			s.compress(b, h0)
			for qb := range dense.QBlocks() {
				r := dense.Row(b, h0, qb)
				blocks, _ := dense.Entries(r)
				mass := s.blockMass(qb, blocks)
				kept := keep[dense.RowStart[r]:dense.RowStart[r+1]]
				s.topP(mass, c.topP, kept)
				if c.outlier && s.extra[qb] >= 0 {
					if e, ok := slices.BinarySearch(blocks, s.extra[qb]); ok {
						kept[e] = true
					}
				}
				// UniSparse §4.2: the group's mask is broadcast to its heads.
				for h := h0 + 1; h < h0+c.ch; h++ {
					r2 := dense.Row(b, h, qb)
					copy(keep[dense.RowStart[r2]:dense.RowStart[r2+1]], kept)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	bld, err := plan.NewBuilder(t)
	if err != nil {
		return nil, err
	}
	for r := range dense.Rows() {
		for e := dense.RowStart[r]; e < dense.RowStart[r+1]; e++ {
			if keep[e] {
				bld.Add(r, int(dense.KVBlock[e]), plan.Full)
			}
		}
	}
	return bld.Build()
}

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

// Scores are one head group's block masses as Plan computes them, in
// float64, before Top-P. The device planner's self-test (package
// cuda/selftest) judges device plans against them.
type Scores struct {
	// Mass[qb] holds query block qb's compressed attention mass on each of
	// its visible KV blocks, in key order (UniSparse Eq. 4–5).
	Mass [][]float64
	// Bound is the largest norm of the group's composite queries (scaled
	// by the softmax scale) times the largest norm of its composite keys:
	// every logit's products sum in absolute value to at most Bound.
	Bound float64
	// Outlier[qb] is query block qb's outlier query (outlier.go); nil with
	// NoOutlier.
	Outlier []Outlier
	// OutlierBound is Bound for the outlier queries' logits: the largest
	// norm of the scaled outlier tokens times that of the individual keys.
	OutlierBound float64
}

// Outlier is one query block's outlier query as Plan computes it.
type Outlier struct {
	// Token is the outlier query's index, −1 for a block that sees no key.
	Token int
	// Mass holds, for each of the block's visible KV blocks in key order,
	// the share of the outlier query's softmax (over the individual keys
	// the block's last query sees) that falls on it, in float64
	// (plan.AddBlockSoftmax); the shares add up to 1.
	Mass []float64
	// Block is the KV block Plan keeps for it, the first of the heaviest
	// (−1 with no visible key).
	Block int
}

// BlockScores returns the scores of the head group whose first query head
// is h0 (a multiple of CH) of batch b, those Plan keeps Top-P of.
func (u Planner) BlockScores(ctx context.Context, t plan.Tiling, q, k *tensor.Tensor, b, h0 int) (Scores, error) {
	dense, err := plan.Dense(t)
	if err != nil {
		return Scores{}, err
	}
	c, err := u.config(t)
	if err != nil {
		return Scores{}, err
	}
	if err := heads.CheckInputs(t, q, k, "unisparse"); err != nil {
		return Scores{}, err
	}
	if h0%c.ch != 0 || h0 < 0 || h0 >= t.Geometry.Hq {
		return Scores{}, fmt.Errorf("%w: unisparse head group start %d is not a multiple of CH %d below %d", plan.ErrInvalid, h0, c.ch, t.Geometry.Hq)
	}
	if err := ctx.Err(); err != nil {
		return Scores{}, err
	}
	s := newScorer(dense, c, q, k)
	s.compress(b, h0)
	out := Scores{Mass: make([][]float64, dense.QBlocks())}
	for qb := range dense.QBlocks() {
		blocks, _ := dense.Entries(dense.Row(b, h0, qb))
		out.Mass[qb] = slices.Clone(s.blockMass(qb, blocks))
	}
	d := t.Geometry.D
	out.Bound = maxNorm(s.cq, d) * maxNorm(s.ck, d)
	if c.outlier {
		out.Outlier = make([]Outlier, dense.QBlocks())
		keys := s.outlierKeys()
		scaled := make([]float32, len(s.oq))
		for i, x := range s.oq {
			scaled[i] = x * dense.SoftmaxScale()
		}
		for qb := range out.Outlier {
			o := Outlier{Token: -1, Block: int(s.extra[qb])}
			if vis := s.outlierVisible(qb); vis > 0 {
				o.Token = int(s.otok[qb])
				l := make([]float64, vis)
				for j := range l {
					l[j] = plan.Dot64(scaled[qb*d:(qb+1)*d], keys[j*d:(j+1)*d])
				}
				nb := (vis + t.BlockK - 1) / t.BlockK
				o.Mass = make([]float64, nb)
				plan.AddBlockSoftmax(o.Mass, l, t.BlockK, make([]float64, nb), make([]float64, nb))
			}
			out.Outlier[qb] = o
		}
		out.OutlierBound = maxNorm(scaled, d) * maxNorm(keys, d)
	}
	return out, nil
}

// maxNorm is the largest Euclidean norm of the rows of d values in x.
func maxNorm(x []float32, d int) float64 {
	var best float64
	for i := 0; i+d <= len(x); i += d {
		var s float64
		for _, v := range x[i : i+d] {
			s += float64(v) * float64(v)
		}
		best = max(best, s)
	}
	return math.Sqrt(best)
}
