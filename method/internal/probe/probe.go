// Package probe computes the exact attention of a few probe queries — the
// last queries of a head — over all keys, and its vertical (per key) and
// slash (per query–key offset) sums: the estimate MInference and
// FlexPrefill select their vertical-slash patterns from.
package probe

import (
	"math"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Probe is the softmax attention of the last queries of one head.
type Probe struct {
	// Pos is each probe query's position among the keys (token + Nk − Nq).
	Pos []int
	// P[i][j] is probe query i's attention probability on key j; zero for
	// keys it cannot see, and a zero row when it sees none.
	P  [][]float64
	Nk int
	// Queries holds the probe queries, row-major, D per row.
	Queries []float32
}

// Tile is the number of keys per softmax tile of the canonical probe (see
// Last).
const Tile = 128

// Last returns the probe of the last min(n, Nq) queries of query head h in
// batch b, with the tiling's causal masking and softmax scale.
//
// The softmax is computed in a canonical order that the device planners
// (cuda/kernels/plan_minference.cu) repeat operation for operation: logit
// l_j = plan.Dot64(q, k_j)·scale; the visible keys are cut into tiles of
// Tile keys from key 0; tile t has maximum m_t, exponentials e_j =
// float32(plan.Exp64(l_j − m_t)) and sum s_t = plan.Sum64 of them (as
// float64); with m the row maximum, the row sum is S = plan.Sum64 over
// tiles of s_t·Exp64(m_t − m), and P_j = e_j·(Exp64(m_t − m)/S).
// Mathematically this is softmax(l); the float32 exponentials halve the
// device's scratch and cost about 6e-8 relative.
func Last(t plan.Tiling, q, k *tensor.Tensor, b, h, n int) *Probe {
	g := t.Geometry
	n = min(n, g.Nq)
	d := g.D
	p := &Probe{Nk: g.Nk, Pos: make([]int, n), P: make([][]float64, n), Queries: make([]float32, n*d)}
	keys := make([]float32, g.Nk*d)
	for j := range g.Nk {
		k.ReadRow(b, g.KVHead(h), j, keys[j*d:(j+1)*d])
	}
	scale := float64(t.SoftmaxScale())
	tiles := (g.Nk + Tile - 1) / Tile
	mt := make([]float64, tiles)
	st := make([]float64, tiles)
	tile := make([]float64, Tile)
	for i := range n {
		tok := g.Nq - n + i
		p.Pos[i] = tok + g.QueryOffset()
		qi := p.Queries[i*d : (i+1)*d]
		q.ReadRow(b, h, tok, qi)
		row := make([]float64, g.Nk)
		p.P[i] = row
		last := g.Nk - 1
		if t.Causal {
			last = min(p.Pos[i], g.Nk-1)
		}
		if last < 0 {
			continue
		}
		for j := 0; j <= last; j++ {
			row[j] = float64(plan.Dot64(qi, keys[j*d:(j+1)*d]) * scale)
		}
		nt := last/Tile + 1
		mx := math.Inf(-1)
		for tt := range nt {
			lo, hi := tt*Tile, min(tt*Tile+Tile, last+1)
			m := math.Inf(-1)
			for j := lo; j < hi; j++ {
				m = max(m, row[j])
			}
			for j := lo; j < hi; j++ {
				row[j] = float64(float32(plan.Exp64(row[j] - m)))
				tile[j-lo] = row[j]
			}
			mt[tt], st[tt] = m, plan.Sum64(tile[:hi-lo])
			mx = max(mx, m)
		}
		w := make([]float64, nt)
		for tt := range nt {
			w[tt] = float64(st[tt] * plan.Exp64(mt[tt]-mx))
		}
		sum := plan.Sum64(w)
		for tt := range nt {
			c := plan.Exp64(mt[tt]-mx) / sum
			for j := tt * Tile; j < min(tt*Tile+Tile, last+1); j++ {
				row[j] = float64(row[j] * c)
			}
		}
	}
	return p
}

// Vertical is the attention each key receives, summed over the probe
// queries in increasing order (the device planners repeat the order).
func (p *Probe) Vertical() []float64 {
	v := make([]float64, p.Nk)
	for _, row := range p.P {
		for j, x := range row {
			v[j] += x
		}
	}
	return v
}

// Slash is the attention along each diagonal, summed over the probe
// queries in increasing order: s[d+Nk−1] holds offset d = position − key, for d in
// [−(Nk−1), Nk−1] (negative offsets: keys after the query, non-causal
// only).
func (p *Probe) Slash() []float64 {
	s := make([]float64, 2*p.Nk-1)
	for i, row := range p.P {
		for j, x := range row {
			if d := p.Pos[i] - j; d > -p.Nk && d < p.Nk {
				s[d+p.Nk-1] += x
			}
		}
	}
	return s
}
