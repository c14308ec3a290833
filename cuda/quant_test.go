package cuda

import (
	"context"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

func TestQ8ParamsLayout(t *testing.T) {
	// struct Q8Params in kernels/attention_q8.cu: Params, six pointers,
	// two int32.
	kp := unsafe.Sizeof(kernelParams{})
	if off := unsafe.Offsetof(q8Params{}.q8); off != kp {
		t.Fatalf("q8Params.q8 at %d, want %d", off, kp)
	}
	if got, want := unsafe.Sizeof(q8Params{}), kp+6*8+2*4; got != want {
		t.Fatalf("q8Params is %d bytes, struct Q8Params %d", got, want)
	}
}

// Accuracy bounds of the quantized kernels, on Σ|O−O'|/Σ|O| and the
// cosine similarity against the float64 reference, or against the 16-bit
// kernel's output for the same sparse plan. QuantQK8 must meet issue 15's
// bounds: INT8 codes move each element by at most half a step (1/254 of a
// 16-row or 64-key block's range), which moves logits by about 0.5% of
// their spread. SageAttention reports cosine 0.9999+ and relative L1
// about 0.01-0.02 for its INT8-QK/FP16-PV kernel on real models' layers.
// QuantQK8PV8 rounds P̃ and V to e4m3 (3 mantissa bits: relative rounding
// up to 2^-4, RMS about 2^-4/√3·½ per element), which on N(0,1) values
// averages to about 0.035 rel-L1: its bounds are the measured values with
// margin, to catch a broken layout (which gives O(1) errors), not the
// issue's. SageAttention2 reports cosine 0.999+ for its FP8 P̃V on real
// layers, whose attention rows are peakier than random ones.
const (
	q8MaxRelL1   = 0.02
	q8MinCosine  = 0.9995
	pv8MaxRelL1  = 0.05
	pv8MinCosine = 0.998
)

// q8Inputs returns N(0,1) q, k, v with K carrying channel outliers: a
// few channels offset by a shared bias of 6-10σ (the structure that makes
// SageAttention smooth K), plus per-token noise.
func q8Inputs(r *rand.Rand, g tensor.Geometry, dt tensor.DType, l tensor.Layout) (q, k, v *tensor.Tensor, err error) {
	mk := func(h, n, d int, outliers bool) (*tensor.Tensor, error) {
		bias := make([]float64, d)
		if outliers {
			for i := 0; i < max(d/16, 1); i++ {
				bias[r.IntN(d)] = (6 + 4*r.Float64()) * float64(1-2*r.IntN(2))
			}
		}
		data := make([]float32, g.B*h*n*d)
		for i := range data {
			data[i] = float32(r.NormFloat64() + bias[i%d])
		}
		t, err := tensor.FromFloat32(tensor.BHND, tensor.Shape{B: g.B, H: h, N: n, D: d}, data)
		if err != nil {
			return nil, err
		}
		return t.Convert(dt, l)
	}
	if q, err = mk(g.Hq, g.Nq, g.D, false); err != nil {
		return
	}
	if k, err = mk(g.Hkv, g.Nk, g.D, true); err != nil {
		return
	}
	v, err = mk(g.Hkv, g.Nk, g.Dv, false)
	return
}

func TestQuantizedAccuracy(t *testing.T) {
	e := openOrSkip(t)
	bf, f16 := tensor.BFloat16, tensor.Float16
	for _, tc := range []struct {
		name          string
		g             tensor.Geometry
		dt            tensor.DType
		layout        tensor.Layout
		causal        bool
		blockK        int
		density       float64 // 1: dense, compared with float64; else vs the 16-bit kernel on the same plan
		llm           bool    // the synthetic llm workload instead of random inputs
		wantReference bool
	}{
		{name: "dense D128", g: tensor.Geometry{B: 1, Hq: 4, Hkv: 4, Nq: 1024, Nk: 1024, D: 128, Dv: 128}, dt: bf, blockK: 128, density: 1},
		{name: "dense causal GQA", g: tensor.Geometry{B: 1, Hq: 8, Hkv: 2, Nq: 2048, Nk: 2048, D: 128, Dv: 128}, dt: bf, causal: true, blockK: 128, density: 1},
		{name: "ragged N=1000 D96 causal, K tiles 64", g: tensor.Geometry{B: 2, Hq: 6, Hkv: 2, Nq: 1000, Nk: 1000, D: 96, Dv: 96}, dt: bf, causal: true, blockK: 64, density: 1},
		{name: "f16 BNHD D64 Dv48", g: tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 777, Nk: 777, D: 64, Dv: 48}, dt: f16, layout: tensor.BNHD, blockK: 64, density: 1},
		{name: "Nq<Nk causal", g: tensor.Geometry{B: 1, Hq: 4, Hkv: 4, Nq: 300, Nk: 1100, D: 128, Dv: 128}, dt: bf, causal: true, blockK: 128, density: 1},
		{name: "Nq>Nk causal (rows with no key)", g: tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 300, Nk: 90, D: 128, Dv: 128}, dt: bf, causal: true, blockK: 64, density: 1},
		{name: "sparse 0.5 causal", g: tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 2048, Nk: 2048, D: 128, Dv: 128}, dt: bf, causal: true, blockK: 128, density: 0.5},
		{name: "sparse 0.2 ragged, K tiles 64", g: tensor.Geometry{B: 1, Hq: 4, Hkv: 4, Nq: 1500, Nk: 1500, D: 128, Dv: 128}, dt: bf, blockK: 64, density: 0.2},
		{name: "llm workload causal", g: tensor.Geometry{B: 1, Hq: 4, Hkv: 1, Nq: 2048, Nk: 2048, D: 128, Dv: 128}, dt: bf, causal: true, blockK: 128, density: 1, llm: true},
		{name: "llm workload sparse 0.3", g: tensor.Geometry{B: 1, Hq: 8, Hkv: 2, Nq: 4096, Nk: 4096, D: 128, Dv: 128}, dt: bf, causal: true, blockK: 64, density: 0.3, llm: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := rand.New(rand.NewPCG(rand.Uint64(), 15))
			var q, k, v *tensor.Tensor
			var err error
			if tc.llm {
				w, err := workload.Generate(ctx, workload.Config{Kind: workload.LLM, Seed: r.Uint64(), B: tc.g.B, Hq: tc.g.Hq, Hkv: tc.g.Hkv, N: tc.g.Nq, D: tc.g.D, DType: tc.dt, Layout: tc.layout})
				if err != nil {
					t.Fatal(err)
				}
				q, k, v = w.Q, w.K, w.V
			} else if q, k, v, err = q8Inputs(r, tc.g, tc.dt, tc.layout); err != nil {
				t.Fatal(err)
			}
			tl := plan.Tiling{Geometry: tc.g, Causal: tc.causal, BlockQ: 128, BlockK: tc.blockK}
			var keep func(b, h, qb, kb int) bool
			if tc.density < 1 {
				keep = func(b, h, qb, kb int) bool { return kb == 0 || kb == qb || r.Float64() < tc.density }
			}
			p, err := plan.FromMask(tl, keep)
			if err != nil {
				t.Fatal(err)
			}
			base, bs, err := e.Run(ctx, p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			var want *tensor.Tensor
			if tc.density < 1 {
				want = base // the bound is against the same plan's 16-bit output
			} else {
				ref, err := reference.Attention(ctx, q, k, v, tc.causal, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				want = ref.Float32()
				be, _ := metrics.CompareTensors(want, base)
				t.Logf("16-bit kernel vs float64: rel-L1 %.2e cosine %.6f", be.RelL1, be.Cosine)
			}
			for _, m := range []struct {
				mode   QuantMode
				relL1  float64
				cosine float64
			}{{QuantQK8, q8MaxRelL1, q8MinCosine}, {QuantQK8PV8, pv8MaxRelL1, pv8MinCosine}} {
				got, gs, err := e.RunQuantized(ctx, m.mode, p, q, k, v, nil)
				if err != nil {
					t.Fatal(err)
				}
				if gs.QKBlocks != bs.QKBlocks || gs.PVBlocks != bs.PVBlocks {
					t.Errorf("%v counters: QK %v PV %v, 16-bit QK %v PV %v", m.mode, gs.QKBlocks, gs.PVBlocks, bs.QKBlocks, bs.PVBlocks)
				}
				er, err := metrics.CompareTensors(want, got)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%v vs %s: rel-L1 %.2e cosine %.6f max|Δ| %.3g", m.mode, map[bool]string{true: "float64", false: "16-bit same plan"}[tc.density == 1], er.RelL1, er.Cosine, er.MaxAbs)
				if !(er.RelL1 <= m.relL1) || !(er.Cosine >= m.cosine) {
					t.Errorf("%v: rel-L1 %.3g (bound %.3g), cosine %.6f (bound %.4f)", m.mode, er.RelL1, m.relL1, er.Cosine, m.cosine)
				}
			}
		})
	}
}

func TestSupportsQuantized(t *testing.T) {
	e := openOrSkip(t)
	g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 300, Nk: 300, D: 128, Dv: 128}
	for _, tc := range []struct {
		name   string
		bq, bk int
		filter bool
		d      int
		ok     bool
	}{
		{"128x128", 128, 128, false, 128, true},
		{"128x64", 128, 64, false, 128, true},
		{"BlockQ 64", 64, 64, false, 128, false},
		{"BlockK 32", 128, 32, false, 128, false},
		{"λ filter", 128, 64, true, 128, false},
		{"D 256", 128, 64, false, 256, false},
	} {
		gg := g
		gg.D, gg.Dv = tc.d, tc.d
		p, err := plan.Dense(plan.Tiling{Geometry: gg, BlockQ: tc.bq, BlockK: tc.bk})
		if err != nil {
			t.Fatal(err)
		}
		if tc.filter {
			p.Filter = &plan.Filter{Lambda: -2, RowGroup: 16}
		}
		err = e.SupportsQuantized(p)
		hopper := e.ws
		if tc.ok && hopper && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if (!tc.ok || !hopper) && err == nil {
			t.Errorf("%s: supported, want an error", tc.name)
		}
	}
}
