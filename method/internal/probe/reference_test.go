package probe

// The probe as it was before it ran in kernel.Dot64Panel and a Scratch
// (commit afb9a5e), kept verbatim as the reference that the fast probe
// must equal bit for bit: the device planners repeat this order.

import (
	"math"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// refProbe is the old Probe: probabilities as full rows.
type refProbe struct {
	Pos     []int
	P       [][]float64
	Nk      int
	Queries []float32
}

func lastReference(t plan.Tiling, q, k *tensor.Tensor, b, h, n int) *refProbe {
	g := t.Geometry
	n = min(n, g.Nq)
	d := g.D
	p := &refProbe{Nk: g.Nk, Pos: make([]int, n), P: make([][]float64, n), Queries: make([]float32, n*d)}
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
func (p *refProbe) Vertical() []float64 {
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
func (p *refProbe) Slash() []float64 {
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
