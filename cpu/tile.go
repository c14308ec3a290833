package cpu

import (
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// tile is one worker's scratch space for a query block.
type tile struct {
	qt    []float32 // BlockQ×D queries, pre-multiplied by the scale
	s     []float32 // BlockQ×BlockK logits, then probabilities
	acc   []float32 // BlockQ×Dv unnormalized output
	m, l  []float32 // running row max and normalizer
	mloc  []float32 // row max of the current block
	sum   []float32 // row sums of the current block's P̃ (kernel.OnlineSoftmax)
	lold  []float32 // ℓ·α before the current block's sum was added
	qtok  []int32   // token index of each query row
	qhead []int32   // query head of each row (rows of several heads share a tile when stacked)
	qlim  int       // the smallest last visible key token of the rows (causal)
	gat   *gathered // gathered KV blocks (token orders), allocated on first use
	sub   []*tile   // one tile per query block of a row group (group, rows)
	// cursors walks the rows of a group of query blocks (rows).
	cursors []cursor
	buf     []float32 // one input row
	negInf  []float32 // BlockK values of -Inf, the source of the causal mask
	reach   []int     // keys each row panel of a diagonal block sees (panelReach)
	// verified is what the last block call proved finite of its in-place
	// keys (checkedK) and values (checkedV), under Executor.CheckFinite.
	verified uint32
	// checked[b·Hkv+kh, kb] records what this worker's block calls proved
	// finite, for finiteCheck at the end of the run; nil until the first.
	checked []uint32
	stats   plan.Stats
	err     error // first error met, reported by Run
}

func newTile(p *plan.Plan) *tile {
	g := p.Geometry
	bq, bk := p.BlockQ, p.BlockK
	t := &tile{
		qt: make([]float32, bq*g.D), s: make([]float32, bq*bk), acc: make([]float32, bq*g.Dv),
		m: make([]float32, bq), l: make([]float32, bq), mloc: make([]float32, bq),
		sum: make([]float32, bq), lold: make([]float32, bq),
		qtok: make([]int32, bq), qhead: make([]int32, bq),
		buf: make([]float32, max(g.D, g.Dv)), negInf: make([]float32, bk),
		reach: make([]int, 0, (bq+panelRows-1)/panelRows),
	}
	for i := range t.negInf {
		t.negInf[i] = float32(math.Inf(-1))
	}
	return t
}

// mulAddRowsMax is the most query rows of a tile for which P·V runs on
// kernel.MulAddRows, which reads V once per two rows, rather than MatMul.
const mulAddRowsMax = 8

// keyBlock is one KV block as the kernels read it.
type keyBlock struct {
	kT   []float32 // D×n keys, row stride ldk; nil when k is set
	ldk  int
	k    []float32 // n×D keys, row stride ldk, read in place from a float32 tensor
	v    []float32 // n×Dv values, row stride ldv
	ldv  int
	bias []float32 // per-key logit bias, or nil
	n    int       // number of keys
	tok  []int32   // token index per key, or nil for consecutive tokens from first
	// first is the token index of key 0 when tok is nil.
	first int
	// partial is true when some (query, key) pair of the block is causally
	// masked. For a gathered block (tok set) block decides it from last.
	partial bool
	// last is the largest token of a gathered block.
	last int32
	// inPlaceK and inPlaceV are set when k and v are the input tensors'
	// own float32 rows.
	inPlaceK, inPlaceV bool
}

// row computes query block qb of head h in batch b over the whole CSR row
// and writes the normalized output.
func (t *tile) row(r *run, b, h, qb int) {
	n := t.begin(r, b, h, qb)
	t.visit(r, b, h, qb, n, 0, 1)
	t.finish(r, b, n)
}

// finish normalizes the tile's first n rows and writes them to the output.
func (t *tile) finish(r *run, b, n int) {
	dv := r.g.Dv
	for i := range n {
		acc := t.acc[i*dv : (i+1)*dv]
		if t.l[i] > 0 {
			kernel.Scale(acc, 1/t.l[i])
		} // else: no visible key; acc is all zeros
		r.out.WriteRow(b, int(t.qhead[i]), int(t.qtok[i]), acc)
	}
}

// begin loads query block qb of head h in batch b — and of the next
// r.stack-1 heads, stacked below it, when the run stacks heads — scaled, and
// resets the running softmax state. It returns the number of rows.
func (t *tile) begin(r *run, b, h, qb int) int {
	p, g := r.p, r.g
	qlo, qhi := p.QueryRange(qb)
	nq := (qhi - qlo) * r.stack
	for i := range nq {
		hi := h + i/(qhi-qlo)
		t.qhead[i] = int32(hi)
		t.qtok[i] = queryToken(p, b, hi, qlo+i%(qhi-qlo))
		r.q.ReadRow(b, hi, int(t.qtok[i]), t.qt[i*g.D:])
		if r.check != nil {
			r.check.row(t.qt[i*g.D : (i+1)*g.D])
		}
		kernel.Scale(t.qt[i*g.D:(i+1)*g.D], r.scale)
	}
	t.qlim = math.MaxInt
	for _, tok := range t.qtok[:nq] {
		t.qlim = min(t.qlim, int(tok)+g.QueryOffset())
	}
	if st := r.state; st != nil && !r.pass1 { // resume the Init plan's states
		for i := range nq {
			at := (b*g.Hq+int(t.qhead[i]))*g.Nq + int(t.qtok[i])
			t.m[i], t.l[i] = st.m[at], st.l[at]
			copy(t.acc[i*g.Dv:(i+1)*g.Dv], st.acc[at*g.Dv:(at+1)*g.Dv])
		}
		return nq
	}
	for i := range nq {
		t.m[i] = float32(math.Inf(-1))
		t.l[i] = 0
	}
	clear(t.acc[:nq*g.Dv])
	return nq
}

// rowInit runs query block qb of head h in batch b of an Init plan and
// saves each query's unnormalized state for the main plan.
func (t *tile) rowInit(r *run, b, h, qb int) {
	n := t.begin(r, b, h, qb)
	t.visit(r, b, h, qb, n, 0, 1)
	t.save(r, b, n)
}

// save stores the unnormalized state of the tile's first n rows in r.state.
func (t *tile) save(r *run, b, n int) {
	g, st := r.g, r.state
	for i := range n {
		at := (b*g.Hq+int(t.qhead[i]))*g.Nq + int(t.qtok[i])
		st.m[at], st.l[at] = t.m[i], t.l[i]
		copy(st.acc[at*g.Dv:(at+1)*g.Dv], t.acc[i*g.Dv:(i+1)*g.Dv])
	}
}

// queryToken is the token at position pos of head h's query order.
func queryToken(p *plan.Plan, b, h, pos int) int32 {
	if p.Order != nil && p.Order.Query != nil {
		return p.Order.Query[(b*p.Geometry.Hq+h)*p.Geometry.Nq+pos]
	}
	return int32(pos)
}

// visit folds part `split` of `splits` equal parts of the row's entries into
// the running state of the tile's first nq rows. With one part it honors the
// plan's stop rule.
func (t *tile) visit(r *run, b, h, qb, nq, split, splits int) {
	p := r.p
	ri := p.Row(b, h, qb)
	order := p.Order
	kvOrder := -1
	if order != nil && order.RowKV != nil {
		kvOrder = int(order.RowKV[ri])
	}
	gathered := kvOrder >= 0 || (order != nil && order.Query != nil)
	blocks, levels := p.Entries(ri)
	lo, hi := split*len(blocks)/splits, (split+1)*len(blocks)/splits
	for e := lo; e < hi; e++ {
		kb := int(blocks[e])
		lv := plan.Full
		if levels != nil {
			lv = levels[e]
		}
		if lv == plan.Skip {
			continue
		}
		var blk keyBlock
		span := 1
		if gathered {
			blk = t.gather(r, b, h, kb, kvOrder)
		} else {
			blk = r.block(b, h, qb, kb, lv)
			if r.spans {
				var lvs []plan.Level
				if levels != nil {
					lvs = levels[e:hi]
				}
				blk, span = r.span(b, h, qb, nq, blk, blocks[e:hi], lvs)
			}
		}
		if r.prefetch && !gathered && e+1 < hi && (levels == nil || levels[e+1] != plan.Skip) {
			lvn := plan.Full
			if levels != nil {
				lvn = levels[e+1]
			}
			r.block(b, h, qb, int(blocks[e+1]), lvn).prefetch(r.g)
		}
		small := t.block(r, nq, blk, float64(span)*r.work(b, h, kb, lv, blk))
		for i := range span {
			t.record(r, b, h, kb+i, t.verified)
		}
		if s := p.Stop; s != nil && splits == 1 && e >= s.AfterRow(ri) && small {
			t.stats.Stopped++
			break
		}
		e += span - 1
	}
}

// work is what folding blk, KV block kb at level lv for query head h of
// batch b, adds to the block-product counters: each stacked head's share
// of the block counts as its own product, and a pooled block counts the
// fraction of keys it really scores.
func (r *run) work(b, h, kb int, lv plan.Level, blk keyBlock) float64 {
	w := float64(r.stack)
	if lv > plan.Full {
		w *= float64(blk.n) / float64(r.head(b, h).levels[0].n[kb])
	}
	return w
}

// record notes in the worker's own record (no shared cache line per
// block) what a block call proved finite of KV block kb of query head h's
// KV head, for finiteCheck.
func (t *tile) record(r *run, b, h, kb int, verified uint32) {
	if verified == 0 {
		return
	}
	i := (b*r.g.Hkv+r.g.KVHead(h))*r.p.KBlocks() + kb
	if t.checked == nil {
		t.checked = make([]uint32, len(r.check.done))
	}
	t.checked[i] |= verified
}

// block returns KV block kb at level lv for query head h of batch b:
// packed, or read in place from float32 tensors where the run allows.
func (r *run) block(b, h, qb, kb int, lv plan.Level) keyBlock {
	p, g := r.p, r.g
	pk := &r.head(b, h).levels[lv-1]
	kh, klo := g.KVHead(h), kb*p.BlockK
	blk := keyBlock{n: pk.n[kb], first: klo}
	if r.kRows != nil {
		blk.k, blk.ldk = r.kRows[r.k.RowOffset(b, kh, klo):], r.k.RowStride()
		blk.inPlaceK = true
	} else {
		blk.kT, blk.ldk = pk.kT[kb*g.D*pk.width:], pk.width
	}
	if r.vRows != nil {
		blk.v, blk.ldv = r.vRows[r.v.RowOffset(b, kh, klo):], r.v.RowStride()
		blk.inPlaceV = true
	} else {
		blk.v, blk.ldv = pk.v[kb*pk.width*g.Dv:], g.Dv
	}
	if pk.bias != nil {
		blk.bias = pk.bias[kb*pk.width : kb*pk.width+blk.n]
	}
	_, blk.partial = p.BlockVisibility(qb, kb)
	return blk
}

// prefetch asks for the block's keys and values in L2 cache, ahead of its
// turn: the next block's lines then arrive while the current one computes.
func (blk keyBlock) prefetch(g tensor.Geometry) {
	if blk.kT != nil {
		kernel.Prefetch(g.D, blk.n, blk.kT, blk.ldk)
	} else {
		kernel.Prefetch(blk.n, g.D, blk.k, blk.ldk)
	}
	kernel.Prefetch(blk.n, g.Dv, blk.v, blk.ldv)
}

// block folds one KV block into the running softmax state of the first nq
// query rows, and reports whether every row's normalizer grew by less than
// the plan's stop fraction. work scales the block-product counters (1 for a
// full block, 1/pool for a pooled one).
func (t *tile) block(r *run, nq int, blk keyBlock, work float64) (small bool) {
	p, g := r.p, r.g
	n := blk.n
	bk := max(p.BlockK, n) // the logits' row stride: a span (span.go) is wider than a block
	t.verified = 0
	if n == 0 { // nothing computed: no evidence for a stop
		return false
	}
	t.stats.QKBlocks += work
	// A block of consecutive keys that the causal boundary crosses, on the
	// GEMM path: row panels compute only the keys they can see (diagonal).
	diag := blk.partial && blk.tok == nil && blk.kT != nil && blk.bias == nil && !r.noTrim
	if diag {
		t.panelReach(nq, blk, g.QueryOffset())
	}
	// S = (scale·Q)·Kᵀ
	switch {
	case diag:
		t.diagLogits(nq, blk, g.D, bk)
	case blk.kT != nil:
		kernel.MatMul(nq, n, g.D, t.qt, g.D, blk.kT, blk.ldk, t.s, bk, false)
	default: // few queries: dot products against the keys in place, each key loaded once for all rows
		kernel.DotRows(nq, n, g.D, t.qt, g.D, blk.k, blk.ldk, t.s, bk)
	}
	check := r.check
	if check != nil && blk.inPlaceK { // the logits before masking: see finiteCheck
		for i := range nq {
			check.row(t.s[i*bk : i*bk+n])
		}
		t.verified |= checkedK
	}
	negInf := float32(math.Inf(-1))
	off := g.QueryOffset()
	partial := blk.partial
	if blk.tok != nil {
		// Mask only where the causal boundary crosses the gathered block:
		// some key comes after some row's last visible token.
		partial = p.Causal && int(blk.last) > t.qlim
	}
	for i := range nq {
		s := t.s[i*bk : i*bk+n]
		if blk.bias != nil {
			kernel.Axpy(1, blk.bias, s)
		}
		if partial {
			limit := int(t.qtok[i]) + off // last visible key token
			if blk.tok == nil {
				// Consecutive tokens: mask the keys after limit (a
				// vectorized copy of a row of -Inf).
				lo := min(n, max(0, limit-blk.first+1))
				copy(s[lo:], t.negInf[:n-lo])
				continue
			}
			for j := range s {
				if int(blk.tok[j]) > limit {
					s[j] = negInf
				}
			}
		}
	}
	kernel.MaxRows(nq, n, t.s, bk, t.mloc)
	for _, m := range t.mloc[:nq] {
		if m != m || m > math.MaxFloat32 {
			// Finite inputs whose logits overflow float32 (|scale·q·k| > 3.4e38).
			t.err = fmt.Errorf("%w: a logit overflows float32; scale down the inputs or the softmax scale", tensor.ErrNonFinite)
			return false
		}
	}

	// Online softmax (FlashAttention-2 recurrence), the tile's rows in one
	// call: P̃ = exp(S − m_new), ℓ = α·ℓ + rowsum(P̃), O ·= α.
	kernel.OnlineSoftmax(nq, n, t.s, bk, t.mloc, t.m, t.l, t.sum, t.lold, t.acc, g.Dv, g.Dv)
	if st := p.Stop; st != nil {
		// S2O §3.2: the block's gain in the normalizer, Δℓ, against τ·ℓ;
		// a row with nothing visible yet (sum = lold = 0) has no gain and
		// does not allow a stop.
		small = true
		for i := range nq {
			if !(t.sum[i] < st.Tau*t.lold[i]) {
				small = false
				break
			}
		}
	}

	// O += P̃·V, by row group when the λ filter is on.
	f := p.Filter
	if f == nil {
		if diag && nq > mulAddRowsMax {
			folded := t.diagOutput(nq, blk, g.Dv, bk)
			if check != nil && blk.inPlaceV && folded { // every value was folded into some row
				check.row(t.acc[:nq*g.Dv])
				t.verified |= checkedV
			}
			t.stats.PVBlocks += work
			return small
		}
		if nq <= mulAddRowsMax {
			// Few rows (decode): stream V's rows once, in order.
			kernel.MulAddRows(nq, n, g.Dv, t.s, bk, blk.v, blk.ldv, t.acc, g.Dv)
		} else {
			kernel.MatMul(nq, g.Dv, n, t.s, bk, blk.v, blk.ldv, t.acc, g.Dv, true)
		}
		if check != nil && blk.inPlaceV { // every row folded every value: see finiteCheck
			check.row(t.acc[:nq*g.Dv])
			t.verified |= checkedV
		}
		t.stats.PVBlocks += work
		return small
	}
	groups := (nq + f.RowGroup - 1) / f.RowGroup
	for lo := 0; lo < nq; lo += f.RowGroup {
		hi := min(lo+f.RowGroup, nq)
		lambda := f.LambdaFor(int(t.qhead[lo])) // heads are never stacked under a filter
		// SpargeAttn §3.4: skip P̃V when max(m_local − m) < λ over the group.
		gap := negInf
		for i := lo; i < hi; i++ {
			if t.m[i] != negInf {
				gap = max(gap, t.mloc[i]-t.m[i])
			}
		}
		if gap < lambda {
			continue
		}
		kernel.MatMul(hi-lo, g.Dv, n, t.s[lo*bk:], bk, blk.v, blk.ldv, t.acc[lo*g.Dv:], g.Dv, true)
		t.stats.PVBlocks += work / float64(groups)
	}
	return small
}
