package psa

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Settings are a Planner's parameters for one tiling, validated, with the
// defaults filled in and Scale applied: what a device planner must repeat.
type Settings struct {
	Rule Rule
	// Cuts are the scaled thresholds (Threshold) or quantiles (Quantile),
	// each capped at 1; their count is the number of levels H.
	Cuts      []float64
	Estimator Estimator
	// SampleQ and SampleK are Sampling's draws per block, at most the
	// block size; Stride is Antidiagonal's tile edge.
	SampleQ, SampleK, Stride int
	// OutlierQ and OutlierK are how many of Sampling's draws per block
	// are the block's most outlying tokens (0: none), at most SampleQ and
	// SampleK.
	OutlierQ, OutlierK int
	// Similarity is the cap's H−1 cosine thresholds, or nil.
	Similarity []float64
	Seed       uint64
}

// Settings returns p's parameters for tiling t, or an error wrapping
// plan.ErrInvalid.
func (p Planner) Settings(t plan.Tiling) (Settings, error) {
	c, err := p.config(t)
	if err != nil {
		return Settings{}, err
	}
	return Settings{Rule: c.rule, Cuts: append([]float64(nil), c.cuts...), Estimator: c.estimator,
		SampleQ: c.sampleQ, SampleK: c.sampleK, Stride: c.stride, OutlierQ: c.outQ, OutlierK: c.outK,
		Similarity: append([]float64(nil), c.sim...), Seed: c.seed}, nil
}

// Importance returns the block importance the CPU planner computes for
// query head h of batch b: per query block, one value per causally visible
// KV block in ascending order, as Plan's level assignment reads them. The
// device planner's judge (cuda/selftest) compares with it.
func (p Planner) Importance(ctx context.Context, t plan.Tiling, q, k *tensor.Tensor, b, h int) ([][]float64, error) {
	dense, c, err := p.prepare(t, q, k)
	if err != nil {
		return nil, err
	}
	g := t.Geometry
	if b < 0 || b >= g.B || h < 0 || h >= g.Hq {
		return nil, fmt.Errorf("%w: psa importance of head (%d, %d) of %d×%d", plan.ErrInvalid, b, h, g.B, g.Hq)
	}
	est := newEstimator(dense, c, q, k)
	est.head(b, h)
	out := make([][]float64, dense.QBlocks())
	for qb := range out {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		blocks, _ := dense.Entries(dense.Row(b, h, qb))
		out[qb] = est.row(qb, blocks, nil)
	}
	return out, nil
}

// Caps returns the similarity cap of each (batch, KV head, KV block),
// indexed (b·Hkv + kh)·KBlocks + kb: the coarsest level the block's keys
// admit (PSA App. B.1, Algorithm 3), or nil when p has no cap.
func (p Planner) Caps(t plan.Tiling, k *tensor.Tensor) ([]plan.Level, error) {
	c, err := p.config(t)
	if err != nil || c.sim == nil {
		return nil, err
	}
	dense, err := plan.Dense(t)
	if err != nil {
		return nil, err
	}
	return similarityCaps(dense, k, c.sim), nil
}

// OutlierOffsets returns the offsets of the m most outlying of the n rows
// of x (row-major, d columns each; 0 < m < n), largest outlier score first,
// ties to the lower offset: the first m of the draws Sampling takes from a
// block of those rows (outlierScores, then estimator.draw's selection).
// The device planner's psa_outliers repeats them bit for bit; its device
// test compares with this. Sizes outside those bounds, or an x shorter
// than n·d, give an error wrapping plan.ErrInvalid.
func OutlierOffsets(x []float32, n, d, m int) ([]int, error) {
	if n < 2 || d < 1 || m < 1 || m >= n || len(x)/d < n {
		return nil, fmt.Errorf("%w: psa outlier offsets of %d of %d rows of %d columns from %d values; want 0 < m < n, d ≥ 1 and n·d values", plan.ErrInvalid, m, n, d, len(x))
	}
	mean, inv, z := make([]float32, d), make([]float32, d), make([]float32, n)
	outlierScores(x, n, d, mean, inv, z)
	e := &estimator{perm: make([]int, n)}
	return e.draw(nil, n, m, m, z), nil // s = m < n: the selection alone, no random draw
}
