package psa

import (
	"math"
	"math/rand/v2"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// estimator is one worker's importance estimator and scratch. head selects
// the (batch, query head) whose query blocks group and score then handle.
type estimator struct {
	p     *plan.Plan
	c     config
	g     tensor.Geometry
	q, k  *tensor.Tensor
	scale float32

	b, h int

	// Keys of the current KV head, one column per sampled key (Sampling)
	// or per antidiagonal key group (Antidiagonal); colStart[kb] is block
	// kb's first column, colTok[col] the column's first key token.
	kT       []float32 // width rows of cols columns, in chunks: see at
	width    int       // D (Sampling) or Stride·D (Antidiagonal)
	cols     int
	colStart []int
	colTok   []int

	slots   []slot    // the query blocks of the current group
	qTok    []int     // the first slot's query tokens, after row
	buf     []float32 // one key row
	visible []bool    // per KV block: listed in the current row
	score   []float64 // per KV block: importance of the current row
	perm    []int
	uniform int // Sampling: KV blocks 0..uniform−1 have sampleK columns each, in order
	// keysOK: kT, colTok, colStart and uniform hold KV head keysOf of
	// batch keysB.
	keysB, keysOf int
	keysOK        bool
	bmax          []float32 // sampledMax's block maxima
	// blockScores' scratch: a block's rows, their mean, the inverse
	// spreads and the scores.
	orows           []float32
	omean, oinv, oz []float32
}

// chunkCols is the width of the column chunks of estimator.kT. Each chunk
// (width rows of chunkCols columns) is contiguous, so one chunk stays in
// cache while every query block of a group is multiplied by it. It is a
// multiple of every column strip of kernel.MatMul (16 and 32), which is
// what keeps each logit's arithmetic that of one MatMul over all columns:
// see logits.
const chunkCols = 64

// slot is one query block of a group: its query rows and their logits
// against the key columns up to its last visible block.
type slot struct {
	qb     int
	blocks []int32
	tok    []int     // first token of each query row
	qrows  []float32 // query rows (sampled, or reshaped groups), scaled
	cols   int
	logits []float32 // len(tok) rows of cols
}

func newEstimator(p *plan.Plan, c config, q, k *tensor.Tensor) *estimator {
	g := p.Geometry
	e := &estimator{p: p, c: c, g: g, q: q, k: k, scale: p.SoftmaxScale(), buf: make([]float32, g.D)}
	e.colStart = make([]int, p.KBlocks()+1)
	e.perm = make([]int, max(p.BlockQ, p.BlockK))
	e.visible = make([]bool, p.KBlocks())
	e.score = make([]float64, p.KBlocks())
	return e
}

// groupSize is how many query blocks group takes at once: about 128 query
// rows, so that a key chunk is reused across them.
func (e *estimator) groupSize() int {
	nq := e.c.sampleQ
	if e.c.estimator == Antidiagonal {
		nq = (e.p.BlockQ + e.c.stride - 1) / e.c.stride
	}
	return max(1, 128/max(nq, 1))
}

// at is the index in kT of row r (a dimension, or a slot and dimension)
// and column col.
func (e *estimator) at(r, col int) int {
	return (col/chunkCols)*e.width*chunkCols + r*chunkCols + col%chunkCols
}

// rng returns a generator for one purpose of one (batch, head, block),
// independent of which worker asks.
func (e *estimator) rng(kind, b, h, blk int) *rand.Rand {
	return rand.New(rand.NewPCG(e.c.seed, uint64(kind)<<60^uint64(b)<<40^uint64(h)<<20^uint64(blk)))
}

// head prepares the keys of query head h's KV head, kept when they are
// the last call's (the same batch and KV head).
func (e *estimator) head(b, h int) {
	e.b, e.h = b, h
	p, g := e.p, e.g
	kh := g.KVHead(h)
	if e.keysOK && e.keysB == b && e.keysOf == kh {
		return // the keys depend on the KV head only: a GQA group shares them
	}
	e.keysOK = false
	e.colTok = e.colTok[:0]
	switch e.c.estimator {
	case Sampling:
		e.width = g.D
		for kb := range p.KBlocks() {
			e.colStart[kb] = len(e.colTok)
			lo, hi := p.KeyRange(kb)
			var z []float32
			if e.c.outK > 0 && e.c.sampleK < hi-lo {
				z = e.blockScores(e.k, b, kh, lo, hi)
			}
			for _, j := range e.draw(e.rng(1, b, kh, kb), hi-lo, e.c.sampleK, e.c.outK, z) {
				e.colTok = append(e.colTok, lo+j)
			}
		}
	case Antidiagonal:
		e.width = e.c.stride * g.D
		for kb := range p.KBlocks() {
			e.colStart[kb] = len(e.colTok)
			lo, hi := p.KeyRange(kb)
			for t := lo; t < hi; t += e.c.stride {
				e.colTok = append(e.colTok, t)
			}
		}
	}
	e.cols = len(e.colTok)
	e.colStart[p.KBlocks()] = e.cols
	e.uniform = 0
	for e.uniform < p.KBlocks() && e.colStart[e.uniform] == e.uniform*e.c.sampleK && e.colStart[e.uniform+1]-e.colStart[e.uniform] == e.c.sampleK {
		e.uniform++
	}
	e.kT = grow(e.kT, e.width*chunkCols*((e.cols+chunkCols-1)/chunkCols))
	clear(e.kT)
	for col, t := range e.colTok {
		if e.c.estimator == Sampling {
			e.k.ReadRow(b, kh, t, e.buf)
			for d, x := range e.buf {
				e.kT[e.at(d, col)] = x
			}
			continue
		}
		// Antidiagonal: slot s of the group holds key t+Stride−1−s, so a
		// dot product with the query group's concatenation sums the
		// tile's antidiagonal.
		_, bhi := p.KeyRange(t / p.BlockK)
		for s := range e.c.stride {
			j := t + e.c.stride - 1 - s
			if j >= bhi {
				continue
			}
			e.k.ReadRow(b, kh, j, e.buf)
			for d, x := range e.buf {
				e.kT[e.at(s*g.D+d, col)] = x
			}
		}
	}
	e.keysB, e.keysOf, e.keysOK = b, kh, true
}

// row returns the importance of each of query block qb's visible blocks,
// appended to dst in the order of blocks: group and rank for one block.
func (e *estimator) row(qb int, blocks []int32, dst []float64) []float64 {
	e.group([]int{qb}, [][]int32{blocks})
	e.qTok = e.slots[0].tok
	return e.rank(&e.slots[0], dst)
}

// group reads the query rows of query blocks qbs, whose visible blocks are
// blocks[i], and computes their logits; rank then scores each.
func (e *estimator) group(qbs []int, blocks [][]int32) {
	for len(e.slots) < len(qbs) {
		e.slots = append(e.slots, slot{})
	}
	for i, qb := range qbs {
		e.queries(&e.slots[i], qb, blocks[i])
	}
	e.logits(e.slots[:len(qbs)])
}

// queries fills slot s with query block qb's rows.
func (e *estimator) queries(s *slot, qb int, blocks []int32) {
	p, g := e.p, e.g
	s.qb, s.blocks = qb, blocks
	qlo, qhi := p.QueryRange(qb)
	// Query rows: sampled tokens, or Stride-token groups concatenated.
	s.tok = s.tok[:0]
	switch e.c.estimator {
	case Sampling:
		var z []float32
		if e.c.outQ > 0 && e.c.sampleQ < qhi-qlo {
			z = e.blockScores(e.q, e.b, e.h, qlo, qhi)
		}
		for _, i := range e.draw(e.rng(0, e.b, e.h, qb), qhi-qlo, e.c.sampleQ, e.c.outQ, z) {
			s.tok = append(s.tok, qlo+i)
		}
	case Antidiagonal:
		for t := qlo; t < qhi; t += e.c.stride {
			s.tok = append(s.tok, t)
		}
	}
	nq := len(s.tok)
	s.qrows = grow(s.qrows, nq*e.width)
	clear(s.qrows)
	scale := e.scale
	if e.c.estimator == Antidiagonal {
		scale /= float32(e.c.stride) // XAttention: mean, not sum, of the antidiagonal
	}
	for i, t := range s.tok {
		n := 1
		if e.c.estimator == Antidiagonal {
			n = min(e.c.stride, qhi-t)
		}
		for k := range n {
			qr := s.qrows[i*e.width+k*g.D : i*e.width+(k+1)*g.D]
			e.q.ReadRow(e.b, e.h, t+k, qr)
			kernel.Scale(qr, scale)
		}
	}
	// Logits against every key column up to the last visible block.
	s.cols = 0
	if len(blocks) > 0 {
		last := 0
		for _, kb := range blocks {
			last = max(last, int(kb))
		}
		s.cols = e.colStart[last+1]
	}
	// Sized for the head's longest row, so that the buffer is allocated
	// (and its pages touched) once, not again as rows grow.
	s.logits = grow(s.logits, nq*max(e.cols, 1))[:nq*max(s.cols, 1)]
}

// logits computes every slot's logits, chunk by chunk of key columns so
// that a chunk is read from memory once for the whole group. Each call
// multiplies a slot's rows, as one call over all its columns would, by a
// chunk that starts at a multiple of chunkCols: kernel.MatMul splits rows
// into the same panels and columns into the same strips (those strips'
// boundaries are multiples of their width from the first column), so each
// logit is the same float32 sum of the same products, in the same order,
// as that one call's.
func (e *estimator) logits(slots []slot) {
	for c0 := 0; ; c0 += chunkCols {
		done := true
		chunk := e.kT[(c0/chunkCols)*e.width*chunkCols:]
		for i := range slots {
			s := &slots[i]
			if s.cols <= c0 {
				continue
			}
			done = false
			kernel.MatMul(len(s.tok), min(chunkCols, s.cols-c0), e.width, s.qrows, e.width, chunk, chunkCols, s.logits[c0:], s.cols, false)
		}
		if done {
			return
		}
	}
}

// rank returns the importance of each of slot s's visible blocks, appended
// to dst in the order of its blocks.
func (e *estimator) rank(s *slot, dst []float64) []float64 {
	p, g := e.p, e.g
	qb, blocks, cols, nq := s.qb, s.blocks, s.cols, len(s.tok)
	_, qhi := p.QueryRange(qb)
	visible := e.visible
	clear(visible)
	for _, kb := range blocks {
		visible[kb] = true
	}
	negInf := float32(math.Inf(-1))
	for kb := 0; kb*p.BlockK < g.Nk && e.colStart[kb] < cols; kb++ {
		_, partial := p.BlockVisibility(qb, kb)
		c0, c1 := e.colStart[kb], e.colStart[kb+1]
		for i := range nq {
			l := s.logits[i*cols : (i+1)*cols]
			switch {
			case !visible[kb]:
				for col := c0; col < c1; col++ {
					l[col] = negInf
				}
			case e.c.estimator == Sampling:
				if !partial {
					continue
				}
				for col := c0; col < c1; col++ {
					if !p.Visible(s.tok[i], e.colTok[col]) {
						l[col] = negInf
					}
				}
			default:
				for col := c0; col < c1; col++ {
					l[col] = e.antidiagonal(s, i, col, l[col], qhi)
				}
			}
		}
	}
	// Softmax over the row's columns, then per block: the largest weight
	// (Sampling, PSA Eq. 4) or the summed weight (Antidiagonal).
	score := e.score
	clear(score)
	for i := range nq {
		l := s.logits[i*cols : (i+1)*cols]
		m := kernel.Max(l)
		if m == negInf {
			continue // this query sees no sampled key
		}
		sum := float64(kernel.ExpShift(l, l, m)) // masked logits become 0
		if e.c.estimator == Sampling && sum == sum {
			e.sampledMax(l, blocks, sum)
			continue
		}
		for _, kb := range blocks {
			c0, c1 := e.colStart[kb], e.colStart[kb+1]
			if e.c.estimator == Sampling {
				// The largest weight is the largest exp over the sum:
				// division by a positive sum is monotone, also rounded.
				if c0 == c1 {
					continue
				}
				mx := l[c0]
				for _, x := range l[c0+1 : c1] {
					mx = max(mx, x)
				}
				score[kb] = max(score[kb], float64(mx)/sum)
				continue
			}
			for _, x := range l[c0:c1] {
				score[kb] += float64(x) / sum
			}
		}
	}
	for _, kb := range blocks {
		dst = append(dst, score[kb])
	}
	return dst
}

// sampledMax is rank's Sampling update for one query row's weights l
// (exponentials, their sum not NaN): score[kb] = max(score[kb], largest
// weight of block kb / sum), as rank's loop takes it. The blocks of
// exactly sampleK columns from the first (every block but a ragged last)
// take their largest weight from kernel.MaxBlocks32 in one call; without
// NaN it is the value the loop's max finds (up to the sign of a zero,
// which max(score, ±0/sum) with score ≥ +0 does not see).
func (e *estimator) sampledMax(l []float32, blocks []int32, sum float64) {
	sk := e.c.sampleK
	whole := min(e.uniform, len(l)/sk)
	e.bmax = grow(e.bmax, whole)
	kernel.MaxBlocks32(e.bmax, l[:whole*sk], sk)
	score := e.score
	for _, kb := range blocks {
		c0, c1 := e.colStart[kb], e.colStart[kb+1]
		if c0 == c1 {
			continue
		}
		var mx float32
		if int(kb) < whole {
			mx = e.bmax[kb]
		} else {
			mx = l[c0]
			for _, x := range l[c0+1 : c1] {
				mx = max(mx, x)
			}
		}
		score[kb] = max(score[kb], float64(mx)/sum)
	}
}

// antidiagonal returns the logit of query group i of slot s against key
// group col: the matrix product's value when every pair on the tile's
// antidiagonal is causally visible, the sum over the visible pairs when
// only some are, and −Inf when there is none (ragged groups may share no
// antidiagonal pair).
func (e *estimator) antidiagonal(s *slot, i, col int, full float32, qhi int) float32 {
	p, g, st := e.p, e.g, e.c.stride
	qt, kt := s.tok[i], e.colTok[col]
	_, khi := p.KeyRange(kt / p.BlockK)
	// Ragged groups: query slot s exists for s < qn, key slot s for
	// s ≥ st−kn; with qn + kn ≤ st no slot has both.
	if qn, kn := min(st, qhi-qt), min(st, khi-kt); qn+kn <= st {
		return float32(math.Inf(-1))
	}
	if !p.Causal || p.Visible(qt, kt+st-1) {
		return full
	}
	var sum float32
	any := false
	for k := range min(st, qhi-qt) {
		j := kt + st - 1 - k
		if j >= khi || !p.Visible(qt+k, j) {
			continue
		}
		any = true
		q := s.qrows[i*e.width+k*g.D : i*e.width+(k+1)*g.D]
		for d, x := range q {
			sum += x * e.kT[e.at(k*g.D+d, col)]
		}
	}
	if !any {
		return float32(math.Inf(-1))
	}
	return sum
}

// similarityCaps returns, per (batch, KV head, KV block), the coarsest level
// the block's keys admit (PSA App. B.1, Algorithm 3): the largest h ≥ 2 whose
// pooling groups of 2^(h-1) keys have a mean first-to-last cosine similarity
// above sim[h-2], or 1 when none has.
func similarityCaps(p *plan.Plan, k *tensor.Tensor, sim []float64) []plan.Level {
	g := p.Geometry
	nkb := p.KBlocks()
	caps := make([]plan.Level, g.B*g.Hkv*nkb)
	keys := make([]float32, p.BlockK*g.D)
	for b := range g.B {
		for kh := range g.Hkv {
			for kb := range nkb {
				lo, hi := p.KeyRange(kb)
				n := hi - lo
				for j := range n {
					k.ReadRow(b, kh, lo+j, keys[j*g.D:(j+1)*g.D])
				}
				lv := plan.Full
				for h := 2; h <= len(sim)+1; h++ {
					if groupSimilarity(keys[:n*g.D], g.D, 1<<(h-1)) > sim[h-2] {
						lv = plan.Level(h)
					}
				}
				caps[(b*g.Hkv+kh)*nkb+kb] = lv
			}
		}
	}
	return caps
}

// groupSimilarity is the mean cosine similarity between the first and last
// key of each group of size consecutive keys (the last group may be
// shorter); 1 when no group has two keys, since pooling one key loses
// nothing.
func groupSimilarity(keys []float32, d, size int) float64 {
	n := len(keys) / d
	var sum float64
	pairs := 0
	for lo := 0; lo < n; lo += size {
		hi := min(lo+size, n) - 1
		if hi == lo {
			continue
		}
		sum += cosine(keys[lo*d:(lo+1)*d], keys[hi*d:(hi+1)*d])
		pairs++
	}
	if pairs == 0 {
		return 1
	}
	return sum / float64(pairs)
}

// cosine is the cosine similarity of a and b; 1 for two zero vectors, 0 when
// only one is zero.
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i, x := range a {
		y := float64(b[i])
		ab += float64(x) * y
		aa += float64(x) * float64(x)
		bb += y * y
	}
	switch {
	case aa == 0 && bb == 0:
		return 1
	case aa == 0 || bb == 0:
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
