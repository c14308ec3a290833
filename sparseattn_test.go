package sparseattn_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

func TestAttentionMatchesReference(t *testing.T) {
	r := testutil.Rand(t)
	for _, tc := range []struct {
		name    string
		q, k    tensor.Shape
		dv      int
		causal  bool
		planner plan.Planner
		scale   float32
	}{
		{"dense-causal-gqa", tensor.Shape{B: 1, H: 4, N: 130, D: 64}, tensor.Shape{B: 1, H: 2, N: 130, D: 64}, 64, true, nil, 0},
		{"dense-decode", tensor.Shape{B: 2, H: 2, N: 1, D: 128}, tensor.Shape{B: 2, H: 1, N: 257, D: 128}, 128, true, nil, 0},
		{"window-noncausal", tensor.Shape{B: 1, H: 2, N: 200, D: 32}, tensor.Shape{B: 1, H: 2, N: 200, D: 32}, 48, false, window.Planner{Sink: 16, Window: 40}, 0.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tc.q, 1)
			k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tc.k, 1)
			vs := tc.k
			vs.D = tc.dv
			v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, vs, 1)
			res, err := sparseattn.Attention(context.Background(), q, k, v, sparseattn.Options{Causal: tc.causal, Planner: tc.planner, Scale: tc.scale, BlockQ: 32, BlockK: 32})
			if err != nil {
				t.Fatal(err)
			}
			p := res.Plan
			kept := func(b, h, i, j int) float64 {
				blocks, _ := p.Entries(p.Row(b, h, i/p.BlockQ))
				for _, kb := range blocks {
					if int(kb) == j/p.BlockK {
						return 1
					}
				}
				return 0
			}
			ref, err := reference.Attention(context.Background(), q, k, v, tc.causal, float64(tc.scale), kept)
			if err != nil {
				t.Fatal(err)
			}
			e, _ := metrics.Compare(ref, metrics.Tensor{Tensor: res.Out})
			if e.MaxAbs > 2e-5 { // see cpu's maxAbsTol for the derivation
				t.Errorf("max abs error %v", e.MaxAbs)
			}
			if tc.planner == nil && res.Stats.Sparsity() != 0 {
				t.Errorf("dense sparsity %v", res.Stats.Sparsity())
			}
		})
	}
}

func TestAttentionRejectsBadInput(t *testing.T) {
	r := testutil.Rand(t)
	s := tensor.Shape{B: 1, H: 2, N: 16, D: 32}
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	nan := q.Clone()
	nan.Set(0, 1, 3, 4, float32(math.NaN()))
	short := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 16, D: 16}, 1)
	for _, tc := range []struct {
		name string
		q    *tensor.Tensor
		opts sparseattn.Options
		want error
	}{
		{"nan", nan, sparseattn.Options{}, tensor.ErrNonFinite},
		{"head-dim", short, sparseattn.Options{}, tensor.ErrShape},
		{"scale", q, sparseattn.Options{Scale: float32(math.Inf(1))}, sparseattn.ErrOptions},
		{"negative-scale", q, sparseattn.Options{Scale: -1}, sparseattn.ErrOptions},
		{"block", q, sparseattn.Options{BlockQ: -4}, sparseattn.ErrOptions},
		{"workers", q, sparseattn.Options{Workers: -1}, sparseattn.ErrOptions},
		{"planner", q, sparseattn.Options{Planner: window.Planner{Window: -1}}, plan.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sparseattn.Attention(context.Background(), tc.q, k, v, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestAttentionRejectsNonFinite: the default call rejects a NaN or an
// infinity in q, k or v, in every storage type and layout, with the
// *tensor.NonFiniteError naming the first one — whether the check runs
// inside the CPU executor (the dense plan: prefill and decode) or as a
// pass of its own (a planner that reads the inputs first).
func TestAttentionRejectsNonFinite(t *testing.T) {
	r := testutil.Rand(t)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
		for _, l := range []tensor.Layout{tensor.BHND, tensor.BNHD} {
			for _, nq := range []int{1, 48} {
				for _, pl := range []plan.Planner{nil, window.Planner{Sink: 4, Window: 16}} {
					q := testutil.Gaussian(t, r, dt, l, tensor.Shape{B: 1, H: 4, N: nq, D: 32}, 1)
					k := testutil.Gaussian(t, r, dt, l, tensor.Shape{B: 1, H: 2, N: 96, D: 32}, 1)
					v := testutil.Gaussian(t, r, dt, l, tensor.Shape{B: 1, H: 2, N: 96, D: 32}, 1)
					opts := sparseattn.Options{Causal: true, Planner: pl, BlockQ: 16, BlockK: 16}
					if _, err := sparseattn.Attention(context.Background(), q, k, v, opts); err != nil {
						t.Fatalf("%v %v nq=%d: finite inputs: %v", dt, l, nq, err)
					}
					for ti, x := range []*tensor.Tensor{q, k, v} {
						s := x.Shape()
						for _, val := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
							at := [4]int{0, s.H - 1, s.N - 1, s.D / 2}
							old := x.At(at[0], at[1], at[2], at[3])
							x.Set(at[0], at[1], at[2], at[3], val)
							_, err := sparseattn.Attention(context.Background(), q, k, v, opts)
							x.Set(at[0], at[1], at[2], at[3], old)
							var nf *tensor.NonFiniteError
							if !errors.As(err, &nf) || !errors.Is(err, tensor.ErrNonFinite) ||
								nf.Name != "qkv"[ti:ti+1] || [4]int{nf.B, nf.H, nf.N, nf.D} != at {
								t.Fatalf("%v %v nq=%d %v in %s at %v: got %v", dt, l, nq, val, "qkv"[ti:ti+1], at, err)
							}
						}
					}
				}
			}
		}
	}
}
