package kernel

import (
	"math"
	"testing"
)

// TestMaxRows checks MaxRows against Max run row by row, bit for bit
// (Max's own results are checked by the Max tests), on ragged widths around
// the 16- and 64-element steps of the assembly and row strides wider than
// the rows, with NaN, ±Inf and signed zeros mixed in; and its edge cases:
// empty shapes, and programmer errors, which panic.
func TestMaxRows(t *testing.T) {
	r := newRand(t)
	specials := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1)), 1e30}
	for _, sh := range []struct{ m, n, lds int }{
		{1, 1, 1}, {3, 15, 16}, {5, 16, 16}, {2, 17, 20}, {4, 63, 63}, {3, 64, 80},
		{7, 65, 65}, {64, 64, 64}, {2, 130, 131},
	} {
		s := randSlice(r, (sh.m-1)*sh.lds+sh.n, -50, 50)
		for i := range s {
			if r.IntN(10) == 0 {
				s[i] = specials[r.IntN(len(specials))]
			}
		}
		out := make([]float32, sh.m)
		MaxRows(sh.m, sh.n, s, sh.lds, out)
		for i := range sh.m {
			want := Max(s[i*sh.lds : i*sh.lds+sh.n])
			if math.Float32bits(out[i]) != math.Float32bits(want) {
				t.Errorf("%dx%d/ld%d row %d: %g, Max gives %g", sh.m, sh.n, sh.lds, i, out[i], want)
			}
		}
	}
	out := []float32{7, 7}
	MaxRows(0, 3, nil, 3, nil)
	MaxRows(2, 0, nil, 0, out)
	if !math.IsInf(float64(out[0]), -1) || !math.IsInf(float64(out[1]), -1) {
		t.Errorf("n = 0: %v, want -Inf", out)
	}
	for name, f := range map[string]func(){
		"negative":  func() { MaxRows(2, -1, make([]float32, 8), 4, out) },
		"short s":   func() { MaxRows(2, 4, make([]float32, 7), 4, out) },
		"lds < n":   func() { MaxRows(2, 4, make([]float32, 8), 3, out) },
		"short out": func() { MaxRows(2, 4, make([]float32, 8), 4, out[:1]) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
