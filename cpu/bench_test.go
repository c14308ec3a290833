package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// BenchmarkDense times the dense causal pass and reports dense-equivalent
// GFLOPS. Run: go test ./cpu -run '^$' -bench Dense
func BenchmarkDense(b *testing.B) {
	for _, n := range []int{1024, 4096} {
		for _, d := range []int{64, 128} {
			for _, bs := range [][2]int{{64, 64}, {128, 128}} {
				b.Run(fmt.Sprintf("N%d-D%d-%dx%d", n, d, bs[0], bs[1]), func(b *testing.B) {
					r := rand.New(rand.NewPCG(1, 2))
					s := tensor.Shape{B: 1, H: 4, N: n, D: d}
					q := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
					k := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
					v := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
					g, _ := tensor.Validate(q, k, v)
					p, err := plan.Dense(plan.Tiling{Geometry: g, Causal: true, BlockQ: bs[0], BlockK: bs[1]})
					if err != nil {
						b.Fatal(err)
					}
					out, _ := tensor.New(tensor.Float32, tensor.BHND, s)
					b.ResetTimer()
					for b.Loop() {
						if _, _, err := (Executor{}).Run(context.Background(), p, q, k, v, out); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(metrics.DenseFLOPs(g, true)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
				})
			}
		}
	}
}

// BenchmarkDecode times one query token per head against a long KV cache,
// where rows are too few for the workers and the split-KV path runs.
// Run: go test ./cpu -run '^$' -bench Decode
func BenchmarkDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	g := tensor.Geometry{B: 1, Hq: 8, Hkv: 2, Nq: 1, Nk: 32768, D: 128, Dv: 128}
	q := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: g.Hq, N: 1, D: g.D}, 1)
	k := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: g.Hkv, N: g.Nk, D: g.D}, 1)
	v := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: g.Hkv, N: g.Nk, D: g.Dv}, 1)
	p, err := plan.Dense(plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := (Executor{}).Run(context.Background(), p, q, k, v, nil); err != nil {
			b.Fatal(err)
		}
	}
	bytes := float64(2*g.Hkv*g.Nk*g.D) * 4
	b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s(KV)")
}
