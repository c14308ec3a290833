// Package xattn plans XAttention (Xu et al., "XAttention: Block Sparse
// Attention with Antidiagonal Scoring", ICML 2025), a block-sparse baseline
// of the S2O paper.
//
// Queries and keys are cut into groups of Stride tokens. The score of a
// (query group, key group) pair is the sum of the Stride query–key products
// along the antidiagonal of its Stride×Stride tile (XAttention §2.1): query
// i·S+S−1−u against key j·S+u, u = 0..S−1. Scaled by the softmax scale and
// divided by the stride, the scores of each query group are soft-maxed over
// its visible key groups, and summed into BlockQ×BlockK blocks. Each query
// block then keeps the fewest blocks, heaviest first, whose summed score
// reaches Threshold of its total (XAttention §2.2); causal plans always keep
// the first KV block and the diagonal block, as the reference code does.
package xattn

import (
	"context"
	"fmt"
	"slices"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Planner plans XAttention.
type Planner struct {
	// Stride is S, the antidiagonal stride; it must divide BlockQ and
	// BlockK. XAttention uses 8 or 16; S2O's comparison uses 16.
	Stride int
	// Threshold is τ in (0, 1], the cumulative share of each query block's
	// estimated attention mass its kept blocks reach. S2O's comparison
	// uses 0.9; 1 keeps every block with any estimated mass.
	Threshold float64
}

// Name returns "xattn".
func (x Planner) Name() string { return "xattn" }

// Check returns an error wrapping plan.ErrInvalid when x's options do not
// suit tiling t. The device planner (package cuda) calls it.
func (x Planner) Check(t plan.Tiling) error {
	if x.Stride <= 0 || t.BlockQ%x.Stride != 0 || t.BlockK%x.Stride != 0 {
		return fmt.Errorf("%w: xattn stride %d must be positive and divide BlockQ=%d and BlockK=%d", plan.ErrInvalid, x.Stride, t.BlockQ, t.BlockK)
	}
	if !(x.Threshold > 0 && x.Threshold <= 1) {
		return fmt.Errorf("%w: xattn threshold %v must be in (0, 1]", plan.ErrInvalid, x.Threshold)
	}
	return nil
}

// Plan scores every block by antidiagonals and applies the threshold.
func (x Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	if err := x.Check(t); err != nil {
		return nil, err
	}
	if err := heads.CheckInputs(t, q, k, "xattn"); err != nil {
		return nil, err
	}
	return heads.SelectBlocks(ctx, t, func(dense *plan.Plan, b, h int) func(int, []int32) []int32 {
		mass := x.blockMass(dense, q, k, b, h)
		return func(qb int, visible []int32) []int32 { return Select(dense, qb, visible, mass[qb], x.Threshold) }
	})
}

// blockMass returns, for head h of batch b, the antidiagonal attention
// estimate summed per block: mass[qb][kb]. Its arithmetic is canonical, as
// the device planner (cuda/kernels/plan_xattn.cu) repeats it: logits are
// plan.Dot64 of the float32 rows times the float64 scale, and the softmax
// and its block sums are plan.AddBlockSoftmax's.
func (x Planner) blockMass(p *plan.Plan, q, k *tensor.Tensor, b, h int) [][]float64 {
	g := p.Geometry
	s, d := x.Stride, g.D
	qg, kg := (g.Nq+s-1)/s, (g.Nk+s-1)/s
	// Reshaped rows: query group i is Q[iS+S−1], Q[iS+S−2], …, Q[iS]
	// concatenated, key group j is K[jS], …, K[jS+S−1]; missing tokens of a
	// ragged last group are zeros. One dot product of length S·D is then
	// one antidiagonal sum (XAttention §2.1).
	rq := make([]float32, qg*s*d)
	for i := range g.Nq {
		grp, u := i/s, s-1-i%s
		q.ReadRow(b, h, i, rq[(grp*s+u)*d:(grp*s+u+1)*d])
	}
	rk := make([]float32, kg*s*d)
	for j := range g.Nk {
		k.ReadRow(b, g.KVHead(h), j, rk[j*d:(j+1)*d])
	}
	scale := float64(p.SoftmaxScale()) / float64(s)
	off := g.QueryOffset()
	mass := make([][]float64, p.QBlocks())
	for qb := range mass {
		mass[qb] = make([]float64, p.KBlocks())
	}
	row := make([]float64, kg)
	mb, eb := make([]float64, p.KBlocks()), make([]float64, p.KBlocks())
	for i := range qg {
		// Key group j is visible to query group i when its first key is
		// visible to the group's first query.
		visible := kg
		if pos := i*s + off; p.Causal && pos < 0 {
			visible = 0
		} else if p.Causal {
			visible = min(pos/s+1, kg)
		}
		if visible == 0 {
			continue
		}
		qi, L := rq[i*s*d:(i+1)*s*d], s*d
		j := 0
		for ; j+4 <= visible; j += 4 {
			s0, s1, s2, s3 := plan.Dot64x4(qi, rk[j*L:], rk[(j+1)*L:], rk[(j+2)*L:], rk[(j+3)*L:])
			row[j], row[j+1], row[j+2], row[j+3] = s0*scale, s1*scale, s2*scale, s3*scale
		}
		for ; j < visible; j++ {
			row[j] = plan.Dot64(qi, rk[j*L:(j+1)*L]) * scale
		}
		plan.AddBlockSoftmax(mass[i*s/p.BlockQ], row[:visible], p.BlockK/s, mb, eb)
	}
	return mass
}

// Select applies XAttention's threshold rule to query block qb of plan p:
// among the visible blocks (in key order), it keeps the forced ones (when
// causal: the first KV block and the last visible, diagonal, block), then
// the heaviest others while the mass kept so far is below threshold × the
// total. It returns the kept blocks in key order.
func Select(p *plan.Plan, qb int, visible []int32, mass []float64, threshold float64) []int32 {
	if len(visible) == 0 {
		return nil
	}
	var have float64
	vm := make([]float64, len(visible))
	for i, kb := range visible {
		vm[i] = mass[kb]
	}
	total := plan.Sum64(vm) // canonical, as the device planner sums
	need := threshold * total
	keep := make([]int32, 0, len(visible))
	rest := make([]int32, 0, len(visible))
	for i, kb := range visible {
		if p.Causal && (i == 0 && kb == 0 || i == len(visible)-1) {
			keep = append(keep, kb)
			have += mass[kb]
			continue
		}
		rest = append(rest, kb)
	}
	slices.SortStableFunc(rest, func(a, b int32) int {
		switch {
		case mass[a] > mass[b]:
			return -1
		case mass[a] < mass[b]:
			return 1
		}
		return 0
	})
	for _, kb := range rest {
		if have >= need {
			break
		}
		keep = append(keep, kb)
		have += mass[kb]
	}
	slices.Sort(keep)
	return keep
}
