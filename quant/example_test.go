package quant_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/quant"
	"github.com/sparseattn/sparseattn/tensor"
)

// Quantize a block of two query tokens and two keys, and compare an INT8
// score with the float one. The keys share an offset of 10 that smoothing
// removes before quantization.
func Example() {
	ctx := context.Background()
	q, _ := tensor.FromFloat32(tensor.BHND, tensor.Shape{B: 1, H: 1, N: 2, D: 2}, []float32{1, 0.5, -0.25, 2})
	k, _ := tensor.FromFloat32(tensor.BHND, tensor.Shape{B: 1, H: 1, N: 2, D: 2}, []float32{11, 10, 9, 10.5})
	qk, err := quant.QuantizeQK(ctx, q, k, 64, 64)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Smoothed keys: (1, -0.25) and (-1, 0.25); q0·k0 = 1 − 0.125.
	fmt.Printf("codes q0 %d %d, k0 %d %d\n", qk.Q.Code(0, 0, 0, 0), qk.Q.Code(0, 0, 0, 1), qk.K.Code(0, 0, 0, 0), qk.K.Code(0, 0, 0, 1))
	fmt.Printf("int8 score %.4f, float score %.4f\n", quant.Dot(qk.Q, qk.K, 0, 0, 0, 0, 0), 1-0.125)
	// Output:
	// codes q0 64 32, k0 127 -32
	// int8 score 0.8809, float score 0.8750
}
