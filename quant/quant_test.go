package quant

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

type shape struct {
	b, hq, hkv, nq, nk, d int
	blockQ, blockK        int
}

// allShapes covers N not a multiple of the block, N below a block, head
// dims 32–256, GQA and Nq != Nk.
var allShapes = []shape{
	{1, 2, 2, 100, 100, 32, 64, 64},
	{2, 4, 2, 37, 70, 64, 16, 32},
	{1, 4, 1, 20, 20, 128, 64, 64},
	{1, 2, 1, 130, 130, 256, 128, 64},
	{1, 3, 3, 1, 45, 96, 64, 8},
}

// testShapes is allShapes, with the largest traded in -short mode (the
// element-wise checks are slow under -race) for a small D=256 case.
func testShapes() []shape {
	if testing.Short() {
		return []shape{allShapes[0], allShapes[1], allShapes[4], {1, 2, 1, 40, 40, 256, 16, 16}}
	}
	return allShapes
}

// gaussianShifted is N(0,1) noise plus a per-dimension offset shared by all
// tokens, as real keys carry: the case smoothing is for.
func gaussianShifted(t *testing.T, r *rand.Rand, s tensor.Shape, offset float64) *tensor.Tensor {
	x := testutil.Gaussian(t, r, tensor.Float32, tensor.BNHD, s, 1)
	shift := make([]float32, s.D)
	for d := range shift {
		shift[d] = float32(offset * r.NormFloat64())
	}
	row := make([]float32, s.D)
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				x.ReadRow(b, h, n, row)
				for d := range row {
					row[d] += shift[d]
				}
				x.WriteRow(b, h, n, row)
			}
		}
	}
	return x
}

func TestQuantizeElementBound(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	for _, c := range testShapes() {
		for _, block := range []int{c.blockQ, 1, 1000} {
			t.Run(fmt.Sprintf("n%d_d%d_block%d", c.nk, c.d, block), func(t *testing.T) {
				x := gaussianShifted(t, r, tensor.Shape{B: c.b, H: c.hkv, N: c.nk, D: c.d}, 3)
				// One block of zeros, to check δ = 0 is handled.
				zero := make([]float32, c.d)
				for n := 0; n < min(block, c.nk); n++ {
					x.WriteRow(0, 0, n, zero)
				}
				q, err := Quantize(ctx, x, block)
				if err != nil {
					t.Fatal(err)
				}
				s := x.Shape()
				deq := q.Dequantize()
				for b := range s.B {
					for h := range s.H {
						for lo := 0; lo < s.N; lo += block {
							hi := min(lo+block, s.N)
							var amax float64
							for n := lo; n < hi; n++ {
								for d := range s.D {
									amax = max(amax, math.Abs(float64(x.At(b, h, n, d))))
								}
							}
							scale := float64(q.Scale(b, h, lo))
							// δ is max|x|/127 rounded once to float32.
							if math.Abs(scale-amax/MaxCode) > amax/MaxCode*0x1p-23 {
								t.Fatalf("block at %d: δ %g, want %g", lo, scale, amax/MaxCode)
							}
							for n := lo; n < hi; n++ {
								for d := range s.D {
									c := q.Code(b, h, n, d)
									if c < -MaxCode {
										t.Fatalf("code %d below −127", c)
									}
									xv := float64(x.At(b, h, n, d))
									// Round to nearest: at most δ/2 away.
									if e := math.Abs(xv - scale*float64(c)); e > scale/2*(1+1e-9) {
										t.Fatalf("[%d %d %d %d] x=%g δ=%g code=%d: error %g > δ/2", b, h, n, d, xv, scale, c, e)
									}
									if got, want := deq.At(b, h, n, d), float32(scale*float64(c)); got != want {
										t.Fatalf("Dequantize %g, want %g", got, want)
									}
								}
							}
						}
					}
				}
			})
		}
	}
}

// scoreBound is (δ_K/2)·‖q‖₁ + (δ_Q/2)·‖k̂‖₁, the bound on |q·k − q̂·k̂|.
func scoreBound(qf, kq []float64, dq, dk float64) float64 {
	var q1, k1 float64
	for d := range qf {
		q1 += math.Abs(qf[d])
		k1 += math.Abs(kq[d])
	}
	return dk/2*q1 + dq/2*k1
}

func TestScoreErrorBound(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	for _, c := range testShapes() {
		t.Run(fmt.Sprintf("hq%d_hkv%d_nq%d_nk%d_d%d", c.hq, c.hkv, c.nq, c.nk, c.d), func(t *testing.T) {
			q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: c.b, H: c.hq, N: c.nq, D: c.d}, 1)
			k := gaussianShifted(t, r, tensor.Shape{B: c.b, H: c.hkv, N: c.nk, D: c.d}, 3)
			qk, err := QuantizeQK(ctx, q, k, c.blockQ, c.blockK)
			if err != nil {
				t.Fatal(err)
			}
			ks, _, err := SmoothK(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			qf, kf, kq := make([]float64, c.d), make([]float64, c.d), make([]float64, c.d)
			var worst float64 // largest error as a fraction of its bound
			for b := range c.b {
				for h := range c.hq {
					hk := h / (c.hq / c.hkv)
					for i := range c.nq {
						dq := float64(qk.Q.Scale(b, h, i))
						for j := range c.nk {
							dk := float64(qk.K.Scale(b, hk, j))
							var exact, quantized int64
							var want float64
							for d := range c.d {
								qf[d] = float64(q.At(b, h, i, d))
								kf[d] = float64(ks.At(b, hk, j, d))
								kq[d] = dk * float64(qk.K.Code(b, hk, j, d))
								want += qf[d] * kf[d]
								quantized += int64(qk.Q.Code(b, h, i, d)) * int64(qk.K.Code(b, hk, j, d))
							}
							exact = quantized
							got := dq * dk * float64(exact)
							bound := scoreBound(qf, kq, dq, dk)
							if e := math.Abs(got - want); e > bound*(1+1e-9) {
								t.Fatalf("[%d %d] q%d k%d: |q·k − q̂·k̂| = %g exceeds the bound %g", b, h, i, j, e, bound)
							} else if bound > 0 {
								worst = max(worst, e/bound)
							}
							// The float32 integer path rounds δ_Q·δ_K and
							// the product: two roundings, ≤ 2⁻²³ relative.
							if d := math.Abs(float64(Dot(qk.Q, qk.K, b, h, hk, i, j)) - got); d > math.Abs(got)*0x1p-22 {
								t.Fatalf("Dot %g, exact %g", Dot(qk.Q, qk.K, b, h, hk, i, j), got)
							}
						}
					}
				}
			}
			t.Logf("largest score error: %.2f of the bound", worst)
		})
	}
}

// TestSmoothingKeepsAttention checks that subtracting the mean key leaves
// the attention output unchanged, causal or not, with GQA and Nq != Nk.
func TestSmoothingKeepsAttention(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	for _, c := range testShapes() {
		for _, causal := range []bool{false, true} {
			t.Run(fmt.Sprintf("nq%d_nk%d_d%d_causal%v", c.nq, c.nk, c.d, causal), func(t *testing.T) {
				q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: c.b, H: c.hq, N: c.nq, D: c.d}, 1)
				k := gaussianShifted(t, r, tensor.Shape{B: c.b, H: c.hkv, N: c.nk, D: c.d}, 3)
				v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: c.b, H: c.hkv, N: c.nk, D: c.d}, 1)
				ks, means, err := SmoothK(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				// The smoothed keys have zero mean (to float32 rounding of
				// values of size ~|k|).
				for b := range c.b {
					for h := range c.hkv {
						for d := range c.d {
							var m float64
							for n := range c.nk {
								m += float64(ks.At(b, h, n, d))
							}
							if math.Abs(m/float64(c.nk)) > 1e-5 {
								t.Fatalf("smoothed mean %g at [%d %d %d] (removed %g)", m/float64(c.nk), b, h, d, means[(b*c.hkv+h)*c.d+d])
							}
						}
					}
				}
				want, err := reference.Attention(ctx, q, k, v, causal, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := reference.Attention(ctx, q, ks, v, causal, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				// Both are float64; they differ only by the float32 storage
				// of k − μ (≤ 2⁻²⁴·|k−μ| per element, so logits move by
				// ≤ 1e-6 and outputs by ≤ 1e-6·max|v|).
				if d := maxDiff(want, got); d > 1e-5 {
					t.Fatalf("smoothing changed the output by %g", d)
				}
				// Shifting keys by a per-token amount does change it: the
				// check above can fail. Key n moves by (n mod 3)·q₀, q₀ the
				// first query of head 0, so that query's logits move by
				// (n mod 3)·‖q₀‖²/√D ≈ (n mod 3)·√D.
				if !causal && c.nk > 1 {
					bad := ks.Clone()
					for n := range c.nk {
						for d := range c.d {
							bad.Set(0, 0, n, d, bad.At(0, 0, n, d)+float32(n%3)*q.At(0, 0, 0, d))
						}
					}
					other, err := reference.Attention(ctx, q, bad, v, causal, 0, nil)
					if err != nil {
						t.Fatal(err)
					}
					if maxDiff(want, other) < 1e-3 {
						t.Fatal("a non-uniform key shift left the output unchanged")
					}
				}
			})
		}
	}
}

func maxDiff(a, b *reference.Output) float64 {
	s := a.Shape()
	var m float64
	for bi := range s.B {
		for h := range s.H {
			for n := range s.N {
				ra, rb := a.Row(bi, h, n), b.Row(bi, h, n)
				for d := range ra {
					m = max(m, math.Abs(ra[d]-rb[d]))
				}
			}
		}
	}
	return m
}

// TestQuantizedAttentionBound runs the executor on the dequantized Q and
// smoothed K and checks each output element against the float64 reference
// on the unquantized inputs, within the bound the per-logit error implies.
func TestQuantizedAttentionBound(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	for _, c := range testShapes() {
		for _, causal := range []bool{false, true} {
			t.Run(fmt.Sprintf("nq%d_nk%d_d%d_causal%v", c.nq, c.nk, c.d, causal), func(t *testing.T) {
				q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: c.b, H: c.hq, N: c.nq, D: c.d}, 1)
				k := gaussianShifted(t, r, tensor.Shape{B: c.b, H: c.hkv, N: c.nk, D: c.d}, 3)
				v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: c.b, H: c.hkv, N: c.nk, D: c.d}, 1)
				qk, err := QuantizeQK(ctx, q, k, c.blockQ, c.blockK)
				if err != nil {
					t.Fatal(err)
				}
				qd, kd := qk.Dequantized()
				g, err := tensor.Validate(qd, kd, v)
				if err != nil {
					t.Fatal(err)
				}
				p, err := plan.Dense(plan.Tiling{Geometry: g, Causal: causal, BlockQ: c.blockQ, BlockK: c.blockK})
				if err != nil {
					t.Fatal(err)
				}
				got, _, err := cpu.Executor{}.Run(ctx, p, qd, kd, v, nil)
				if err != nil {
					t.Fatal(err)
				}
				want, err := reference.Attention(ctx, q, k, v, causal, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				scale := 1 / math.Sqrt(float64(c.d))
				var vmax float64
				for b := range c.b {
					for h := range c.hkv {
						for n := range c.nk {
							for d := range c.d {
								vmax = max(vmax, math.Abs(float64(v.At(b, h, n, d))))
							}
						}
					}
				}
				qf, kq := make([]float64, c.d), make([]float64, c.d)
				var l1, ref1 float64
				for b := range c.b {
					for h := range c.hq {
						hk := h / (c.hq / c.hkv)
						for i := range c.nq {
							// ε: the largest logit error bound of this query.
							dq := float64(qk.Q.Scale(b, h, i))
							var eps float64
							for j := range c.nk {
								dk := float64(qk.K.Scale(b, hk, j))
								for d := range c.d {
									qf[d] = float64(q.At(b, h, i, d))
									kq[d] = float64(kd.At(b, hk, j, d))
								}
								eps = max(eps, scale*scoreBound(qf, kq, dq, dk))
							}
							// Softmax-weight perturbation bound, plus 1e-5·max|v|
							// for the float32 executor's own rounding.
							bound := math.Expm1(2*eps)*vmax + 1e-5*vmax
							row := want.Row(b, h, i)
							for d := range c.d {
								e := math.Abs(float64(got.At(b, h, i, d)) - row[d])
								if e > bound {
									t.Fatalf("[%d %d %d %d]: |O − O'| = %g exceeds the bound %g (ε = %g)", b, h, i, d, e, bound, eps)
								}
								l1 += e
								ref1 += math.Abs(row[d])
							}
						}
					}
				}
				t.Logf("INT8 QK rel L1 vs float64: %.2e", l1/ref1)
			})
		}
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	r := testutil.Rand(t)
	x := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 4, D: 8}, 1)
	y := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 4, D: 16}, 1)
	nan := x.Clone()
	nan.Set(0, 0, 2, 3, float32(math.NaN()))
	cases := []struct {
		name string
		err  error
	}{
		{"nil", func() error { _, err := Quantize(ctx, nil, 4); return err }()},
		{"block 0", func() error { _, err := Quantize(ctx, x, 0); return err }()},
		{"NaN", func() error { _, err := Quantize(ctx, nan, 4); return err }()},
		{"head dims differ", func() error { _, err := QuantizeQK(ctx, x, y, 4, 4); return err }()},
		{"nil k", func() error { _, err := QuantizeQK(ctx, x, nil, 4, 4); return err }()},
		{"nil smooth", func() error { _, _, err := SmoothK(ctx, nil); return err }()},
	}
	for _, c := range cases {
		if !errors.Is(c.err, ErrInput) {
			t.Errorf("%s: err = %v, want ErrInput", c.name, c.err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Quantize(cancelled, x, 4); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

// TestSmoothingShrinksError shows why K is smoothed: keys sharing a large
// offset (real keys do) get per-block scales set by the offset, and the
// quantized attention error grows with them; subtracting the mean first
// leaves scales set by the part that varies.
func TestSmoothingShrinksError(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	const n, d = 256, 64
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: n, D: d}, 1)
	// An offset of 10σ: raw blocks span ≈ 10 + 3.5, smoothed ≈ 3.5, so δ_K
	// shrinks about 4×.
	k := gaussianShifted(t, r, tensor.Shape{B: 1, H: 2, N: n, D: d}, 10)
	v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: n, D: d}, 1)
	want, err := reference.Attention(ctx, q, k, v, false, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	relL1 := func(qd, kd *tensor.Tensor) float64 {
		got, err := reference.Attention(ctx, qd, kd, v, false, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for h := range 2 {
			for i := range n {
				a, b := want.Row(0, h, i), got.Row(0, h, i)
				for j := range a {
					num += math.Abs(a[j] - b[j])
					den += math.Abs(a[j])
				}
			}
		}
		return num / den
	}
	qq, err := Quantize(ctx, q, 64)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Quantize(ctx, k, 64)
	if err != nil {
		t.Fatal(err)
	}
	smoothed, err := QuantizeQK(ctx, q, k, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	eRaw := relL1(qq.Dequantize(), raw.Dequantize())
	eSmooth := relL1(smoothed.Dequantized())
	t.Logf("INT8 rel L1: raw K %.2e, smoothed K %.2e", eRaw, eSmooth)
	if !(eSmooth < eRaw/2) {
		t.Fatalf("smoothing did not halve the error: %.3g vs %.3g", eSmooth, eRaw)
	}
}
