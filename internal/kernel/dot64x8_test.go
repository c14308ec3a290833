package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot64Panel8MatchesPanel checks Dot64Panel8 (and its portable
// version) against two Dot64Panel calls, bit for bit, tolerance none, on
// lengths 1 to 300 and 2048, row strides above the length, and operands
// with zeros of both signs, subnormals, huge values and infinities (NaN
// results only need to agree on being NaN).
func TestDot64Panel8MatchesPanel(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-40, 3e38, -3e38, float32(math.Inf(1))}
	draw := func() float32 {
		if r.IntN(16) == 0 {
			return specials[r.IntN(len(specials))]
		}
		return float32(r.NormFloat64())
	}
	lengths := []int{0, 1, 2, 3, 7, 8, 9, 31, 64, 100, 128, 300, 2048}
	for _, l := range lengths {
		for _, extra := range []int{0, 5} {
			lda := l + extra
			a := make([]float64, 8*lda)
			for i := range a {
				a[i] = float64(draw())
			}
			bt := make([]float32, 2*Dot64Lanes*l)
			for i := range bt {
				bt[i] = draw()
			}
			want := make([]float64, 128)
			if l > 0 {
				Dot64Panel(a, lda, l, bt, want[:64])
				Dot64Panel(a[4*lda:], lda, l, bt, want[64:])
			}
			for name, f := range map[string]func(a []float64, lda, l int, bt []float32, out []float64){
				"Dot64Panel8": Dot64Panel8,
				"generic": func(a []float64, lda, l int, bt []float32, out []float64) {
					if l > 0 {
						dot64Panel8Generic(a, lda, l, bt, out)
					} else {
						clear(out[:128])
					}
				},
			} {
				got := make([]float64, 128)
				for i := range got {
					got[i] = 99
				}
				f(a, lda, l, bt, got)
				for i := range want {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
						t.Fatalf("%s l=%d lda=%d: out[%d] = %v, want %v", name, l, lda, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// BenchmarkDot64Panel8 times 8 query rows against 16 keys of length 2048
// (xattn's S·D at S = 16, D = 128), L2-resident: Dot64Panel8 against two
// Dot64Panel calls.
func BenchmarkDot64Panel8(b *testing.B) {
	const l = 2048
	a := make([]float64, 8*l)
	for i := range a {
		a[i] = float64(i%7) * 0.25
	}
	bt := make([]float32, 2*Dot64Lanes*l)
	for i := range bt {
		bt[i] = float32(i%5) * 0.5
	}
	out := make([]float64, 128)
	b.Run("Panel8", func(b *testing.B) {
		for b.Loop() {
			Dot64Panel8(a, l, l, bt, out)
		}
	})
	b.Run("2xPanel", func(b *testing.B) {
		for b.Loop() {
			Dot64Panel(a, l, l, bt, out[:64])
			Dot64Panel(a[4*l:], l, l, bt, out[64:])
		}
	})
}
