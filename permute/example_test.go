package permute_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/permute"
	"github.com/sparseattn/sparseattn/tensor"
)

// Reorder the visual tokens of a 1×4×4 grid followed by 2 text tokens along
// a Hilbert curve, then put them back.
func Example() {
	spec := permute.Spec{Kind: permute.Hilbert, T: 1, H: 4, W: 4, Text: 2}
	order, err := spec.Order(spec.Len())
	if err != nil {
		fmt.Println(err)
		return
	}
	src := make([]int, order.Len())
	for i := range src {
		src[i] = order.Source(i)
	}
	fmt.Println(src)

	ctx := context.Background()
	x, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: spec.Len(), D: 1})
	for n := range spec.Len() {
		x.Set(0, 0, n, 0, float32(n))
	}
	y, _ := order.Apply(ctx, x)   // attend on y instead of x ...
	z, _ := order.Restore(ctx, y) // ... and restore the output rows
	fmt.Println(y.At(0, 0, 2, 0), z.At(0, 0, 2, 0))
	// Output:
	// [0 1 5 4 8 12 13 9 10 14 15 11 7 6 2 3 16 17]
	// 5 2
}
