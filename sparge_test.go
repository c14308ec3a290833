package sparseattn_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestSparge: the one-call SpargeAttn API uses the paper's 128×64 blocks,
// honours per-head parameters and reports bad ones.
func TestSparge(t *testing.T) {
	r := testutil.Rand(t)
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 300, D: 64}, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 300, D: 64}, 1)
	v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 300, D: 64}, 1)
	opts := sparge.Options{Causal: true, Heads: []sparge.Params{{CDF: 1}, {TopK: 0.3, Theta: -1, Lambda: -5}}}
	res, err := sparseattn.Sparge(context.Background(), q, k, v, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.BlockQ != sparge.DefaultBlockQ || res.Plan.BlockK != sparge.DefaultBlockK || res.Plan.Filter == nil {
		t.Errorf("plan tiling %d×%d filter %+v", res.Plan.BlockQ, res.Plan.BlockK, res.Plan.Filter)
	}
	ref, err := reference.Attention(context.Background(), q, k, v, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Head 0 runs at τ = 1 with no filter: dense within float32 rounding
	// (2e-5 absolute on outputs of magnitude about 1).
	row := make([]float32, 64)
	for n := range 300 {
		res.Out.ReadRow(0, 0, n, row)
		for d, x := range ref.Row(0, 0, n) {
			if math.Abs(float64(row[d])-x) > 2e-5 {
				t.Fatalf("head 0 row %d: %v, reference %v", n, row[d], x)
			}
		}
	}
	if res.Stats.QKBlocks >= res.Stats.DenseBlocks {
		t.Errorf("head 1's top-k 0.3 skipped nothing: %+v", res.Stats)
	}
	if _, err := sparseattn.Sparge(context.Background(), q, k, v, sparge.Options{Params: sparge.Params{TopK: -1}}); !errors.Is(err, sparge.ErrParams) {
		t.Errorf("bad TopK: %v, want ErrParams", err)
	}
}
