// Package oracle plans with the exact attention map: for each query block it
// keeps the KV blocks carrying the most softmax mass until their share
// reaches a cumulative threshold (TopCdf over the true block masses, as in
// SpargeAttn §3.2 but without prediction error). It costs a full QKᵀ pass
// (on the CPU at 16K tokens, 0.8–1.4× a whole dense attention pass), so it
// is a reference, not a speedup: it bounds what any block-sparse predictor
// can reach at a given sparsity.
package oracle

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// DefaultCDF is the cumulative mass a zero CDF keeps, the TopCdf τ
// SpargeAttn's runs compare with (sparge.DefaultCDF).
const DefaultCDF = 0.95

// Planner keeps, per query block, the smallest set of KV blocks whose mean
// attention mass over the block's queries reaches CDF. The zero value keeps
// DefaultCDF.
type Planner struct {
	CDF float64 // in (0, 1]; 0 means DefaultCDF
}

// Name returns "oracle".
func (o Planner) Name() string { return "oracle" }

// Resolve returns o with its zero fields set to the defaults. Plan calls
// it, and so does the device planner (package cuda).
func (o Planner) Resolve() Planner {
	if o.CDF == 0 {
		o.CDF = DefaultCDF
	}
	return o
}

// Plan computes the true block masses and applies the TopCdf rule.
func (o Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	o = o.Resolve()
	if !(o.CDF > 0 && o.CDF <= 1) {
		return nil, fmt.Errorf("%w: oracle CDF %v must be in (0, 1]", plan.ErrInvalid, o.CDF)
	}
	if err := heads.CheckInputs(t, q, k, "oracle"); err != nil {
		return nil, err
	}
	g := t.Geometry
	scale := t.SoftmaxScale()
	dense, err := plan.Dense(t) // gives the visibility logic and block ranges
	if err != nil {
		return nil, err
	}
	kept := make([][]int, dense.Rows())
	err = heads.ForEachWorker(ctx, g.B*g.Hq, func() func(int) {
		s := newScratch(t, dense.KBlocks())
		return func(i int) {
			for qb := range dense.QBlocks() {
				r := dense.Row(i/g.Hq, i%g.Hq, qb)
				kept[r] = s.topCDF(dense, q, k, i/g.Hq, i%g.Hq, qb, scale, o.CDF)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	bld, err := plan.NewBuilder(t)
	if err != nil {
		return nil, err
	}
	for r, blocks := range kept {
		for _, kb := range blocks {
			bld.Add(r, kb, plan.Full)
		}
	}
	return bld.Build()
}

// scratch is one worker's buffers.
type scratch struct {
	qt, kT, s, row []float32
	bmax, bsum     []float32 // per (query, KV block): local max and Σ exp(s − local max)
	mass           []float64
}

func newScratch(t plan.Tiling, nkb int) *scratch {
	g := t.Geometry
	return &scratch{
		qt: make([]float32, t.BlockQ*g.D), kT: make([]float32, g.D*t.BlockK),
		s: make([]float32, t.BlockQ*t.BlockK), row: make([]float32, g.D),
		bmax: make([]float32, t.BlockQ*nkb), bsum: make([]float32, t.BlockQ*nkb),
		mass: make([]float64, nkb),
	}
}

// blockMass fills sc.mass[kb] with the exact attention mass the queries of
// query block qb put on each KV block, averaged over those queries, and
// returns the visible KV blocks of the row in key order.
func (sc *scratch) blockMass(p *plan.Plan, q, k *tensor.Tensor, b, h, qb int, scale float32) []int32 {
	g := p.Geometry
	bk, nkb := p.BlockK, p.KBlocks()
	kh := g.KVHead(h)
	qlo, qhi := p.QueryRange(qb)
	nq := qhi - qlo
	for i := range nq {
		q.ReadRow(b, h, qlo+i, sc.qt[i*g.D:])
		kernel.Scale(sc.qt[i*g.D:(i+1)*g.D], scale)
	}
	blocks, _ := p.Entries(p.Row(b, h, qb))
	for _, kb32 := range blocks {
		kb := int(kb32)
		klo, khi := p.KeyRange(kb)
		for j := klo; j < khi; j++ {
			k.ReadRow(b, kh, j, sc.row)
			for d, x := range sc.row {
				sc.kT[d*bk+j-klo] = x
			}
		}
		kernel.MatMul(nq, khi-klo, g.D, sc.qt, g.D, sc.kT, bk, sc.s, bk, false)
		for i := range nq {
			si := sc.s[i*bk : i*bk+khi-klo]
			for j := range si {
				if !p.Visible(qlo+i, klo+j) {
					si[j] = float32(math.Inf(-1))
				}
			}
			m := kernel.Max(si)
			sc.bmax[i*nkb+kb] = m
			if m == float32(math.Inf(-1)) {
				sc.bsum[i*nkb+kb] = 0
				continue
			}
			sc.bsum[i*nkb+kb] = kernel.ExpShift(si, si, m)
		}
	}
	// Block mass, averaged over the block's queries: each row's block sums
	// rescaled to the row's global max and normalized.
	clear(sc.mass)
	for i := range nq {
		gm := float32(math.Inf(-1))
		for _, kb := range blocks {
			gm = max(gm, sc.bmax[i*nkb+int(kb)])
		}
		var total float64
		for _, kb := range blocks {
			if s := sc.bsum[i*nkb+int(kb)]; s > 0 {
				total += float64(s) * math.Exp(float64(sc.bmax[i*nkb+int(kb)]-gm))
			}
		}
		if total == 0 {
			continue
		}
		for _, kb := range blocks {
			if s := sc.bsum[i*nkb+int(kb)]; s > 0 {
				sc.mass[kb] += float64(s) * math.Exp(float64(sc.bmax[i*nkb+int(kb)]-gm)) / total / float64(nq)
			}
		}
	}
	return blocks
}

// topCDF returns, in key order, the fewest visible KV blocks of query block
// qb whose mean attention mass reaches cdf.
func (sc *scratch) topCDF(p *plan.Plan, q, k *tensor.Tensor, b, h, qb int, scale float32, cdf float64) []int {
	blocks := sc.blockMass(p, q, k, b, h, qb, scale)
	order := make([]int, len(blocks))
	for i, kb := range blocks {
		order[i] = int(kb)
	}
	sort.SliceStable(order, func(a, b int) bool { return sc.mass[order[a]] > sc.mass[order[b]] })
	var cum float64
	n := 0
	for n < len(order) {
		cum += sc.mass[order[n]]
		n++
		if cum >= cdf {
			break
		}
	}
	kept := order[:n]
	sort.Ints(kept)
	return kept
}
