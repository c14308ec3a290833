package auto_test

import (
	"context"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/tensor"
)

// Example tunes one causal layer of local attention at a layer rel-L1
// budget of 0.05 (less the default margin), then runs the chosen method and
// knob of each head through sparseattn.Attention.
func Example() {
	const h, n, d = 2, 256, 32
	shape := tensor.Shape{B: 1, H: h, N: n, D: d}
	q, _ := tensor.New(tensor.Float32, tensor.BHND, shape)
	k, _ := tensor.New(tensor.Float32, tensor.BHND, shape)
	v, _ := tensor.New(tensor.Float32, tensor.BHND, shape)
	for hi := range h {
		for i := range n {
			for j := 0; j < d; j += 2 {
				w := 0.05 + float64(j)/d // queries score keys near them highest
				q.Set(0, hi, i, j, float32(4*math.Cos(w*float64(i))))
				q.Set(0, hi, i, j+1, float32(4*math.Sin(w*float64(i))))
				k.Set(0, hi, i, j, float32(math.Cos(w*float64(i))))
				k.Set(0, hi, i, j+1, float32(math.Sin(w*float64(i))))
				v.Set(0, hi, i, j, float32(math.Sin(float64(i*j+hi))))
			}
		}
	}
	ctx := context.Background()
	cfg := auto.Config{Budget: 0.05, Margin: auto.DefaultMargin, Causal: true, BlockQ: 32, BlockK: 32}
	layer, err := auto.Tune(ctx, cfg, "layer0", []auto.Input{{Q: q, K: k, V: v}})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := sparseattn.Attention(ctx, q, k, v, sparseattn.Options{
		Planner: auto.Planner{Heads: layer.Heads}, Causal: true, BlockQ: 32, BlockK: 32,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("layer within budget:", layer.L1 <= cfg.Budget*(1-cfg.Margin))
	fmt.Println("skips work:", res.Stats.Sparsity() > 0)
	// Output:
	// layer within budget: true
	// skips work: true
}
