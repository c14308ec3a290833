package oracle

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// BlockMass returns the exact block attention mass of query head h of
// batch b, the quantity the oracle ranks: mass[qb][kb] is the softmax
// weight the queries of query block qb put on the keys of KV block kb,
// averaged over those queries. A block with no causally visible pair has
// mass 0, and every row sums to 1 up to rounding. It costs one QKᵀ pass
// over the head.
func BlockMass(ctx context.Context, t plan.Tiling, q, k *tensor.Tensor, b, h int) ([][]float64, error) {
	if err := heads.CheckInputs(t, q, k, "oracle BlockMass"); err != nil {
		return nil, err
	}
	g := t.Geometry
	if b < 0 || b >= g.B || h < 0 || h >= g.Hq {
		return nil, fmt.Errorf("%w: batch %d, head %d out of range (batch in 0..%d, head in 0..%d)", plan.ErrInvalid, b, h, g.B-1, g.Hq-1)
	}
	dense, err := plan.Dense(t)
	if err != nil {
		return nil, err
	}
	sc := newScratch(t, dense.KBlocks())
	scale := t.SoftmaxScale()
	mass := make([][]float64, dense.QBlocks())
	for qb := range mass {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sc.blockMass(dense, q, k, b, h, qb, scale)
		mass[qb] = append([]float64(nil), sc.mass...)
	}
	return mass, nil
}
