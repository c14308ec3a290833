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
// A block's self-similarity is the mean cosine similarity over its distinct
// pairs of tokens,
//
//	sim(X) = Σ_{i≠j} cos(x_i, x_j) / (m(m−1)) = (‖Σ_i x̂_i‖² − Σ_i ‖x̂_i‖²) / (m(m−1)),
//
// with x̂ = x/‖x‖ (a zero token has x̂ = 0, so its pairs count as
// cosine 0). It is 1 when all tokens point the same way and near 0 for
// unrelated random tokens. The result averages sim over every block of
// every head and batch; blocks of a single token have no pairs and are
// left out. It returns an error for a block size below 2 or a tensor with
// fewer than 2 tokens.
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
	if block < 2 {
		return nil, fmt.Errorf("%w: similarity block size %d must be ≥ 2", ErrSpec, block)
	}
	if s.N < 2 {
		return nil, fmt.Errorf("%w: similarity needs at least 2 tokens, have %d", ErrSpec, s.N)
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
				if m < 2 {
					continue
				}
				clear(sum)
				var self float64 // Σ‖x̂_i‖²: 1 per nonzero token
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
					self++
				}
				var sq float64
				for _, v := range sum {
					sq += v * v
				}
				total += (sq - self) / float64(m*(m-1))
				blocks++
			}
		}
		perHead[h] = total / float64(blocks)
	}
	return perHead, nil
}
