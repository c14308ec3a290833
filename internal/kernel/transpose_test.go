package kernel

import (
	"fmt"
	"testing"
)

// TestTranspose checks every implementation against the definition on
// shapes around the 16×16 tile (whole tiles, ragged edges on either side,
// fewer than one tile) with padded strides, and that nothing outside the
// destination window is written. A transpose moves values unchanged, so
// the comparison is exact.
func TestTranspose(t *testing.T) {
	impls := map[string]func(rows, cols int, src []float32, lds int, dst []float32, ldd int){
		"dispatch": transpose,
		"generic": func(rows, cols int, src []float32, lds int, dst []float32, ldd int) {
			transposeGeneric(0, rows, 0, cols, src, lds, dst, ldd)
		},
	}
	for name, f := range archTransposes() {
		impls[name] = f
	}
	shapes := []struct{ rows, cols int }{
		{1, 1}, {3, 17}, {8, 8}, {15, 16}, {16, 15}, {16, 16}, {16, 64},
		{64, 64}, {64, 96}, {37, 128}, {50, 33}, {128, 64},
	}
	const sentinel = -7.5
	for name, f := range impls {
		for _, s := range shapes {
			for _, pad := range []int{0, 3} {
				t.Run(fmt.Sprintf("%s/%dx%d/pad%d", name, s.rows, s.cols, pad), func(t *testing.T) {
					lds, ldd := s.cols+pad, s.rows+pad
					src := make([]float32, (s.rows-1)*lds+s.cols)
					for i := range src {
						src[i] = float32(i) + 0.25
					}
					dst := make([]float32, s.cols*ldd)
					for i := range dst {
						dst[i] = sentinel
					}
					f(s.rows, s.cols, src, lds, dst, ldd)
					for c := range s.cols {
						for r := range ldd {
							got := dst[c*ldd+r]
							want := float32(sentinel)
							if r < s.rows {
								want = src[r*lds+c]
							}
							if got != want {
								t.Fatalf("dst[%d][%d] = %v, want %v", c, r, got, want)
							}
						}
					}
				})
			}
		}
	}
}

// TestTransposePanics checks that Transpose rejects bad sizes.
func TestTransposePanics(t *testing.T) {
	cases := []struct {
		name       string
		rows, cols int
		nsrc, lds  int
		ndst, ldd  int
	}{
		{"negative rows", -1, 4, 16, 4, 16, 4},
		{"short stride src", 4, 4, 16, 3, 16, 4},
		{"short stride dst", 4, 4, 16, 4, 16, 3},
		{"short src", 4, 4, 15, 4, 16, 4},
		{"short dst", 4, 4, 16, 4, 15, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			Transpose(c.rows, c.cols, make([]float32, c.nsrc), c.lds, make([]float32, c.ndst), c.ldd)
		})
	}
}
