package cpu

import (
	"math"

	"github.com/sparseattn/sparseattn/internal/kernel"
)

// partials holds the online-softmax state (row max m, normalizer ℓ and
// unnormalized output) of each part of a split row, as in
// FlashDecoding's split-KV reduction.
type partials struct {
	bq, dv int
	m, l   []float32 // [part][row]
	acc    []float32 // [part][row][dv]
}

func newPartials(parts, bq, dv int) *partials {
	return &partials{
		bq: bq, dv: dv,
		m: make([]float32, parts*bq), l: make([]float32, parts*bq), acc: make([]float32, parts*bq*dv),
	}
}

// save stores the tile's state for its first nq rows as part i.
func (ps *partials) save(i int, t *tile, nq, dv int) {
	copy(ps.m[i*ps.bq:], t.m[:nq])
	copy(ps.l[i*ps.bq:], t.l[:nq])
	copy(ps.acc[i*ps.bq*ps.dv:], t.acc[:nq*dv])
}

// merge combines parts first..first+n-1 of query block qb of head h in
// batch b and writes the normalized rows:
// O = Σ_s e^(m_s−M)·acc_s / Σ_s e^(m_s−M)·ℓ_s with M = max_s m_s.
func (ps *partials) merge(r *run, t *tile, b, h, qb, first, n int) {
	p := r.p
	qlo, qhi := p.QueryRange(qb)
	nq := qhi - qlo
	out := t.acc[:ps.dv]
	for i := range nq * r.stack {
		top := float32(math.Inf(-1))
		for s := range n {
			top = max(top, ps.m[(first+s)*ps.bq+i])
		}
		clear(out)
		var l float32
		if top != float32(math.Inf(-1)) { // else no part saw a visible key: zeros
			for s := range n {
				k := (first+s)*ps.bq + i
				if ps.m[k] == float32(math.Inf(-1)) {
					continue
				}
				w := float32(math.Exp(float64(ps.m[k] - top)))
				l += w * ps.l[k]
				kernel.Axpy(w, ps.acc[k*ps.dv:(k+1)*ps.dv], out)
			}
			kernel.Scale(out, 1/l)
		}
		hi := h + i/nq // stacked heads follow each other
		r.out.WriteRow(b, hi, int(queryToken(p, b, hi, qlo+i%nq)), out)
	}
}
