package workload

import (
	"math"
	"sort"

	"github.com/sparseattn/sparseattn/tensor"
)

// A small float64 reference attention for the structural tests.

// rows reads every row of head h of batch b of t as float64.
func rows(t *tensor.Tensor, b, h int) [][]float64 {
	s := t.Shape()
	buf := make([]float32, s.D)
	out := make([][]float64, s.N)
	for n := range s.N {
		t.ReadRow(b, h, n, buf)
		out[n] = make([]float64, s.D)
		for d, x := range buf {
			out[n][d] = float64(x)
		}
	}
	return out
}

// probs returns softmax(q·k_j/√D) over the visible keys (j <= i when
// causal) with masked keys (mask[j] true) excluded. Entries beyond the
// visible range are zero.
func probs(q []float64, ks [][]float64, i int, causal bool, mask []bool) []float64 {
	n := len(ks)
	if causal {
		n = i + 1
	}
	p := make([]float64, len(ks))
	scale := 1 / math.Sqrt(float64(len(q)))
	m := math.Inf(-1)
	for j := range n {
		if mask != nil && mask[j] {
			continue
		}
		var s float64
		for d, x := range q {
			s += x * ks[j][d]
		}
		p[j] = s * scale
		m = max(m, p[j])
	}
	var z float64
	for j := range n {
		if mask != nil && mask[j] {
			p[j] = 0
			continue
		}
		p[j] = math.Exp(p[j] - m)
		z += p[j]
	}
	for j := range n {
		p[j] /= z
	}
	return p
}

// headAttn is one head's Q and its KV head's K and V as float64 rows.
type headAttn struct {
	q, k, v [][]float64
	causal  bool
}

func loadHead(w *Workload, b, h int) headAttn {
	group := w.Q.Shape().H / w.K.Shape().H
	return headAttn{q: rows(w.Q, b, h), k: rows(w.K, b, h/group), v: rows(w.V, b, h/group), causal: w.Causal}
}

// output returns the attention output row for query i.
func (a headAttn) output(i int, mask []bool) []float64 {
	p := probs(a.q[i], a.k, i, a.causal, mask)
	o := make([]float64, len(a.v[0]))
	for j, pj := range p {
		if pj != 0 {
			for d, x := range a.v[j] {
				o[d] += pj * x
			}
		}
	}
	return o
}

// attnStats summarizes one head's attention over a set of queries.
type attnStats struct {
	sinkMass, sinkUniform   float64 // mass on the first 4 keys, and its uniform share
	localMass, localUniform float64 // mass within the last 64 keys (causal) / 3-D radius 2 (grid)
	maxProb                 float64 // mean of the largest probability
	entropyRatio            float64 // mean entropy / log(visible keys)
	cover90                 float64 // mean fraction of visible keys holding 90% of the mass
}

// cover returns the fraction of the n visible keys needed to hold frac of
// the mass of p.
func cover(p []float64, n int, frac float64) float64 {
	s := append([]float64(nil), p[:n]...)
	sort.Sort(sort.Reverse(sort.Float64Slice(s)))
	var acc float64
	for k, x := range s {
		acc += x
		if acc >= frac {
			return float64(k+1) / float64(n)
		}
	}
	return 1
}

// causalStats measures a causal head over queries qs.
func causalStats(a headAttn, qs []int, window int) attnStats {
	var st attnStats
	for _, i := range qs {
		p := probs(a.q[i], a.k, i, true, nil)
		n := i + 1
		for j := range min(4, n) {
			st.sinkMass += p[j]
		}
		st.sinkUniform += float64(min(4, n)) / float64(n)
		for j := max(0, i-window+1); j <= i; j++ {
			st.localMass += p[j]
		}
		st.localUniform += float64(min(window, n)) / float64(n)
		st.add(p, n)
	}
	return st.scale(len(qs))
}

func (st *attnStats) add(p []float64, n int) {
	var mx, h float64
	for _, x := range p[:n] {
		mx = max(mx, x)
		if x > 0 {
			h -= x * math.Log(x)
		}
	}
	st.maxProb += mx
	if n > 1 {
		st.entropyRatio += h / math.Log(float64(n))
	}
	st.cover90 += cover(p, n, 0.9)
}

func (st attnStats) scale(n int) attnStats {
	f := 1 / float64(n)
	return attnStats{
		sinkMass: st.sinkMass * f, sinkUniform: st.sinkUniform * f,
		localMass: st.localMass * f, localUniform: st.localUniform * f,
		maxProb: st.maxProb * f, entropyRatio: st.entropyRatio * f, cover90: st.cover90 * f,
	}
}

// gridStats measures a bidirectional head of a grid workload over visual
// queries qs: localMass is the mass on visual keys within Euclidean
// distance 2 in (t, h, w).
func gridStats(a headAttn, g Grid, qs []int) attnStats {
	var st attnStats
	n := len(a.k)
	for _, i := range qs {
		p := probs(a.q[i], a.k, i, false, nil)
		ti, hi, wi := i/(g.H*g.W), i/g.W%g.H, i%g.W
		cnt := 0
		for t := max(0, ti-2); t <= min(g.T-1, ti+2); t++ {
			for h := max(0, hi-2); h <= min(g.H-1, hi+2); h++ {
				for w := max(0, wi-2); w <= min(g.W-1, wi+2); w++ {
					dt, dh, dw := t-ti, h-hi, w-wi
					if dt*dt+dh*dh+dw*dw <= 4 {
						st.localMass += p[(t*g.H+h)*g.W+w]
						cnt++
					}
				}
			}
		}
		st.localUniform += float64(cnt) / float64(n)
		for j := g.T * g.H * g.W; j < n; j++ {
			st.sinkMass += p[j] // text tokens
		}
		st.sinkUniform += float64(n-g.T*g.H*g.W) / float64(n)
		st.add(p, n)
	}
	return st.scale(len(qs))
}

// cosine returns the cosine similarity of a and b.
func cosine(a, b []float64) float64 {
	var d, na, nb float64
	for i := range a {
		d += a[i] * b[i]
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return d / math.Sqrt(na*nb)
}

// adjacentCos is the mean cosine similarity of consecutive rows.
func adjacentCos(rs [][]float64) float64 {
	var s float64
	for i := 1; i < len(rs); i++ {
		s += cosine(rs[i-1], rs[i])
	}
	return s / float64(len(rs)-1)
}
