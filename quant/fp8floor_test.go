package quant_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload/lm"
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

// fp8Errors is the rel L1 that e4m3 P̃ and V put into causal attention of
// one head (q [n][d], k and v [n][d] row-major), in float64 with everything
// else exact, over every stride-th query row: with both rounded, P̃ only
// and V only. P̃ = e4m3(p·448)/448 for p = exp(s − row max), as the PV8
// kernel (attention_q8.cu) rounds it; V is scaled per channel to 448,
// after subtracting its mean over the sequence when smooth is set.
func fp8Errors(q, k, v []float64, n, d, stride int, smooth bool) (both, ponly, vonly float64) {
	mean, scale := make([]float64, d), make([]float64, d)
	if smooth {
		for i := range n {
			for c := range d {
				mean[c] += v[i*d+c] / float64(n)
			}
		}
	}
	for i := range n {
		for c := range d {
			scale[c] = max(scale[c], math.Abs(v[i*d+c]-mean[c])/448)
		}
	}
	vq := make([]float64, n*d)
	for i := range n {
		for c := range d {
			if scale[c] > 0 {
				vq[i*d+c] = e4m3((v[i*d+c]-mean[c])/scale[c])*scale[c] + mean[c]
			} else {
				vq[i*d+c] = v[i*d+c]
			}
		}
	}
	p, pq := make([]float64, n), make([]float64, n)
	o, ob, op, ov := make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d)
	var eb, ep, ev, ref float64
	for i := 0; i < n; i += stride {
		m := math.Inf(-1)
		for j := 0; j <= i; j++ {
			var dot float64
			for c := range d {
				dot += q[i*d+c] * k[j*d+c]
			}
			p[j] = dot / math.Sqrt(float64(d))
			m = max(m, p[j])
		}
		var l float64
		for j := 0; j <= i; j++ {
			p[j] = math.Exp(p[j] - m)
			pq[j] = e4m3(p[j]*448) / 448
			l += p[j]
		}
		clear(o)
		clear(ob)
		clear(op)
		clear(ov)
		for j := 0; j <= i; j++ {
			for c := range d {
				x, xq := v[j*d+c], vq[j*d+c]
				o[c] += p[j] * x
				ob[c] += pq[j] * xq
				op[c] += pq[j] * x
				ov[c] += p[j] * xq
			}
		}
		for c := range d {
			eb += math.Abs(ob[c]-o[c]) / l
			ep += math.Abs(op[c]-o[c]) / l
			ev += math.Abs(ov[c]-o[c]) / l
			ref += math.Abs(o[c]) / l
		}
	}
	return eb / ref, ep / ref, ev / ref
}

// TestFP8PVFloor measures the error that FP8 e4m3 P̃ and V alone put into
// attention's output (fp8Errors): on random inputs (N=1024, D=128, V of
// mean 0 and 1, query scale 1 and 3) and on the embedded LM's attention
// (every layer and head over the first 4096 bytes of its eval text). It
// logs rel L1 against the exact output; issue 15's bound is 0.02. Skipped
// unless SPARSEATTN_FP8_FLOOR=1 (about 20 s).
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
				b, p, vv := fp8Errors(q, k, v, n, d, 5, smooth)
				t.Logf("random, V mean %g, q scale %g, V smoothed %-5v: rel L1 P̃ and V %.4f, P̃ only %.4f, V only %.4f", vmean, qs, smooth, b, p, vv)
			}
		}
	}
	m, err := lm.Default()
	if err != nil {
		t.Fatal(err)
	}
	pass, err := m.Forward(context.Background(), lm.EvalText()[:4096], lm.Options{Capture: true})
	if err != nil {
		t.Fatal(err)
	}
	qt, kt, vt, err := pass.Stacked()
	if err != nil {
		t.Fatal(err)
	}
	g := qt.Shape()
	rows := func(x *tensor.Tensor, h int) []float64 {
		out, row := make([]float64, g.N*g.D), make([]float32, g.D)
		for i := range g.N {
			x.ReadRow(0, h, i, row)
			for c, y := range row {
				out[i*g.D+c] = float64(y)
			}
		}
		return out
	}
	group := g.H / kt.Shape().H
	for _, smooth := range []bool{false, true} {
		var worst, sum float64
		for h := range g.H {
			b, _, _ := fp8Errors(rows(qt, h), rows(kt, h/group), rows(vt, h/group), g.N, g.D, 16, smooth)
			worst, sum = max(worst, b), sum+b
		}
		t.Logf("LM, %d heads, N=%d, D=%d, V smoothed %-5v: rel L1 P̃ and V mean %.4f, worst head %.4f", g.H, g.N, g.D, smooth, sum/float64(g.H), worst)
	}
}
