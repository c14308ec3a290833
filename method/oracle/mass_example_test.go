package oracle_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// ExampleBlockMass prints the block attention mass of a causal head whose
// queries all match the first key: the sink block takes almost all of it.
func ExampleBlockMass() {
	const n, d = 8, 4
	g := tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: n, Nk: n, D: d, Dv: d}
	q, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: n, D: d})
	k, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: n, D: d})
	for i := range n {
		q.Set(0, 0, i, 0, 8) // every query points along dimension 0 ...
	}
	k.Set(0, 0, 0, 0, 8) // ... where only key 0 lies
	t := plan.Tiling{Geometry: g, Causal: true, BlockQ: 4, BlockK: 4}
	mass, err := oracle.BlockMass(context.Background(), t, q, k, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	for qb, row := range mass {
		fmt.Printf("query block %d: %.3f\n", qb, row)
	}
	// Output:
	// query block 0: [1.000 0.000]
	// query block 1: [1.000 0.000]
}
