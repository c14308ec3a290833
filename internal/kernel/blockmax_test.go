package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBlockMaxShift checks BlockMaxShift (the vector code for blocks of a
// multiple of 8 values, Go otherwise) against a comparison loop: the same
// maxima (a zero maximum of either sign) and differences bit for bit, on
// blocks of 1 to 40 values, with ties, ±0, ±Inf; and that a NaN in a block
// reaches its differences.
func TestBlockMaxShift(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	draw := func() float64 {
		switch r.IntN(10) {
		case 0:
			return math.Copysign(0, -1)
		case 1:
			return 0
		case 2:
			return math.Inf(-1)
		case 3:
			return 2.5
		}
		return 10 * r.NormFloat64()
	}
	for per := 1; per <= 40; per++ {
		for nb := 0; nb <= 5; nb++ {
			for trial := range 20 {
				l := make([]float64, per*nb)
				for j := range l {
					l[j] = draw()
					if trial == 0 {
						l[j] = -float64(r.IntN(3)) // many ties and zeros
					}
				}
				x, mb := make([]float64, len(l)), make([]float64, nb)
				for _, f := range []func(x, l []float64, per int, mb []float64){BlockMaxShift, blockMaxShiftGeneric} {
					f(x, l, per, mb)
					for kb := range nb {
						want := math.Inf(-1)
						for _, v := range l[kb*per : (kb+1)*per] {
							if v > want {
								want = v
							}
						}
						if mb[kb] != want {
							t.Fatalf("per %d block %d: max %v, want %v", per, kb, mb[kb], want)
						}
						for j := kb * per; j < (kb+1)*per; j++ {
							d := l[j] - want
							if math.Float64bits(x[j]) != math.Float64bits(d) && !(d == 0 && x[j] == 0) && !(math.IsNaN(d) && math.IsNaN(x[j])) {
								t.Fatalf("per %d: x[%d] = %v, want %v", per, j, x[j], d)
							}
						}
					}
				}
				if nb > 0 {
					l[r.IntN(len(l))] = math.NaN()
					nan := false
					BlockMaxShift(x, l, per, mb)
					for _, v := range x[:len(l)] {
						nan = nan || math.IsNaN(v)
					}
					if !nan {
						t.Fatalf("per %d: a NaN logit left no NaN in x", per)
					}
				}
			}
		}
	}
}
