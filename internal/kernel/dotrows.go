package kernel

// DotRows sets s[i·lds+j] = Σ_t q[i·ldq+t]·k[j·ldk+t] for i < m, j < n,
// t < d: the m×n logits of m query rows against n key rows read in place
// (row-major, row stride ldk), as in decode, where the keys are read once
// from memory. Each key row is loaded once for up to four query rows, so
// the query heads of a GQA group share one pass over their keys. Every sum
// is a float32 sum of d products in several partial sums, with error
// within about d·2⁻²⁴·Σ|q||k|.
//
// It panics only on programmer error: negative dimensions, strides
// smaller than the row widths (ldq, ldk < d, lds < n) or slices too short.
func DotRows(m, n, d int, q []float32, ldq int, k []float32, ldk int, s []float32, lds int) {
	if m < 0 || n < 0 || d < 0 {
		panic("kernel: DotRows: negative dimension")
	}
	if m == 0 || n == 0 {
		return
	}
	if !fits(m, n, s, lds) {
		panic("kernel: DotRows: s is too short or lds < n")
	}
	if d == 0 {
		for i := range m {
			clear(s[i*lds : i*lds+n])
		}
		return
	}
	if !fits(m, d, q, ldq) || !fits(n, d, k, ldk) {
		panic("kernel: DotRows: q or k is too short, or a stride is below d")
	}
	dotRows(m, n, d, q, ldq, k, ldk, s, lds)
}

// dotRowsGeneric is DotRows with one dot product per (row, key).
func dotRowsGeneric(m, n, d int, q []float32, ldq int, k []float32, ldk int, s []float32, lds int) {
	dotRowsWith(dotGeneric, m, n, d, q, ldq, k, ldk, s, lds)
}

// dotRowsWith is DotRows on a given dot product.
func dotRowsWith(dot func(a, b []float32) float32, m, n, d int, q []float32, ldq int, k []float32, ldk int, s []float32, lds int) {
	for i := range m {
		qi := q[i*ldq : i*ldq+d]
		for j := range n {
			s[i*lds+j] = dot(qi, k[j*ldk:j*ldk+d])
		}
	}
}

// MulAddRows sets acc[i·ldacc+c] += Σ_j p[i·ldp+j]·v[j·ldv+c] for i < m,
// c < dv, j < n: MatMul with accumulate, for few rows of acc (decode's
// P·V). With AVX-512 and dv 64 or 128 it streams the rows of v once, in
// order, for every two rows of acc; otherwise it is MatMul. Each element
// is a float32 sum of n products plus the old value, error within about
// (n+1)·2⁻²⁴·(|acc|+Σ|p||v|).
//
// It panics only on programmer error: negative dimensions, strides
// smaller than the row widths or slices too short.
func MulAddRows(m, n, dv int, p []float32, ldp int, v []float32, ldv int, acc []float32, ldacc int) {
	if m < 0 || n < 0 || dv < 0 {
		panic("kernel: MulAddRows: negative dimension")
	}
	if m == 0 || n == 0 || dv == 0 {
		return
	}
	if !fits(m, n, p, ldp) || !fits(n, dv, v, ldv) || !fits(m, dv, acc, ldacc) {
		panic("kernel: MulAddRows: a slice is too short or a stride is below its row width")
	}
	mulAddRows(m, n, dv, p, ldp, v, ldv, acc, ldacc)
}
