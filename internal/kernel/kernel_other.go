//go:build !amd64

package kernel

// accelerated names the implementation in use: only the portable one
// exists here.
const accelerated = "generic"

func matMul(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	matMulGeneric(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
}

func expShift(dst, src []float32, shift float32) float32 { return expShiftGeneric(dst, src, shift) }

func maxOf(x []float32) float32 { return maxGeneric(x) }

func maxRows(m, n int, s []float32, lds int, out []float32) {
	maxRowsWith(maxGeneric, m, n, s, lds, out)
}

func scale(x []float32, a float32) { scaleGeneric(x, a) }

func dot(a, b []float32) float32 { return dotGeneric(a, b) }

func axpy(a float32, x, y []float32) { axpyGeneric(a, x, y) }

func firstNonFinite32(x []float32) int { return firstNonFinite32Generic(x) }

func firstNonFinite16(x []uint16, expMask uint16) int {
	return firstNonFinite16Generic(x, expMask)
}

func dotRows(m, n, d int, q []float32, ldq int, k []float32, ldk int, s []float32, lds int) {
	dotRowsGeneric(m, n, d, q, ldq, k, ldk, s, lds)
}

func mulAddRows(m, n, dv int, p []float32, ldp int, v []float32, ldv int, acc []float32, ldacc int) {
	matMulGeneric(m, dv, n, p, ldp, v, ldv, acc, ldacc, true)
}

func dot64Panel(a []float64, lda, l int, bt []float32, out []float64) {
	dot64PanelGeneric(a, lda, l, bt, out)
}

func prefetch(rows, cols int, x []float32, ld int) {}

func onlineSoftmax(m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int) {
	onlineSoftmaxGeneric(m, n, s, lds, mloc, mrun, l, sum, lold, acc, ldacc, dv)
}

func transpose(rows, cols int, src []float32, lds int, dst []float32, ldd int) {
	transposeGeneric(0, rows, 0, cols, src, lds, dst, ldd)
}
