package workload

import "math"

// Small dense helpers. Every multiply-add is written as float64(a*b) + c,
// which the Go specification forbids the compiler from fusing, so results
// are the same on every architecture.

// dot returns a·b.
func dot(a, b []float64) float64 {
	var s float64
	for i, x := range a {
		s += float64(x * b[i])
	}
	return s
}

// axpy sets y += alpha·x.
func axpy(alpha float64, x, y []float64) {
	for i, v := range x {
		y[i] += float64(alpha * v)
	}
}

// normalize scales v to unit length and reports its former norm.
func normalize(v []float64) float64 {
	n := math.Sqrt(dot(v, v))
	if n > 0 {
		for i := range v {
			v[i] /= n
		}
	}
	return n
}

// matrix is a dense row-major rows×cols matrix.
type matrix struct {
	rows, cols int
	a          []float64
}

func newMatrix(rows, cols int) matrix {
	return matrix{rows: rows, cols: cols, a: make([]float64, rows*cols)}
}

func (m matrix) row(i int) []float64 { return m.a[i*m.cols : (i+1)*m.cols] }

// gaussian fills m with N(0, scale²) entries.
func (m matrix) gaussian(g *rng, scale float64) matrix {
	g.fillNorm(m.a, scale)
	return m
}

// mulVec sets dst[i] = alpha·(m x)_i for every row.
func (m matrix) mulVec(alpha float64, x, dst []float64) {
	for i := range m.rows {
		dst[i] = float64(alpha * dot(m.row(i), x))
	}
}

// orthonormalize runs Gram–Schmidt over vs in place. A vector that is
// (numerically) dependent on the earlier ones is left normalized but not
// orthogonalized, so tiny head dimensions still get unit directions.
func orthonormalize(vs [][]float64) {
	for i, v := range vs {
		orig := append([]float64(nil), v...)
		for _, u := range vs[:i] {
			axpy(-dot(u, v), u, v)
		}
		if normalize(v) < 1e-6 {
			copy(v, orig)
			normalize(v)
		}
	}
}

// rotatePairs applies a rotary embedding in place: for every pair p with
// dimensions (lo[p], hi[p]), (x_lo, x_hi) is rotated by the angle whose
// sine and cosine are sin[p] and cos[p].
func rotatePairs(x []float64, lo, hi []int, sin, cos []float64) {
	for p, i := range lo {
		j := hi[p]
		a, b := x[i], x[j]
		x[i] = float64(a*cos[p]) - float64(b*sin[p])
		x[j] = float64(a*sin[p]) + float64(b*cos[p])
	}
}
