package cuda_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Run a causal block-sparse plan on the GPU and read the work it skipped
// from the device counters. On a machine without a GPU, Open says so.
func ExampleEngine_Run() {
	e, err := cuda.Open(cuda.Config{})
	if errors.Is(err, driver.ErrUnavailable) {
		fmt.Println("no GPU here:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	c := cuda.Case{B: 1, Hq: 8, Hkv: 2, Nq: 4096, Nk: 4096, D: 128, Dv: 128,
		DType: tensor.BFloat16, Layout: tensor.BHND, Causal: true, BlockQ: 128, BlockK: 128}
	r := rand.New(rand.NewPCG(1, 2))
	q, k, v, err := cuda.RandomInputs(r, c, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Keep the diagonal block and each earlier block with probability 1/2.
	p, err := plan.FromMask(plan.Tiling{Geometry: c.Geometry(), Causal: true, BlockQ: 128, BlockK: 128},
		func(b, h, qb, kb int) bool { return kb == qb || r.IntN(2) == 0 })
	if err != nil {
		fmt.Println(err)
		return
	}
	out, stats, err := e.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%v on %s: sparsity %.2f\n", out.Shape(), e.Info().Name, stats.Sparsity())
}
