package unisparse

// Scores and BlockScores: one head group's block masses as Plan computes
// them, for the device planner's self-test.

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Scores are one head group's block masses as Plan computes them, in
// float64, before Top-P. The device planner's self-test (package
// cuda/selftest) judges device plans against them.
type Scores struct {
	// Mass[qb] holds query block qb's compressed attention mass on each of
	// its visible KV blocks, in key order (UniSparse Eq. 4–5).
	Mass [][]float64
	// Bound is the largest norm of the group's composite queries (scaled
	// by the softmax scale) times the largest norm of its composite keys:
	// every logit's products sum in absolute value to at most Bound.
	Bound float64
	// Outlier[qb] is query block qb's outlier query (outlier.go); nil with
	// NoOutlier.
	Outlier []Outlier
	// OutlierBound is Bound for the outlier queries' logits: the largest
	// norm of the scaled outlier tokens times that of the individual keys.
	OutlierBound float64
}

// Outlier is one query block's outlier query as Plan computes it.
type Outlier struct {
	// Token is the outlier query's index, −1 for a block that sees no key.
	Token int
	// Mass holds, for each of the block's visible KV blocks in key order,
	// the share of the outlier query's softmax (over the individual keys
	// the block's last query sees) that falls on it, in float64
	// (plan.AddBlockSoftmax); the shares add up to 1.
	Mass []float64
	// Block is the KV block Plan keeps for it, the first of the heaviest
	// (−1 with no visible key).
	Block int
}

// BlockScores returns the scores of the head group whose first query head
// is h0 (a multiple of CH) of batch b, those Plan keeps Top-P of.
func (u Planner) BlockScores(ctx context.Context, t plan.Tiling, q, k *tensor.Tensor, b, h0 int) (Scores, error) {
	dense, err := plan.Dense(t)
	if err != nil {
		return Scores{}, err
	}
	c, err := u.config(t)
	if err != nil {
		return Scores{}, err
	}
	if err := heads.CheckInputs(t, q, k, "unisparse"); err != nil {
		return Scores{}, err
	}
	if h0%c.ch != 0 || h0 < 0 || h0 >= t.Geometry.Hq {
		return Scores{}, fmt.Errorf("%w: unisparse head group start %d is not a multiple of CH %d below %d", plan.ErrInvalid, h0, c.ch, t.Geometry.Hq)
	}
	if err := ctx.Err(); err != nil {
		return Scores{}, err
	}
	s := newScorer(dense, c, q, k)
	s.compress(b, h0)
	out := Scores{Mass: make([][]float64, dense.QBlocks())}
	for qb := range dense.QBlocks() {
		blocks, _ := dense.Entries(dense.Row(b, h0, qb))
		out.Mass[qb] = slices.Clone(s.blockMass(qb, blocks))
	}
	d := t.Geometry.D
	out.Bound = maxNorm(s.cq, d) * maxNorm(s.ck, d)
	if c.outlier {
		out.Outlier = make([]Outlier, dense.QBlocks())
		keys := s.outlierKeys()
		scaled := make([]float32, len(s.oq))
		for i, x := range s.oq {
			scaled[i] = x * dense.SoftmaxScale()
		}
		for qb := range out.Outlier {
			o := Outlier{Token: -1, Block: int(s.extra[qb])}
			if vis := s.outlierVisible(qb); vis > 0 {
				o.Token = int(s.otok[qb])
				l := make([]float64, vis)
				for j := range l {
					l[j] = plan.Dot64(scaled[qb*d:(qb+1)*d], keys[j*d:(j+1)*d])
				}
				nb := (vis + t.BlockK - 1) / t.BlockK
				o.Mass = make([]float64, nb)
				plan.AddBlockSoftmax(o.Mass, l, t.BlockK, make([]float64, nb), make([]float64, nb))
			}
			out.Outlier[qb] = o
		}
		out.OutlierBound = maxNorm(scaled, d) * maxNorm(keys, d)
	}
	return out, nil
}

// maxNorm is the largest Euclidean norm of the rows of d values in x.
func maxNorm(x []float32, d int) float64 {
	var best float64
	for i := 0; i+d <= len(x); i += d {
		var s float64
		for _, v := range x[i : i+d] {
			s += float64(v) * float64(v)
		}
		best = max(best, s)
	}
	return math.Sqrt(best)
}
