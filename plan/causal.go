package plan

// QueryRange is the token range [lo, hi) of query block qb in the natural
// order.
func (p *Plan) QueryRange(qb int) (lo, hi int) {
	lo = qb * p.BlockQ
	return lo, min(lo+p.BlockQ, p.Geometry.Nq)
}

// KeyRange is the token range [lo, hi) of KV block kb in the natural order.
func (p *Plan) KeyRange(kb int) (lo, hi int) {
	lo = kb * p.BlockK
	return lo, min(lo+p.BlockK, p.Geometry.Nk)
}

// Visible reports whether query token qi may attend to key token kj: always
// when the plan is not causal, else when kj ≤ qi + Nk − Nq (queries are the
// last Nq of the Nk tokens, as in chunked prefill and decode).
func (p *Plan) Visible(qi, kj int) bool {
	return !p.Causal || kj <= qi+p.Geometry.QueryOffset()
}

// BlockVisibility classifies KV block kb for query block qb in the natural
// order: whether any of its pairs is visible, and whether some are masked,
// so that the block needs token-exact masking.
func (p *Plan) BlockVisibility(qb, kb int) (visible, partial bool) {
	if !p.Causal {
		return true, false
	}
	qlo, qhi := p.QueryRange(qb)
	klo, khi := p.KeyRange(kb)
	off := p.Geometry.QueryOffset()
	visible = klo <= qhi-1+off // the last query sees the first key
	partial = khi-1 > qlo+off  // the first query misses the last key
	return visible, visible && partial
}

// DenseBlocks is the number of block products a dense causal-aware pass
// computes for one of QK or PV: every (b, h, qb, kb) with a visible pair.
func (p *Plan) DenseBlocks() int64 {
	var n int64
	for qb := range p.QBlocks() {
		for kb := range p.KBlocks() {
			if visible, _ := p.BlockVisibility(qb, kb); visible {
				n++
			}
		}
	}
	return n * int64(p.Geometry.B*p.Geometry.Hq)
}
