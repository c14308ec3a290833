package quant

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// e4m3 rounds x to the nearest FP8 e4m3 value, ties to even: 3 mantissa
// bits, largest finite 448 (saturating), subnormals spaced 2^-9.
func e4m3(x float64) float64 {
	if x == 0 || math.IsNaN(x) {
		return x
	}
	s := 1.0
	if x < 0 {
		s, x = -1, -x
	}
	if x >= 448 {
		return s * 448
	}
	e := max(math.Floor(math.Log2(x)), -6)
	step := math.Ldexp(1, int(e)-3)
	return s * math.RoundToEven(x/step) * step
}

func TestE4M3(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{1, 1}, {1.0625, 1}, {1.1875, 1.25}, {1.125, 1.125}, {300, 288}, {500, 448},
		{-3.3, -3.25}, {0.001953125, 0.001953125}, {0.0009765625, 0}, {0.003, 0.00390625}, {0.02, 0.01953125},
	} {
		if got := e4m3(tc.in); got != tc.want {
			t.Errorf("e4m3(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestFP8PVFloor measures the error that FP8 e4m3 P̃ and V alone put into
// attention's output, in float64 with everything else exact: P̃ = e4m3(p·448)
// /448 for p = exp(s − rowmax) as attention_q8.cu's PV8 kernel rounds it,
// V per channel scaled to 448 (optionally smoothed by its mean over the
// sequence, as SageAttention does), causal, one head, N=1024, D=128, every
// 5th query row. It logs rel L1 against the exact output for zero-mean and
// unit-mean V and two query scales (issue 15's bound is 0.02). Skipped
// unless SPARSEATTN_FP8_FLOOR=1 (about 10 s).
func TestFP8PVFloor(t *testing.T) {
	if os.Getenv("SPARSEATTN_FP8_FLOOR") != "1" {
		t.Skip("set SPARSEATTN_FP8_FLOOR=1 to measure the FP8 P̃V error floor")
	}
	const n, d = 1024, 128
	for _, vmean := range []float64{0, 1} {
		for _, qs := range []float64{1, 3} {
			r := rand.New(rand.NewPCG(1, 2))
			q, k, v := make([]float64, n*d), make([]float64, n*d), make([]float64, n*d)
			for i := range q {
				q[i], k[i], v[i] = r.NormFloat64()*qs, r.NormFloat64(), r.NormFloat64()+vmean
			}
			for _, smooth := range []bool{false, true} {
				mean, scale := make([]float64, d), make([]float64, d)
				for i := range n {
					for c := range d {
						if smooth {
							mean[c] += v[i*d+c] / n
						}
					}
				}
				for i := range n {
					for c := range d {
						scale[c] = max(scale[c], math.Abs(v[i*d+c]-mean[c])/448)
					}
				}
				var both, ponly, vonly, ref float64
				p := make([]float64, n)
				for i := 0; i < n; i += 5 {
					m := math.Inf(-1)
					for j := 0; j <= i; j++ {
						var dot float64
						for c := range d {
							dot += q[i*d+c] * k[j*d+c]
						}
						p[j] = dot / math.Sqrt(d)
						m = max(m, p[j])
					}
					var l float64
					for j := 0; j <= i; j++ {
						p[j] = math.Exp(p[j] - m)
						l += p[j]
					}
					for c := range d {
						var o, oq, op, ov float64
						for j := 0; j <= i; j++ {
							pq := e4m3(p[j]*448) / 448
							vq := e4m3((v[j*d+c]-mean[c])/scale[c])*scale[c] + mean[c]
							o += p[j] * v[j*d+c]
							oq += pq * vq
							op += pq * v[j*d+c]
							ov += p[j] * vq
						}
						both += math.Abs(oq-o) / l
						ponly += math.Abs(op-o) / l
						vonly += math.Abs(ov-o) / l
						ref += math.Abs(o) / l
					}
				}
				t.Logf("V mean %g, q scale %g, V smoothed %-5v: rel L1 P̃ and V %.4f, P̃ only %.4f, V only %.4f", vmean, qs, smooth, both/ref, ponly/ref, vonly/ref)
			}
		}
	}
}
