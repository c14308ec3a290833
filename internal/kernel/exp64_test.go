package kernel_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/plan"
)

// TestExp64sIsCanonical checks Exp64s (the vector code where the CPU has
// it) and the portable version against plan.Exp64 bit for bit, tolerance
// none: on every length from 0 to 40 (whole vectors, pairs of them and
// tails), in place and not, over the softmax range [-750, 0] where the
// planners call it, the whole valid range, the cut-offs at −708 and 709
// and their neighbours, zeros of both signs, subnormals, ±Inf and NaN
// (NaN only needs to stay NaN).
func TestExp64sIsCanonical(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	specials := []float64{0, math.Copysign(0, -1), 5e-324, -5e-324, -708, 709, math.Nextafter(-708, -1000), math.Nextafter(-708, 0),
		math.Nextafter(709, 0), math.Nextafter(709, 1000), -745, 710, math.Inf(1), math.Inf(-1), math.NaN(), -1e300, 1e300,
		0.5 * math.Ln2, -0.5 * math.Ln2, math.Ln2, -1021 * math.Ln2, 1023 * math.Ln2}
	draw := func() float64 {
		switch r.IntN(4) {
		case 0:
			return specials[r.IntN(len(specials))]
		case 1:
			return -750 * r.Float64()
		case 2:
			return -720 + 1440*r.Float64()
		}
		return -2 * r.Float64()
	}
	impls := []struct {
		name string
		f    func(dst, src []float64)
	}{{"Exp64s", kernel.Exp64s}, {"generic", kernel.Exp64sGeneric}}
	for _, im := range impls {
		for n := range 41 {
			for range 50 {
				src := make([]float64, n)
				for i := range src {
					src[i] = draw()
				}
				want := make([]float64, n)
				for i, x := range src {
					want[i] = plan.Exp64(x)
				}
				dst := make([]float64, n+1)
				dst[n] = 42
				im.f(dst, src)
				inPlace := append([]float64(nil), src...)
				im.f(inPlace, inPlace)
				for i := range n {
					for _, got := range []float64{dst[i], inPlace[i]} {
						if math.Float64bits(got) != math.Float64bits(want[i]) && !(math.IsNaN(got) && math.IsNaN(want[i])) {
							t.Fatalf("%s n=%d: exp(%v) = %v (%#x), plan.Exp64 %v (%#x)", im.name, n, src[i], got, math.Float64bits(got), want[i], math.Float64bits(want[i]))
						}
					}
				}
				if dst[n] != 42 {
					t.Fatalf("%s n=%d: wrote past len(src)", im.name, n)
				}
			}
		}
	}
}

// TestExp64sShortDst checks that a dst shorter than src panics.
func TestExp64sShortDst(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	kernel.Exp64s(make([]float64, 3), make([]float64, 4))
}

// BenchmarkExp64s times Exp64s against plan.Exp64 in a loop on softmax
// arguments in [-30, 0].
func BenchmarkExp64s(b *testing.B) {
	x := make([]float64, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = -30 * r.Float64()
	}
	y := make([]float64, len(x))
	b.Run("Exp64s", func(b *testing.B) {
		for b.Loop() {
			kernel.Exp64s(y, x)
		}
	})
	b.Run("plan.Exp64", func(b *testing.B) {
		for b.Loop() {
			for i, v := range x {
				y[i] = plan.Exp64(v)
			}
		}
	})
}
