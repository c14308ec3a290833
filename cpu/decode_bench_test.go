package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// BenchmarkReadBandwidth measures the machine's plain read bandwidth on all
// CPUs: each goroutine takes the maximum of its share of a 256 MiB float32
// array with the vectorized kernel. Decode reads K and V once, so this is
// its ceiling. Run: go test ./cpu -run '^$' -bench ReadBandwidth
func BenchmarkReadBandwidth(b *testing.B) {
	x := make([]float32, 64<<20)
	for i := range x {
		x[i] = float32(i % 1000)
	}
	workers := 2
	b.SetBytes(int64(len(x)) * 4)
	for b.Loop() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				part := x[w*len(x)/workers : (w+1)*len(x)/workers]
				if kernel.Max(part) < 0 {
					panic("negative")
				}
			}()
		}
		wg.Wait()
	}
}

// BenchmarkDecodeShapes times decode (one query token, or a short chunk)
// against a KV cache of 4K or 16K tokens, MHA and GQA, and reports the K/V
// read rate; "check" runs with Executor.CheckFinite, as the default
// sparseattn.Attention call does. Run:
// go test ./cpu -run '^$' -bench DecodeShapes
func BenchmarkDecodeShapes(b *testing.B) {
	for _, c := range []struct {
		hq, hkv, nq, nk int
		check           bool
	}{
		{8, 8, 1, 4096, false},
		{32, 8, 1, 4096, false},
		{8, 8, 1, 16384, false},
		{8, 8, 1, 16384, true},
		{32, 8, 1, 16384, false},
		{32, 8, 1, 16384, true},
		{8, 8, 16, 16384, false},
		{32, 8, 16, 16384, false},
	} {
		name := fmt.Sprintf("Hq%d-Hkv%d-Nq%d-Nk%d", c.hq, c.hkv, c.nq, c.nk)
		if c.check {
			name += "-check"
		}
		b.Run(name, func(b *testing.B) {
			p, q, k, v, out := decodeCase(b, c.hq, c.hkv, c.nq, c.nk)
			b.SetBytes(decodeBytes(p))
			for b.Loop() {
				if _, _, err := (Executor{CheckFinite: c.check}).Run(context.Background(), p, q, k, v, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// decodeCase makes a causal dense decode problem (D=128, random inputs) of
// hq query heads and nq queries against hkv KV heads of nk tokens.
func decodeCase(b *testing.B, hq, hkv, nq, nk int) (p *plan.Plan, q, k, v, out *tensor.Tensor) {
	r := rand.New(rand.NewPCG(5, 6))
	g := tensor.Geometry{B: 1, Hq: hq, Hkv: hkv, Nq: nq, Nk: nk, D: 128, Dv: 128}
	q = testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: g.Hq, N: g.Nq, D: g.D}, 1)
	k = testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: g.Hkv, N: g.Nk, D: g.D}, 1)
	v = testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: g.Hkv, N: g.Nk, D: g.Dv}, 1)
	p, err := plan.Dense(plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64})
	if err != nil {
		b.Fatal(err)
	}
	out, _ = tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: g.Hq, N: g.Nq, D: g.Dv})
	return p, q, k, v, out
}

// decodeBytes is the K and V bytes a decode pass of p reads.
func decodeBytes(p *plan.Plan) int64 {
	g := p.Geometry
	return int64(g.B*g.Hkv*g.Nk*(g.D+g.Dv)) * 4
}
