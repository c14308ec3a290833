// Package testutil builds random attention inputs for tests, with a fresh
// seed each run that the test log records so a failure can be replayed.
package testutil

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

// Rand returns a generator seeded from SPARSEATTN_SEED when set, otherwise
// from a fresh random seed; the seed is logged.
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("SPARSEATTN_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SPARSEATTN_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with SPARSEATTN_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0x5eed))
}

// Gaussian returns a tensor of i.i.d. N(0, sigma²) values stored as dtype in
// the given layout.
func Gaussian(t testing.TB, r *rand.Rand, dtype tensor.DType, layout tensor.Layout, s tensor.Shape, sigma float64) *tensor.Tensor {
	t.Helper()
	x, err := tensor.New(dtype, layout, s)
	if err != nil {
		t.Fatal(err)
	}
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				for d := range s.D {
					x.Set(b, h, n, d, float32(r.NormFloat64()*sigma))
				}
			}
		}
	}
	return x
}
