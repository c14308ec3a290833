package permute

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/tensor"
)

// naiveSimilarity averages, over blocks, the mean of cos(x_i, x_j) over
// all ordered pairs, i = j included (cos(x, x) = 1, 0 for a zero token),
// computed pair by pair in float64.
func naiveSimilarity(x *tensor.Tensor, block int) float64 {
	return naiveSimilarityHeads(x, block, -1)
}

// naiveSimilarityHeads is naiveSimilarity over head only (all heads when
// only < 0).
func naiveSimilarityHeads(x *tensor.Tensor, block, only int) float64 {
	s := x.Shape()
	var total float64
	var blocks int
	for b := range s.B {
		for h := range s.H {
			if only >= 0 && h != only {
				continue
			}
			for lo := 0; lo < s.N; lo += block {
				hi := min(lo+block, s.N)
				var sum float64
				for i := lo; i < hi; i++ {
					for j := lo; j < hi; j++ {
						var dot, ni, nj float64
						for d := range s.D {
							a, c := float64(x.At(b, h, i, d)), float64(x.At(b, h, j, d))
							dot += a * c
							ni += a * a
							nj += c * c
						}
						if ni > 0 && nj > 0 {
							sum += dot / math.Sqrt(ni*nj)
						}
					}
				}
				total += sum / float64((hi-lo)*(hi-lo))
				blocks++
			}
		}
	}
	return total / float64(blocks)
}

func TestBlockSimilarity(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		shape tensor.Shape
		block int
		setup func(x *tensor.Tensor)
		exact float64 // when not NaN, the known answer
	}{
		{"gaussian, ragged last block", tensor.Shape{B: 2, H: 2, N: 37, D: 16}, 8, nil, math.NaN()},
		{"last block of one token", tensor.Shape{B: 1, H: 1, N: 17, D: 32}, 8, nil, math.NaN()},
		{"block larger than N", tensor.Shape{B: 1, H: 3, N: 5, D: 8}, 64, nil, math.NaN()},
		{"identical tokens", tensor.Shape{B: 1, H: 1, N: 12, D: 4}, 4, func(x *tensor.Tensor) {
			for n := range 12 {
				x.WriteRow(0, 0, n, []float32{1, 2, 3, 4})
			}
		}, 1},
		{"opposite pairs", tensor.Shape{B: 1, H: 1, N: 2, D: 3}, 2, func(x *tensor.Tensor) {
			x.WriteRow(0, 0, 0, []float32{1, 0, 2})
			x.WriteRow(0, 0, 1, []float32{-2, 0, -4})
		}, 0},
		{"zero tokens count as zero vectors", tensor.Shape{B: 1, H: 1, N: 4, D: 2}, 4, func(x *tensor.Tensor) {
			x.WriteRow(0, 0, 0, []float32{1, 1})
			x.WriteRow(0, 0, 1, []float32{2, 2})
			x.WriteRow(0, 0, 2, []float32{0, 0})
			x.WriteRow(0, 0, 3, []float32{0, 0})
		}, 4.0 / 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := testutil.Gaussian(t, r, tensor.Float32, tensor.BNHD, c.shape, 1)
			if c.setup != nil {
				c.setup(x)
			}
			got, err := BlockSimilarity(ctx, x, c.block)
			if err != nil {
				t.Fatal(err)
			}
			want := naiveSimilarity(x, c.block)
			if !math.IsNaN(c.exact) {
				want = c.exact
			}
			// The closed form ‖Σx̂‖²/m² and the pairwise sum round
			// differently; in float64 both are within ~1e-15 of exact.
			if math.Abs(got-want) > 1e-12 {
				t.Fatalf("similarity %.15f, want %.15f", got, want)
			}
			heads, err := BlockSimilarityPerHead(ctx, x, c.block)
			if err != nil {
				t.Fatal(err)
			}
			if len(heads) != c.shape.H {
				t.Fatalf("%d per-head values for %d heads", len(heads), c.shape.H)
			}
			for h, got := range heads {
				if want := naiveSimilarityHeads(x, c.block, h); math.Abs(got-want) > 1e-12 && math.IsNaN(c.exact) {
					t.Fatalf("head %d: similarity %.15f, want %.15f", h, got, want)
				}
			}
		})
	}
	x := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 1, D: 4}, 1)
	for _, block := range []int{0, -3} {
		if _, err := BlockSimilarity(ctx, x, block); !errors.Is(err, ErrSpec) {
			t.Errorf("block %d: err = %v, want ErrSpec", block, err)
		}
	}
	if _, err := BlockSimilarity(ctx, nil, 2); !errors.Is(err, ErrSpec) {
		t.Errorf("nil: err = %v, want ErrSpec", err)
	}
}

// smoothField fills x with a field that varies slowly over the grid, so
// tokens close in (t, h, w) are similar: the prior Hilbert order exploits.
func smoothField(x *tensor.Tensor, T, H, W int) {
	s := x.Shape()
	row := make([]float32, s.D)
	for n := range T * H * W {
		ti, hi, wi := n/(H*W), n/W%H, n%W
		for d := range s.D {
			f := float64(d%4 + 1)
			row[d] = float32(math.Sin(f*0.2*float64(ti)+float64(d)) + math.Cos(f*0.2*float64(hi)+2*float64(d)) + math.Sin(f*0.2*float64(wi)+3*float64(d)))
		}
		x.WriteRow(0, 0, n, row)
	}
}

// TestHilbertRaisesSimilarity checks the direction of SpargeAttn Table 9
// on a smooth field: the Hilbert order's blocks are more self-similar than
// row-major's, and a random order's are the least.
func TestHilbertRaisesSimilarity(t *testing.T) {
	ctx := context.Background()
	const T, H, W, block = 4, 16, 16, 64
	x, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: T * H * W, D: 16})
	smoothField(x, T, H, W)
	sim := map[Kind]float64{}
	for _, kind := range []Kind{RowMajor, Hilbert, Random} {
		o, err := Spec{Kind: kind, T: T, H: H, W: W, Seed: 1}.Order(T * H * W)
		if err != nil {
			t.Fatal(err)
		}
		y, err := o.Apply(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		if sim[kind], err = BlockSimilarity(ctx, y, block); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("block similarity: row %.3f, hilbert %.3f, random %.3f", sim[RowMajor], sim[Hilbert], sim[Random])
	if !(sim[Hilbert] > sim[RowMajor] && sim[RowMajor] > sim[Random]) {
		t.Fatalf("want hilbert > row > random, got %.3f, %.3f, %.3f", sim[Hilbert], sim[RowMajor], sim[Random])
	}
}
