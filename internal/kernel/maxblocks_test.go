package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMaxBlocks32 checks MaxBlocks32 (the vector code for blocks of 16, Go
// otherwise) against a comparison loop on blocks of 1 to 40 values and 0
// to 9 blocks plus a ragged tail it must ignore: the same maxima, a zero
// maximum of either sign, on values with ties, zeros, subnormals, ±Inf,
// and dst past the last whole block untouched.
func TestMaxBlocks32(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 2))
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, float32(math.Inf(1)), float32(math.Inf(-1)), 0.5}
	for per := 1; per <= 40; per++ {
		for n := range 10 {
			for range 10 {
				x := make([]float32, n*per+r.IntN(per))
				for i := range x {
					if r.IntN(4) == 0 {
						x[i] = specials[r.IntN(len(specials))]
					} else {
						x[i] = float32(r.NormFloat64())
					}
				}
				dst := make([]float32, n+1)
				dst[n] = 7
				generic := func(dst, x []float32, per int) { maxBlocks32Generic(dst[:n], x[:n*per], per) }
				for _, f := range []func(dst, x []float32, per int){MaxBlocks32, generic} {
					f(dst, x, per)
					for i := range n {
						want := float32(math.Inf(-1))
						for _, v := range x[i*per : (i+1)*per] {
							if v > want {
								want = v
							}
						}
						if dst[i] != want {
							t.Fatalf("per %d block %d of %d: max %v, want %v", per, i, n, dst[i], want)
						}
					}
					if dst[n] != 7 {
						t.Fatalf("per %d: wrote past the last whole block", per)
					}
				}
			}
		}
	}
}
