package cpu

import (
	"context"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
)

// TestRecycledSlabs: a run whose packed heads are cut from a recycled slab
// full of NaN (an earlier run's leftovers, at their worst) still matches
// the float64 reference (tolerance maxAbsTol), on every awkward shape,
// dense and with pooled levels: packing writes every entry the kernels
// read, ragged last blocks included. The slab is offered before each run
// (sync.Pool may drop it; the runs repeat so that most take it).
func TestRecycledSlabs(t *testing.T) {
	r := testutil.Rand(t)
	for _, pr := range problems {
		t.Run(pr.name, func(t *testing.T) {
			q, k, v := pr.inputs(t, r)
			ref, err := reference.Attention(context.Background(), q, k, v, pr.causal, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			dense, err := plan.Dense(pr.tiling())
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				slab := make([]float32, 1<<20)
				for i := range slab {
					slab[i] = float32(math.NaN())
				}
				packSlabs.Put(&slab)
				out, _, err := Executor{Workers: 2}.Run(context.Background(), dense, q, k, v, nil)
				if err != nil {
					t.Fatal(err)
				}
				checkClose(t, ref, out)
			}
		})
	}
}
