package sparseattn_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/tune"
)

// TestSparge: SpargeAttn through the one Options runs at the one default
// tiling (DefaultBlockQ×DefaultBlockK), honours per-head parameters and
// reports bad ones with sparge.ErrParams.
func TestSparge(t *testing.T) {
	r := testutil.Rand(t)
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 300, D: 64}, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 300, D: 64}, 1)
	v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 300, D: 64}, 1)
	opts := sparseattn.Options{Causal: true, Planner: sparge.Planner{Heads: []sparge.Params{{CDF: 1}, {TopK: 0.3, Theta: -1, Lambda: -5}}}}
	res, err := sparseattn.Attention(context.Background(), q, k, v, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.BlockQ != sparseattn.DefaultBlockQ || res.Plan.BlockK != sparseattn.DefaultBlockK || res.Plan.Filter == nil {
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
	if _, err := sparseattn.Attention(context.Background(), q, k, v, sparseattn.Options{Planner: sparge.Planner{Params: sparge.Params{TopK: -1}}}); !errors.Is(err, sparge.ErrParams) {
		t.Errorf("bad TopK: %v, want ErrParams", err)
	}
}

// TestOneBlockDefault: the tuners' zero block sizes are Attention's, so a
// profile tuned with a zero Config runs at the tiling a zero Options uses.
func TestOneBlockDefault(t *testing.T) {
	c, err := tune.NewProfile(tune.Config{L1: 0.05, L2: 0.06})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auto.NewProfile(auto.Config{Budget: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range [][2]int{{c.BlockQ, c.BlockK}, {a.BlockQ, a.BlockK}} {
		if got != [2]int{sparseattn.DefaultBlockQ, sparseattn.DefaultBlockK} {
			t.Errorf("a tuner's default tiling %v, Attention's %d×%d", got, sparseattn.DefaultBlockQ, sparseattn.DefaultBlockK)
		}
	}
}
