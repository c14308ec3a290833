package xattn

import (
	"context"
	"runtime"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// planShared is Plan when each KV head has at least as many query heads as
// there are workers: one KV head at a time, its key panels are built once
// by every worker together, panel by panel, into one buffer, and then its
// query heads share them, one head per worker. Per worker the panels would
// be built once per worker and KV head, each worker's own 8 MB at 16K
// tokens, whose first touch costs as much as the build. The masses and the
// kept blocks are Plan's per-head ones, computed by the same code
// (TestSharedMatchesPerWorker).
func (x Planner) planShared(ctx context.Context, t plan.Tiling, q, k *tensor.Tensor) (*plan.Plan, error) {
	dense, err := plan.Dense(t)
	if err != nil {
		return nil, err
	}
	g := t.Geometry
	s := x.Stride
	kg := (g.Nk + s - 1) / s
	groups := panelGroups(kg)
	kt := make([]float32, groups*s*g.D)
	kept := make([][]int32, dense.Rows())
	// Scratch passes from head to head (and KV head to KV head) through
	// free, so each worker's buffers are allocated about once.
	free := make(chan *scratch, runtime.GOMAXPROCS(0))
	take := func() *scratch {
		select {
		case sc := <-free:
			return sc
		default:
			return new(scratch)
		}
	}
	put := func(sc *scratch) {
		select {
		case free <- sc:
		default:
		}
	}
	for b := range g.B {
		for kvh := range g.Hkv {
			err := heads.ForEachWorker(ctx, groups/kernel.Dot64Lanes, func() func(int) {
				rows := make([]float32, kernel.Dot64Lanes*s*g.D)
				return func(pi int) { fillPanel(kt, rows, k, b, kvh, s, g.Nk, pi) }
			})
			if err != nil {
				return nil, err
			}
			err = heads.ForEach(ctx, g.Group(), func(i int) {
				h := kvh*g.Group() + i
				sc := take()
				defer put(sc)
				mass := x.massFrom(dense, q, b, h, kt, sc)
				for qb := range dense.QBlocks() {
					r := dense.Row(b, h, qb)
					visible, _ := dense.Entries(r)
					kept[r] = sc.sel.pick(dense, qb, visible, mass[qb], x.Threshold)
				}
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return heads.BuildKept(t, kept)
}
