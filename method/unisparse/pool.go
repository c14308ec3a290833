package unisparse

import (
	"math"
	"math/rand/v2"
)

// pooler merges the tokens of one composite group into a composite token.
type pooler struct {
	kind Pooling
	rng  [2]*rand.Rand // Stochastic: query and key draws of one head group
}

func newPooler(c config, b, h0 int) *pooler {
	p := &pooler{kind: c.pooling}
	if c.pooling == Stochastic {
		for i := range p.rng {
			p.rng[i] = rand.New(rand.NewPCG(c.seed, uint64(b)<<33^uint64(h0)<<1^uint64(i)))
		}
	}
	return p
}

// pool writes the composite of rows (n tokens of d values, n ≥ 1) into out;
// stream selects the query (0) or key (1) random stream. The order of
// operations is canonical (see scorer): the device planner repeats it.
func (p *pooler) pool(out, rows []float32, d, stream int) {
	n := len(rows) / d
	switch p.kind {
	case Average: // UniSparse Eq. 2: q̃ = (1/c)·Σ q
		averagePool(out, rows, d)
	case Max: // by comparison, as the device planner does
		copy(out, rows[:d])
		for t := 1; t < n; t++ {
			for i, x := range rows[t*d : (t+1)*d] {
				if x > out[i] {
					out[i] = x
				}
			}
		}
	case Stochastic:
		copy(out, rows[pickByNorm(p.rng[stream], rows, d)*d:][:d])
	}
}

// pickByNorm draws a token index with probability proportional to its L2
// norm, uniformly when every token is zero. Each call takes one Float64
// from r (an IntN when every token is zero); the device planner walks the
// same PCG stream.
func pickByNorm(r *rand.Rand, rows []float32, d int) int {
	n := len(rows) / d
	norms := make([]float64, n)
	var total float64
	for t := range n {
		var s float64
		for _, x := range rows[t*d : (t+1)*d] {
			s += float64(x) * float64(x)
		}
		norms[t] = math.Sqrt(s)
		total += norms[t]
	}
	if total == 0 {
		return r.IntN(n)
	}
	u := r.Float64() * total
	for t, w := range norms {
		if u < w {
			return t
		}
		u -= w
	}
	return n - 1
}

// averagePool writes the mean of rows (n tokens of d values, n ≥ 1) into
// out: float32 adds in token order, then one multiply by 1/n.
func averagePool(out, rows []float32, d int) {
	n := len(rows) / d
	clear(out)
	for t := range n {
		for i, x := range rows[t*d : (t+1)*d] {
			out[i] += x
		}
	}
	inv := 1 / float32(n)
	for i := range out {
		out[i] *= inv
	}
}
