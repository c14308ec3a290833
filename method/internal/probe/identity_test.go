package probe

import (
	"fmt"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// sameBits reports whether a and b are the same float64, NaN matching any
// NaN (payloads are not part of the canonical value).
func sameBits(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}

// TestLastMatchesReference checks the probe computed in kernel.Dot64Panel
// and a reused Scratch against the old one-dot-product-after-another code
// (reference_test.go) bit for bit: positions, queries, every probability,
// the vertical and the slash sums. Tolerance: none. Shapes: ragged key
// counts around the 128-key tile and the 16-key panel, fewer keys than a
// block, GQA heads, causal and not, Nq < Nk (chunked prefill) and Nq > Nk
// (queries that see no key), probe counts not a multiple of four and above
// Nq, odd head dims, half-precision inputs in both layouts, peaked softmax
// rows (σ = 8) and an infinite query value (NaN rows). One Scratch serves
// every case, in an order that shrinks and grows its buffers, so stale
// memory would show.
func TestLastMatchesReference(t *testing.T) {
	r := testutil.Rand(t)
	type shape struct {
		nq, nk, n, hq, hkv, d int
		causal                bool
		dtype                 tensor.DType
		layout                tensor.Layout
		sigma                 float64
		inf                   bool
	}
	f32 := tensor.Float32
	cases := []shape{
		{nq: 300, nk: 300, n: 64, hq: 4, hkv: 1, d: 128, causal: true, dtype: f32, layout: tensor.BHND, sigma: 1},
		{nq: 5, nk: 5, n: 64, hq: 2, hkv: 2, d: 48, causal: true, dtype: f32, layout: tensor.BHND, sigma: 1},
		{nq: 1000, nk: 1000, n: 13, hq: 4, hkv: 2, d: 64, causal: true, dtype: f32, layout: tensor.BHND, sigma: 8},
		{nq: 70, nk: 333, n: 64, hq: 4, hkv: 1, d: 33, causal: true, dtype: tensor.Float16, layout: tensor.BNHD, sigma: 1},
		{nq: 70, nk: 333, n: 7, hq: 2, hkv: 1, d: 33, causal: false, dtype: tensor.BFloat16, layout: tensor.BHND, sigma: 1},
		{nq: 50, nk: 40, n: 50, hq: 2, hkv: 1, d: 16, causal: true, dtype: f32, layout: tensor.BHND, sigma: 1},
		{nq: 50, nk: 40, n: 50, hq: 2, hkv: 1, d: 16, causal: false, dtype: f32, layout: tensor.BHND, sigma: 1},
		{nq: 129, nk: 257, n: 128, hq: 3, hkv: 3, d: 128, causal: false, dtype: f32, layout: tensor.BNHD, sigma: 3},
		{nq: 1, nk: 1, n: 64, hq: 1, hkv: 1, d: 8, causal: true, dtype: f32, layout: tensor.BHND, sigma: 1},
		{nq: 200, nk: 143, n: 21, hq: 2, hkv: 1, d: 128, causal: true, dtype: f32, layout: tensor.BHND, sigma: 1, inf: true},
		{nq: 17, nk: 2049, n: 17, hq: 8, hkv: 2, d: 128, causal: true, dtype: f32, layout: tensor.BHND, sigma: 2},
	}
	var sc Scratch
	var row []float64
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			g := tensor.Geometry{B: 2, Hq: c.hq, Hkv: c.hkv, Nq: c.nq, Nk: c.nk, D: c.d, Dv: c.d}
			q := testutil.Gaussian(t, r, c.dtype, c.layout, tensor.Shape{B: 2, H: c.hq, N: c.nq, D: c.d}, c.sigma)
			k := testutil.Gaussian(t, r, c.dtype, c.layout, tensor.Shape{B: 2, H: c.hkv, N: c.nk, D: c.d}, c.sigma)
			if c.inf {
				q.Set(1, c.hq-1, c.nq-3, c.d/2, float32(math.Inf(1)))
			}
			tl := plan.Tiling{Geometry: g, Causal: c.causal, BlockQ: 64, BlockK: 64}
			for b := range g.B {
				for h := range g.Hq {
					want := lastReference(tl, q, k, b, h, c.n)
					got := sc.Last(tl, q, k, b, h, c.n)
					if got.Len() != len(want.P) || got.Nk != want.Nk {
						t.Fatalf("b %d h %d: %d probe queries over %d keys, want %d over %d", b, h, got.Len(), got.Nk, len(want.P), want.Nk)
					}
					for i := range want.P {
						if got.Pos[i] != want.Pos[i] {
							t.Fatalf("b %d h %d: probe %d at %d, want %d", b, h, i, got.Pos[i], want.Pos[i])
						}
						row = got.Row(i, row)
						for j, x := range want.P[i] {
							if !sameBits(row[j], x) {
								t.Fatalf("b %d h %d: P[%d][%d] = %v, want %v", b, h, i, j, row[j], x)
							}
						}
					}
					for i, x := range want.Queries {
						if math.Float32bits(got.Queries[i]) != math.Float32bits(x) {
							t.Fatalf("b %d h %d: query value %d = %v, want %v", b, h, i, got.Queries[i], x)
						}
					}
					for name, pair := range map[string][2][]float64{
						"vertical": {got.Vertical(), want.Vertical()},
						"slash":    {got.SlashInto(make([]float64, 1)), want.Slash()},
					} {
						if len(pair[0]) != len(pair[1]) {
							t.Fatalf("b %d h %d: %d %s sums, want %d", b, h, len(pair[0]), name, len(pair[1]))
						}
						for j := range pair[1] {
							if !sameBits(pair[0][j], pair[1][j]) {
								t.Fatalf("b %d h %d: %s[%d] = %v, want %v", b, h, name, j, pair[0][j], pair[1][j])
							}
						}
					}
				}
			}
		})
	}
}
