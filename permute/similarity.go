package permute

import (
	"context"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/tensor"
)

// BlockSimilarity is the mean block self-similarity of x, [B, H, N, D],
// cut into blocks of `block` consecutive tokens (the last may be shorter):
// SpargeAttn's Sim-q and Sim-k (Tables 4 and 9), the quantity a token order
// tries to raise.
//
// A block's self-similarity is the CosSim the SpargeAttn reference code
// computes and the θ judge of package method/sparge reads: the mean cosine
// similarity over all ordered pairs of its m tokens, diagonal included,
//
//	sim(X) = (1/m²) Σ_i Σ_j x̂_i·x̂_j = ‖(1/m) Σ_i x̂_i‖²,   x̂ = x/‖x‖,
//
// with a zero token counted as x̂ = 0. It lies in [0, 1]: 1 when all tokens
// point the same way, about 1/m for unrelated random tokens. The result
// averages sim over every block of every head and batch. It returns an
// error for a block size below 1 or an empty tensor.
func BlockSimilarity(ctx context.Context, x *tensor.Tensor, block int) (float64, error) {
	heads, err := BlockSimilarityPerHead(ctx, x, block)
	if err != nil {
		return 0, err
	}
	// Every head has the same number of blocks, so the mean of the heads'
	// means is the mean over all blocks.
	var sum float64
	for _, v := range heads {
		sum += v
	}
	return sum / float64(len(heads)), nil
}

// BlockSimilarityPerHead is BlockSimilarity for each head h separately,
// averaged over the batch: heads of different kinds (spatial, temporal)
// favour different token orders.
func BlockSimilarityPerHead(ctx context.Context, x *tensor.Tensor, block int) ([]float64, error) {
	if x == nil {
		return nil, fmt.Errorf("%w: nil tensor", ErrSpec)
	}
	s := x.Shape()
	if block < 1 {
		return nil, fmt.Errorf("%w: similarity block size %d must be ≥ 1", ErrSpec, block)
	}
	row := make([]float32, s.D)
	sum := make([]float64, s.D)
	perHead := make([]float64, s.H)
	for h := range s.H {
		var total float64
		var blocks int
		for b := range s.B {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for lo := 0; lo < s.N; lo += block {
				hi := min(lo+block, s.N)
				m := hi - lo
				clear(sum)
				for n := lo; n < hi; n++ {
					x.ReadRow(b, h, n, row)
					var norm float64
					for _, v := range row {
						norm += float64(v) * float64(v)
					}
					if norm == 0 {
						continue
					}
					inv := 1 / math.Sqrt(norm)
					for d, v := range row {
						sum[d] += float64(v) * inv
					}
				}
				var sq float64
				for _, v := range sum {
					sq += v * v
				}
				// SpargeAttn §3.2 CosSim, as its reference code averages it.
				total += sq / float64(m*m)
				blocks++
			}
		}
		perHead[h] = total / float64(blocks)
	}
	return perHead, nil
}
