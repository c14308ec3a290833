package reference

import (
	"context"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/tensor"
)

// The reference is checked through identities that hold exactly for
// softmax attention, each of which a wrong mask, scale, normalization or
// head mapping would break.
func TestReferenceIdentities(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 2, H: 4, N: 6, D: 8}, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 2, H: 2, N: 6, D: 8}, 1)
	v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 2, H: 2, N: 6, D: 3}, 1)
	const tol = 1e-12

	t.Run("causal-first-row-is-first-value", func(t *testing.T) {
		o, err := Attention(ctx, q, k, v, true, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for b := range 2 {
			for h := range 4 {
				for d := range 3 {
					if got, want := o.At(b, h, 0, d), float64(v.At(b, h/2, 0, d)); math.Abs(got-want) > tol {
						t.Fatalf("[%d %d 0 %d] = %v, want v[0] = %v", b, h, d, got, want)
					}
				}
			}
		}
	})

	t.Run("explicit-softmax", func(t *testing.T) {
		const scale = 0.37
		o, _ := Attention(ctx, q, k, v, false, scale, nil)
		b, h, i := 1, 3, 4
		var w [6]float64
		var sum float64
		for j := range 6 {
			var s float64
			for d := range 8 {
				s += float64(q.At(b, h, i, d)) * float64(k.At(b, 1, j, d))
			}
			w[j] = math.Exp(scale * s)
			sum += w[j]
		}
		for d := range 3 {
			var want float64
			for j := range 6 {
				want += w[j] / sum * float64(v.At(b, 1, j, d))
			}
			if got := o.At(b, h, i, d); math.Abs(got-want) > tol {
				t.Fatalf("d=%d: %v, want %v", d, got, want)
			}
		}
	})

	t.Run("weight-two-equals-duplicate-key", func(t *testing.T) {
		w2, _ := Attention(ctx, q, k, v, false, 0, func(b, h, i, j int) float64 {
			if j == 2 {
				return 2
			}
			return 1
		})
		// Duplicate key/value 2 as a 7th token.
		k7, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 2, H: 2, N: 7, D: 8})
		v7, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 2, H: 2, N: 7, D: 3})
		for b := range 2 {
			for h := range 2 {
				for j := range 7 {
					src := min(j, 5)
					if j == 6 {
						src = 2
					}
					for d := range 8 {
						k7.Set(b, h, j, d, k.At(b, h, src, d))
					}
					for d := range 3 {
						v7.Set(b, h, j, d, v.At(b, h, src, d))
					}
				}
			}
		}
		dup, _ := Attention(ctx, q, k7, v7, false, 0, nil)
		for b := range 2 {
			for h := range 4 {
				for i := range 6 {
					for d := range 3 {
						if math.Abs(w2.At(b, h, i, d)-dup.At(b, h, i, d)) > tol {
							t.Fatalf("[%d %d %d %d]: weight 2 gives %v, duplicate %v", b, h, i, d, w2.At(b, h, i, d), dup.At(b, h, i, d))
						}
					}
				}
			}
		}
	})

	t.Run("fully-masked-rows-are-zero", func(t *testing.T) {
		o, _ := Attention(ctx, q, k, v, true, 0, func(b, h, i, j int) float64 {
			if i == 3 {
				return 0
			}
			return 1
		})
		for _, x := range o.Row(0, 1, 3) {
			if x != 0 {
				t.Fatalf("masked row has %v", x)
			}
		}
		if f := o.Float32(); f.Shape() != o.Shape() || f.At(1, 2, 5, 1) != float32(o.At(1, 2, 5, 1)) {
			t.Fatal("Float32 conversion disagrees")
		}
	})

	t.Run("bad-shapes", func(t *testing.T) {
		if _, err := Attention(ctx, q, v, v, false, 0, nil); err == nil {
			t.Fatal("mismatched head dims accepted")
		}
	})
}
