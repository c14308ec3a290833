package oracle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// naiveBlockMass is the float64 definition: per query token, softmax over
// its visible keys, summed per KV block and averaged over the query block.
func naiveBlockMass(p *plan.Plan, q, k *tensor.Tensor, b, h int, scale float64) [][]float64 {
	g := p.Geometry
	mass := make([][]float64, p.QBlocks())
	for qb := range mass {
		mass[qb] = make([]float64, p.KBlocks())
		qlo, qhi := p.QueryRange(qb)
		for i := qlo; i < qhi; i++ {
			logits := make([]float64, g.Nk)
			mx := math.Inf(-1)
			for j := range g.Nk {
				logits[j] = math.Inf(-1)
				if !p.Visible(i, j) {
					continue
				}
				var s float64
				for d := range g.D {
					s += float64(q.At(b, h, i, d)) * float64(k.At(b, g.KVHead(h), j, d))
				}
				logits[j] = s * scale
				mx = math.Max(mx, logits[j])
			}
			var sum float64
			for _, s := range logits {
				sum += math.Exp(s - mx)
			}
			for j, s := range logits {
				mass[qb][j/p.BlockK] += math.Exp(s-mx) / sum / float64(qhi-qlo)
			}
		}
	}
	return mass
}

// TestBlockMassMatchesNaive compares BlockMass with the float64 definition
// on awkward shapes. Tolerance 1e-4 absolute on masses in [0, 1]: the
// logits are float32 dot products of length ≤ 160 with |s| ≲ 10, whose
// rounding (~1e-6 relative) perturbs each exp by far less than that.
func TestBlockMassMatchesNaive(t *testing.T) {
	r := testutil.Rand(t)
	for _, tc := range []struct {
		b, hq, hkv, nq, nk, d, bq, bk int
		causal                        bool
	}{
		{1, 2, 1, 100, 100, 32, 16, 16, true},  // N not a multiple of the block, GQA
		{1, 2, 2, 100, 100, 64, 32, 16, false}, // BlockQ != BlockK
		{2, 4, 2, 40, 130, 160, 16, 32, true},  // Nq < Nk: bottom-right causal
		{1, 1, 1, 10, 10, 32, 64, 64, true},    // N smaller than a block
		{1, 3, 1, 1, 70, 48, 16, 16, true},     // decode
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			g := tensor.Geometry{B: tc.b, Hq: tc.hq, Hkv: tc.hkv, Nq: tc.nq, Nk: tc.nk, D: tc.d, Dv: tc.d}
			q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: tc.b, H: tc.hq, N: tc.nq, D: tc.d}, 2)
			k := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BNHD, tensor.Shape{B: tc.b, H: tc.hkv, N: tc.nk, D: tc.d}, 1)
			tl := plan.Tiling{Geometry: g, Causal: tc.causal, BlockQ: tc.bq, BlockK: tc.bk}
			dense, err := plan.Dense(tl)
			if err != nil {
				t.Fatal(err)
			}
			b, h := tc.b-1, tc.hq-1
			got, err := BlockMass(context.Background(), tl, q, k, b, h)
			if err != nil {
				t.Fatal(err)
			}
			want := naiveBlockMass(dense, q, k, b, h, 1/math.Sqrt(float64(tc.d)))
			if len(got) != len(want) {
				t.Fatalf("%d query blocks, want %d", len(got), len(want))
			}
			for qb := range want {
				var sum float64
				for kb := range want[qb] {
					sum += got[qb][kb]
					if math.Abs(got[qb][kb]-want[qb][kb]) > 1e-4 {
						t.Errorf("mass[%d][%d] = %.6f, want %.6f", qb, kb, got[qb][kb], want[qb][kb])
					}
					if visible, _ := dense.BlockVisibility(qb, kb); !visible && got[qb][kb] != 0 {
						t.Errorf("invisible block [%d][%d] has mass %v", qb, kb, got[qb][kb])
					}
				}
				if math.Abs(sum-1) > 1e-4 {
					t.Errorf("row %d sums to %v, want 1", qb, sum)
				}
			}
		})
	}
}

func TestBlockMassRejectsBadInput(t *testing.T) {
	r := testutil.Rand(t)
	g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 32, Nk: 32, D: 32, Dv: 32}
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 32, D: 32}, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 32, D: 32}, 1)
	tl := plan.Tiling{Geometry: g, BlockQ: 16, BlockK: 16}
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"head out of range":  func() error { _, err := BlockMass(ctx, tl, q, k, 0, 2); return err },
		"batch out of range": func() error { _, err := BlockMass(ctx, tl, q, k, -1, 0); return err },
		"k as q":             func() error { _, err := BlockMass(ctx, tl, k, k, 0, 0); return err },
		"nil k":              func() error { _, err := BlockMass(ctx, tl, q, nil, 0, 0); return err },
		"zero block":         func() error { t2 := tl; t2.BlockK = 0; _, err := BlockMass(ctx, t2, q, k, 0, 0); return err },
	} {
		if err := call(); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%s: %v, want plan.ErrInvalid", name, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := BlockMass(cancelled, tl, q, k, 0, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
