package sparseattn_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/permute"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/quant"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestAttentionWithOrder checks that a token order is invisible in the
// result: dense attention equals the reference, and a sparse plan made on
// the reordered sequence equals the reference restricted to the same
// token pairs, mapped back to the input order.
func TestAttentionWithOrder(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	cases := []struct {
		spec    permute.Spec
		d       int
		planner plan.Planner
	}{
		{permute.Spec{Kind: permute.Hilbert, T: 2, H: 6, W: 7, Text: 5}, 64, nil},
		{permute.Spec{Kind: permute.Hilbert, T: 3, H: 5, W: 5, Text: 9}, 32, window.Planner{Sink: 8, Window: 24}},
		{permute.Spec{Kind: permute.TimeMajor, T: 4, H: 4, W: 3, TextFirst: true, Text: 3}, 128, window.Planner{Window: 16}},
		{permute.Spec{Kind: permute.Random, T: 1, H: 9, W: 11, Seed: 5}, 48, window.Planner{Sink: 4, Window: 30}},
		{permute.Spec{Kind: permute.RowMajor, T: 2, H: 4, W: 4}, 32, nil},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%dx%dx%d+%d", c.spec.Kind, c.spec.T, c.spec.H, c.spec.W, c.spec.Text), func(t *testing.T) {
			n := c.spec.Len()
			q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 4, N: n, D: c.d}, 1)
			k := testutil.Gaussian(t, r, tensor.Float32, tensor.BNHD, tensor.Shape{B: 1, H: 2, N: n, D: c.d}, 1)
			v := testutil.Gaussian(t, r, tensor.Float16, tensor.BHND, tensor.Shape{B: 1, H: 2, N: n, D: c.d}, 1)
			res, err := sparseattn.Attention(ctx, q, k, v, sparseattn.Options{Order: c.spec, Planner: c.planner, BlockQ: 16, BlockK: 16})
			if err != nil {
				t.Fatal(err)
			}
			o, err := c.spec.Order(n)
			if err != nil {
				t.Fatal(err)
			}
			p := res.Plan
			// Pair (i, j) of the input is pair (Position(i), Position(j))
			// of the reordered sequence the plan was made for.
			kept := func(b, h, i, j int) float64 {
				pi, pj := o.Position(i), o.Position(j)
				blocks, _ := p.Entries(p.Row(b, h, pi/p.BlockQ))
				for _, kb := range blocks {
					if int(kb) == pj/p.BlockK {
						return 1
					}
				}
				return 0
			}
			want, err := reference.Attention(ctx, q, k, v, false, 0, kept)
			if err != nil {
				t.Fatal(err)
			}
			e, _ := metrics.Compare(want, metrics.Tensor{Tensor: res.Out})
			if e.MaxAbs > 2e-5 { // the executor's float32 tolerance, as in TestAttentionMatchesReference
				t.Fatalf("max abs error %g against the reference", e.MaxAbs)
			}
			if c.planner != nil && res.Stats.Sparsity() == 0 {
				t.Fatal("the sparse plan skipped nothing; the masked comparison tests nothing")
			}
		})
	}
}

func TestAttentionOrderRejections(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	s := tensor.Shape{B: 1, H: 1, N: 20, D: 32}
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	s.N = 12
	qShort := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	grid := permute.Spec{Kind: permute.Hilbert, T: 1, H: 4, W: 4, Text: 4}
	cases := []struct {
		name string
		q    *tensor.Tensor
		opts sparseattn.Options
		ok   bool
	}{
		{"causal hilbert", q, sparseattn.Options{Causal: true, Order: grid}, false},
		{"causal row-major is the identity", q, sparseattn.Options{Causal: true, Order: permute.Spec{Kind: permute.RowMajor, T: 1, H: 4, W: 4, Text: 4}}, true},
		{"causal hilbert on a line moves nothing", q, sparseattn.Options{Causal: true, Order: permute.Spec{Kind: permute.Hilbert, T: 1, H: 1, W: 20}}, true},
		{"length mismatch", q, sparseattn.Options{Order: permute.Spec{Kind: permute.Hilbert, T: 1, H: 4, W: 4}}, false},
		{"nq != nk", qShort, sparseattn.Options{Order: grid}, false},
		{"unknown kind", q, sparseattn.Options{Order: permute.Spec{Kind: "snake", T: 1, H: 4, W: 5}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sparseattn.Attention(ctx, c.q, k, v, c.opts)
			if c.ok && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if !c.ok && !errors.Is(err, sparseattn.ErrOptions) {
				t.Fatalf("err = %v, want ErrOptions", err)
			}
		})
	}
}

// TestAttentionQuantizeQK checks that QuantizeQK runs the executor on the
// dequantized INT8 Q and smoothed K of the (reordered) inputs, and that the
// result stays close to float attention.
func TestAttentionQuantizeQK(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		causal bool
		order  permute.Spec
		nq, nk int
	}{
		{"causal gqa nq<nk", true, permute.Spec{}, 50, 130},
		{"non-causal hilbert", false, permute.Spec{Kind: permute.Hilbert, T: 2, H: 8, W: 8, Text: 3}, 131, 131},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 4, N: c.nq, D: 64}, 1)
			k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: c.nk, D: 64}, 1)
			v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: c.nk, D: 64}, 1)
			res, err := sparseattn.Attention(ctx, q, k, v, sparseattn.Options{Causal: c.causal, Order: c.order, QuantizeQK: true, BlockQ: 32, BlockK: 16})
			if err != nil {
				t.Fatal(err)
			}
			// The same steps by hand.
			o, err := c.order.Order(c.nk)
			if err != nil {
				t.Fatal(err)
			}
			qo, ko, vo := q, k, v
			if c.order.Kind != "" {
				qo, _ = o.Apply(ctx, q)
				ko, _ = o.Apply(ctx, k)
				vo, _ = o.Apply(ctx, v)
			}
			qk, err := quant.QuantizeQK(ctx, qo, ko, 32, 16)
			if err != nil {
				t.Fatal(err)
			}
			qd, kd := qk.Dequantized()
			g, _ := tensor.Validate(qd, kd, vo)
			p, _ := plan.Dense(plan.Tiling{Geometry: g, Causal: c.causal, BlockQ: 32, BlockK: 16})
			out, _, err := cpu.Executor{}.Run(ctx, p, qd, kd, vo, nil)
			if err != nil {
				t.Fatal(err)
			}
			manual := out
			if c.order.Kind != "" {
				manual, _ = o.Restore(ctx, out)
			}
			if e, _ := metrics.CompareTensors(manual, res.Out); e.MaxAbs > 1e-6 {
				t.Fatalf("Attention with QuantizeQK differs from quantize+execute by %g", e.MaxAbs)
			}
			// Against float: unit Gaussians give logit errors of ~1% (see
			// package quant's bound), so rel L1 ≈ 1e-2; 3e-2 leaves margin,
			// and an unsmoothed or mis-scaled quantizer lands far above.
			want, _ := reference.Attention(ctx, q, k, v, c.causal, 0, nil)
			e, _ := metrics.Compare(want, metrics.Tensor{Tensor: res.Out})
			t.Logf("INT8 QK rel L1 vs float64: %.2e", e.RelL1)
			if e.RelL1 > 3e-2 || e.RelL1 == 0 {
				t.Fatalf("rel L1 %g: want in (0, 3e-2]", e.RelL1)
			}
		})
	}
}
