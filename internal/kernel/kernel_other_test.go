//go:build !amd64

package kernel

// archPaths is empty: only the portable implementation exists here.
var archPaths []path

// archTransposes is empty: only the portable Transpose exists here.
func archTransposes() map[string]func(rows, cols int, src []float32, lds int, dst []float32, ldd int) {
	return nil
}
