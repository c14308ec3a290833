// Package probe computes the exact attention of a few probe queries — the
// last queries of a head — over all keys, and its vertical (per key) and
// slash (per query–key offset) sums: the estimate MInference and
// FlexPrefill select their vertical-slash patterns from.
package probe

import (
	"math"

	"github.com/sparseattn/sparseattn/internal/kernel"
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

// Last returns the probe of the last min(n, Nq) queries of query head h in
// batch b, with the tiling's causal masking and softmax scale.
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
	for i := range n {
		tok := g.Nq - n + i
		p.Pos[i] = tok + g.QueryOffset()
		qi := p.Queries[i*d : (i+1)*d]
		q.ReadRow(b, h, tok, qi)
		row := make([]float64, g.Nk)
		last := g.Nk - 1
		if t.Causal {
			last = min(p.Pos[i], g.Nk-1)
		}
		mx := math.Inf(-1)
		for j := 0; j <= last; j++ {
			row[j] = float64(kernel.Dot(qi, keys[j*d:(j+1)*d])) * scale
			mx = max(mx, row[j])
		}
		var sum float64
		for j := 0; j <= last; j++ {
			row[j] = math.Exp(row[j] - mx)
			sum += row[j]
		}
		for j := 0; j <= last; j++ {
			row[j] /= sum
		}
		p.P[i] = row
	}
	return p
}

// Vertical is the attention each key receives, summed over the probe
// queries.
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
// queries: s[d+Nk−1] holds offset d = position − key, for d in
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
