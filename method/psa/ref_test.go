package psa

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestPlanMatchesUnchunkedPlanner checks that the planner computing logits
// by key chunks for groups of query blocks gives exactly the plan of the
// planner it replaced (planRef: one MatMul per query block over a
// row-major Kᵀ, its draws from refOutlierScores and a sort), on every test
// shape, both estimators (strides dividing the blocks and not), default
// and odd sample counts (row panels of 1 to 8 rows), outlier-led draws
// from none to the whole sample, the similarity cap and both rules. The logits must be the same
// float32 values, so the plans must be identical, not merely close.
func TestPlanMatchesUnchunkedPlanner(t *testing.T) {
	r := testutil.Rand(t)
	// Beyond the awkward shapes, whose rows have fewer key columns than one
	// chunk: rows of several chunks with ragged ends, groups of many query
	// blocks, GQA, D up to 256, causal and not, Nq < Nk, and 16 sampled keys
	// per block (the default at 64-key blocks).
	long := []plantest.Shape{
		{Name: "long-causal-gqa", B: 1, Hq: 4, Hkv: 2, Nq: 1000, Nk: 1000, D: 32, BlockQ: 16, BlockK: 16, Causal: true},
		{Name: "long-noncausal-d256", B: 1, Hq: 1, Hkv: 1, Nq: 300, Nk: 700, D: 256, BlockQ: 32, BlockK: 16},
		{Name: "long-prefill-d64", B: 2, Hq: 2, Hkv: 1, Nq: 200, Nk: 900, D: 64, BlockQ: 16, BlockK: 24, Causal: true},
		// 64-key blocks: 16 sampled keys per block, the vector block
		// maxima's width; the last block of 10 keys has 10 columns.
		{Name: "long-causal-bk64", B: 1, Hq: 2, Hkv: 1, Nq: 650, Nk: 650, D: 32, BlockQ: 64, BlockK: 64, Causal: true},
		{Name: "long-noncausal-bk64", B: 1, Hq: 1, Hkv: 1, Nq: 200, Nk: 650, D: 32, BlockQ: 64, BlockK: 64},
	}
	for _, s := range plantest.Select(append(long, shapes...)) {
		pr := s.Problem(t, r, 1.5, 1)
		for _, pl := range []Planner{
			{Seed: r.Uint64(), Scale: 1},
			{SampleQ: 3, SampleK: 5, Seed: r.Uint64(), Scale: 1},
			{SampleQ: 13, SampleK: 40, Seed: r.Uint64(), Rule: Quantile, Scale: 1},
			{SampleQ: 13, SampleK: 40, OutlierQ: 13, OutlierK: NoOutliers, Seed: r.Uint64(), Scale: 1},
			{SampleQ: 5, SampleK: 7, OutlierQ: NoOutliers, OutlierK: 3, Seed: r.Uint64(), Scale: 1},
			{OutlierQ: 1, OutlierK: 100, Seed: r.Uint64(), Scale: 1.2},
			{Estimator: Antidiagonal, Scale: 1},
			{Estimator: Antidiagonal, Stride: 3, Similarity: []float64{0.1, 0, -0.1}, Scale: 1},
			{Estimator: Antidiagonal, Stride: 2, Scale: 1.2},
		} {
			sameImportance(t, s.Name, pl, pr)
			got, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
			if err != nil {
				t.Fatal(err)
			}
			want, err := pl.planRef(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %+v: plan differs from the unchunked planner's", s.Name, pl)
			}
		}
	}
}

// sameImportance checks that every row's importance, computed in groups
// of query blocks as Plan does, equals the reference estimator's bit for
// bit.
func sameImportance(t *testing.T, name string, pl Planner, pr plantest.Problem) {
	t.Helper()
	dense, err := plan.Dense(pr.Tiling)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pl.config(pr.Tiling)
	if err != nil {
		t.Fatal(err)
	}
	g := pr.Tiling.Geometry
	est, ref := newEstimator(dense, c, pr.Q, pr.K), newRefEstimator(dense, c, pr.Q, pr.K)
	for b := range g.B {
		for h := range g.Hq {
			est.head(b, h)
			ref.head(b, h)
			n := est.groupSize()
			for qb0 := 0; qb0 < dense.QBlocks(); qb0 += n {
				var qbs []int
				var blocks [][]int32
				for qb := qb0; qb < min(qb0+n, dense.QBlocks()); qb++ {
					bl, _ := dense.Entries(dense.Row(b, h, qb))
					qbs, blocks = append(qbs, qb), append(blocks, bl)
				}
				est.group(qbs, blocks)
				for i, qb := range qbs {
					got := est.rank(&est.slots[i], nil)
					want := ref.row(qb, blocks[i], nil)
					for j := range want {
						if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
							t.Fatalf("%s %+v b%d h%d qb%d block %d: importance %v, want %v (bit for bit)", name, pl, b, h, qb, blocks[i][j], got[j], want[j])
						}
					}
				}
			}
		}
	}
}

func (p Planner) planRef(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	dense, err := plan.Dense(t) // visibility and the causally visible blocks of each row
	if err != nil {
		return nil, err
	}
	c, err := p.config(t)
	if err != nil {
		return nil, err
	}
	if err := heads.CheckInputs(t, q, k, "psa"); err != nil {
		return nil, err
	}
	g := t.Geometry
	var caps []plan.Level // per (b, KV head, KV block): coarsest admissible level
	if c.sim != nil {
		caps = similarityCaps(dense, k, c.sim)
	}
	levels := make([]plan.Level, len(dense.KVBlock)) // aligned with dense's entries
	err = heads.ForEachWorker(ctx, g.B*g.Hq, func() func(int) {
		est := newRefEstimator(dense, c, q, k)
		var imp []float64
		return func(i int) {
			b, h := i/g.Hq, i%g.Hq
			est.head(b, h)
			for qb := range dense.QBlocks() {
				r := dense.Row(b, h, qb)
				blocks, _ := dense.Entries(r)
				imp = est.row(qb, blocks, imp[:0])
				lv := levels[dense.RowStart[r]:dense.RowStart[r+1]]
				assign(c, imp, lv)
				for e, kb := range blocks {
					if lv[e] == plan.Skip {
						continue
					}
					if caps != nil {
						lv[e] = min(lv[e], caps[(b*g.Hkv+g.KVHead(h))*dense.KBlocks()+int(kb)])
					}
					if _, partial := dense.BlockVisibility(qb, int(kb)); partial {
						lv[e] = plan.Full
					}
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
			if levels[e] != plan.Skip {
				bld.Add(r, int(dense.KVBlock[e]), levels[e])
			}
		}
	}
	return bld.Build()
}

// refEstimator is the importance estimator as it was before key chunks
// and query-block groups (test-only reference): one worker's importance estimator and scratch. head selects
// the (batch, query head) whose rows row then scores.
type refEstimator struct {
	p     *plan.Plan
	c     config
	g     tensor.Geometry
	q, k  *tensor.Tensor
	scale float32

	b, h int

	// Keys of the current KV head, one column per sampled key (Sampling)
	// or per antidiagonal key group (Antidiagonal); colStart[kb] is block
	// kb's first column, colTok[col] the column's first key token.
	kT       []float32 // width rows of length cols: kT[d·cols + col]
	width    int       // D (Sampling) or Stride·D (Antidiagonal)
	cols     int
	colStart []int
	colTok   []int

	qrows   []float32 // query rows (sampled, or reshaped groups), scaled
	qTok    []int     // first token of each query row
	logits  []float32
	buf     []float32 // one key row
	visible []bool    // per KV block: listed in the current row
	score   []float64 // per KV block: importance of the current row
	perm    []int
}

func newRefEstimator(p *plan.Plan, c config, q, k *tensor.Tensor) *refEstimator {
	g := p.Geometry
	e := &refEstimator{p: p, c: c, g: g, q: q, k: k, scale: p.SoftmaxScale(), buf: make([]float32, g.D)}
	e.colStart = make([]int, p.KBlocks()+1)
	e.perm = make([]int, max(p.BlockQ, p.BlockK))
	e.visible = make([]bool, p.KBlocks())
	e.score = make([]float64, p.KBlocks())
	return e
}

// rng returns a generator for one purpose of one (batch, head, block),
// independent of which worker asks.
func (e *refEstimator) rng(kind, b, h, blk int) *rand.Rand {
	return rand.New(rand.NewPCG(e.c.seed, uint64(kind)<<60^uint64(b)<<40^uint64(h)<<20^uint64(blk)))
}

// sample returns s distinct offsets in [0, n), or all n when s ≥ n: the m
// offsets of the block's largest outlier scores (refOutlierScores; ties
// to the lower offset), largest first, each swapped into place in the
// identity permutation, then a partial Fisher–Yates shuffle of the rest.
// x reads the block's rows lo..lo+n−1.
func (e *refEstimator) sample(r *rand.Rand, n, s, m int, x func(j int, dst []float32)) []int {
	perm := e.perm[:n]
	for i := range perm {
		perm[i] = i
	}
	if s >= n {
		return perm
	}
	m = min(m, s)
	if m > 0 {
		rows := make([][]float32, n)
		for j := range rows {
			rows[j] = make([]float32, e.g.D)
			x(j, rows[j])
		}
		z := refOutlierScores(rows)
		top := descending(z)
		for i := range m {
			at := slices.Index(perm, top[i])
			perm[i], perm[at] = perm[at], perm[i]
		}
	}
	for i := m; i < s; i++ { // partial Fisher–Yates
		j := i + r.IntN(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm[:s]
}

// refOutlierScores is outlierScores written out plainly, one row and one
// dimension at a time in the same order and the same float32 arithmetic:
// the mean and the squared deviations summed over rows, each score over
// dimensions.
func refOutlierScores(rows [][]float32) []float32 {
	n, d := len(rows), len(rows[0])
	z := make([]float32, n)
	for i := range d {
		var sum float32
		for j := range n {
			sum += rows[j][i]
		}
		mu := sum / float32(n)
		var v float32
		for j := range n {
			y := rows[j][i] - mu
			v += float32(y * y)
		}
		if v == 0 {
			continue
		}
		w := 1 / v
		for j := range n {
			y := rows[j][i] - mu
			z[j] += float32(float32(y*y) * w)
		}
	}
	return z
}

// head prepares the keys of query head h's KV head.
func (e *refEstimator) head(b, h int) {
	e.b, e.h = b, h
	p, g := e.p, e.g
	kh := g.KVHead(h)
	e.colTok = e.colTok[:0]
	switch e.c.estimator {
	case Sampling:
		e.width = g.D
		for kb := range p.KBlocks() {
			e.colStart[kb] = len(e.colTok)
			lo, hi := p.KeyRange(kb)
			read := func(j int, dst []float32) { e.k.ReadRow(b, kh, lo+j, dst) }
			for _, j := range e.sample(e.rng(1, b, kh, kb), hi-lo, e.c.sampleK, e.c.outK, read) {
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
	e.kT = grow(e.kT, e.width*e.cols)
	clear(e.kT)
	for col, t := range e.colTok {
		if e.c.estimator == Sampling {
			e.k.ReadRow(b, kh, t, e.buf)
			for d, x := range e.buf {
				e.kT[d*e.cols+col] = x
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
				e.kT[(s*g.D+d)*e.cols+col] = x
			}
		}
	}
}

// row returns the importance of each of query block qb's visible blocks,
// appended to dst in the order of blocks.
func (e *refEstimator) row(qb int, blocks []int32, dst []float64) []float64 {
	p, g := e.p, e.g
	qlo, qhi := p.QueryRange(qb)
	// Query rows: sampled tokens, or Stride-token groups concatenated.
	e.qTok = e.qTok[:0]
	switch e.c.estimator {
	case Sampling:
		read := func(j int, dst []float32) { e.q.ReadRow(e.b, e.h, qlo+j, dst) }
		for _, i := range e.sample(e.rng(0, e.b, e.h, qb), qhi-qlo, e.c.sampleQ, e.c.outQ, read) {
			e.qTok = append(e.qTok, qlo+i)
		}
	case Antidiagonal:
		for t := qlo; t < qhi; t += e.c.stride {
			e.qTok = append(e.qTok, t)
		}
	}
	nq := len(e.qTok)
	e.qrows = grow(e.qrows, nq*e.width)
	clear(e.qrows)
	scale := e.scale
	if e.c.estimator == Antidiagonal {
		scale /= float32(e.c.stride) // XAttention: mean, not sum, of the antidiagonal
	}
	for i, t := range e.qTok {
		n := 1
		if e.c.estimator == Antidiagonal {
			n = min(e.c.stride, qhi-t)
		}
		for s := range n {
			qr := e.qrows[i*e.width+s*g.D : i*e.width+(s+1)*g.D]
			e.q.ReadRow(e.b, e.h, t+s, qr)
			kernel.Scale(qr, scale)
		}
	}
	// Logits against every key column up to the last visible block.
	cols := 0
	if len(blocks) > 0 {
		last := 0
		for _, kb := range blocks {
			last = max(last, int(kb))
		}
		cols = e.colStart[last+1]
	}
	e.logits = grow(e.logits, nq*max(cols, 1))
	if cols > 0 {
		kernel.MatMul(nq, cols, e.width, e.qrows, e.width, e.kT, e.cols, e.logits, cols, false)
	}
	visible := e.visible
	clear(visible)
	for _, kb := range blocks {
		visible[kb] = true
	}
	negInf := float32(math.Inf(-1))
	for i := range nq {
		s := e.logits[i*cols : (i+1)*cols]
		for kb := 0; kb*p.BlockK < g.Nk && e.colStart[kb] < cols; kb++ {
			_, partial := p.BlockVisibility(qb, kb)
			for col := e.colStart[kb]; col < e.colStart[kb+1]; col++ {
				switch {
				case !visible[kb]:
					s[col] = negInf
				case e.c.estimator == Sampling:
					if partial && !p.Visible(e.qTok[i], e.colTok[col]) {
						s[col] = negInf
					}
				default:
					s[col] = e.antidiagonal(i, col, s[col], qhi)
				}
			}
		}
	}
	// Softmax over the row's columns, then per block: the largest weight
	// (Sampling, PSA Eq. 4) or the summed weight (Antidiagonal).
	score := e.score
	clear(score)
	for i := range nq {
		s := e.logits[i*cols : (i+1)*cols]
		m := kernel.Max(s)
		if m == negInf {
			continue // this query sees no sampled key
		}
		sum := float64(kernel.ExpShift(s, s, m)) // masked logits become 0
		for _, kb := range blocks {
			for col := e.colStart[kb]; col < e.colStart[kb+1]; col++ {
				w := float64(s[col]) / sum
				if e.c.estimator == Sampling {
					score[kb] = max(score[kb], w)
				} else {
					score[kb] += w
				}
			}
		}
	}
	for _, kb := range blocks {
		dst = append(dst, score[kb])
	}
	return dst
}

// antidiagonal returns the logit of query group i against key group col:
// the matrix product's value when every pair on the tile's antidiagonal is
// causally visible, the sum over the visible pairs when only some are, and
// −Inf when there is none (ragged groups may share no antidiagonal pair).
func (e *refEstimator) antidiagonal(i, col int, full float32, qhi int) float32 {
	p, g, st := e.p, e.g, e.c.stride
	qt, kt := e.qTok[i], e.colTok[col]
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
	for s := range min(st, qhi-qt) {
		j := kt + st - 1 - s
		if j >= khi || !p.Visible(qt+s, j) {
			continue
		}
		any = true
		q := e.qrows[i*e.width+s*g.D : i*e.width+(s+1)*g.D]
		for d, x := range q {
			sum += x * e.kT[(s*g.D+d)*e.cols+col]
		}
	}
	if !any {
		return float32(math.Inf(-1))
	}
	return sum
}
