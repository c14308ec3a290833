package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
)

// uniDbound is uni_dbound in kernels/plan_unisparse.cu: float64 bounds of
// the float64 squared distance from f, its float32 counterpart.
func uniDbound(f float32, d int) (l, u float64, ok bool) {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return 0, 0, false
	}
	rel, ab := float64(d+16)*0x1p-21, float64(d+16)*0x1p-149
	return math.FMA(float64(f), 1-rel, -ab), math.FMA(float64(f), 1+rel, ab), true
}

// fma32 is a float32 fused multiply-add, up to a double rounding.
func fma32(a, b, c float32) float32 { return float32(float64(a)*float64(b) + float64(c)) }

// uniDist32 is uni_outlier's float32 distance of x from mu: lane hl of 16
// takes dims hl·8 + 128·k …, then the lanes add up by xor 8, 4, 2, 1.
func uniDist32(x, mu []float32) float32 {
	var s [16]float32
	for hl := range s {
		for d0 := hl * 8; d0 < len(x); d0 += 128 {
			for e := 0; e < 8 && d0+e < len(x); e++ {
				df := x[d0+e] - mu[d0+e]
				s[hl] = fma32(df, df, s[hl])
			}
		}
	}
	for o := 8; o > 0; o >>= 1 {
		var n [16]float32
		for i := range s {
			n[i] = s[i] + s[i^o]
		}
		s = n
	}
	return s[0]
}

// uniDist64 is the CPU's (and uni_outlier's) float64 distance.
func uniDist64(x, mu []float32) float64 {
	var r float64
	for d := range x {
		e := float64(x[d]) - float64(mu[d])
		r += float64(e * e)
	}
	return r
}

// TestOutlierDistanceBound checks that uni_dbound's interval holds the
// float64 distance for tokens at ordinary, tiny (subnormal squares) and
// huge scales, near their mean and far from it, at several head dims.
func TestOutlierDistanceBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{8, 64, 96, 128, 200, 256} {
		for _, scale := range []float64{1, 1e-20, 1e-40, 1e18, 1e-3} {
			for _, near := range []float64{1, 1e-3, 1e-6} {
				for range 200 {
					mu, x := make([]float32, d), make([]float32, d)
					for i := range mu {
						mu[i] = float32(r.NormFloat64() * scale)
						x[i] = float32(float64(mu[i]) + r.NormFloat64()*scale*near)
					}
					f := uniDist32(x, mu)
					l, u, ok := uniDbound(f, d)
					if !ok {
						continue // non-finite: the kernel takes the float64 distance
					}
					if e := uniDist64(x, mu); !(l <= e && e <= u) {
						t.Fatalf("D=%d scale %g near %g: float64 distance %g outside [%g, %g] (float32 %g)", d, scale, near, e, l, u, f)
					}
				}
			}
		}
	}
}
