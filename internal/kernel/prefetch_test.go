package kernel

import (
	"fmt"
	"testing"
)

// TestPrefetch checks that Prefetch accepts any window, including ones
// that reach past the end of x, strided ones and empty ones, without
// faulting or panicking, and leaves x unchanged (it is only a hint).
func TestPrefetch(t *testing.T) {
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)
	}
	for _, w := range []struct{ rows, cols, ld, from int }{
		{1, 1, 1, 0}, {10, 100, 100, 0}, {64, 64, 64, 0}, {64, 64, 80, 0},
		{3, 17, 333, 0}, {100, 100, 100, 500}, {40, 30, 30, 999}, {2, 5, 7, 995},
		{0, 5, 5, 0}, {5, 0, 5, 0}, {5, 6, 5, 0}, {-1, 5, 5, 0}, {3, 3, 3, 1000},
	} {
		t.Run(fmt.Sprintf("%dx%d-ld%d-at%d", w.rows, w.cols, w.ld, w.from), func(t *testing.T) {
			Prefetch(w.rows, w.cols, x[w.from:], w.ld)
			for i, v := range x {
				if v != float32(i) {
					t.Fatalf("x[%d] = %g, want %d", i, v, i)
				}
			}
		})
	}
}
