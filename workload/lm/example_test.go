package lm_test

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/workload/lm"
)

// Bits per byte of the embedded model over 1K bytes of held-out text,
// with dense attention and with a sink+window planner in every layer.
func Example() {
	m, err := lm.Default()
	if err != nil {
		panic(err)
	}
	text := lm.EvalText()[:1024]
	ctx := context.Background()
	dense, err := m.Forward(ctx, text, lm.Options{Capture: true})
	if err != nil {
		panic(err)
	}
	sparse, err := m.Forward(ctx, text, lm.Options{Attention: sparseattn.Options{Planner: window.Planner{Sink: 64, Window: 256}}})
	if err != nil {
		panic(err)
	}
	q, _, _, err := dense.Stacked()
	if err != nil {
		panic(err)
	}
	fmt.Printf("Q of all layers: %v\n", q.Shape())
	fmt.Printf("dense %.3f bits/byte; window: %.3f bits/byte, sparsity %.2f\n",
		dense.BitsPerByte(), sparse.BitsPerByte(), sparse.Stats().Sparsity())
	// Output:
	// Q of all layers: [B=1 H=16 N=1024 D=64]
	// dense 0.993 bits/byte; window: 0.988 bits/byte, sparsity 0.40
}
