//go:build !amd64

package kernel

func dot64Panel8(a []float64, lda, l int, bt []float32, out []float64) {
	dot64Panel8Generic(a, lda, l, bt, out)
}
