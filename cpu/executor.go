// Package cpu runs attention plans on the CPU: a FlashAttention-style tiled
// online softmax over exactly the blocks a plan names, multi-threaded over
// (batch, head, query block), with vectorized inner loops from
// internal/kernel.
//
// One executor serves dense and sparse attention alike: dense attention is
// the plan that visits every causally visible block. Inside blocks that
// straddle the causal diagonal, masking is token-exact. Every query row with
// no visible key comes out as zeros.
package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Executor runs plans. The zero value uses every CPU. An Executor holds no
// state between calls and is safe for concurrent use.
type Executor struct {
	// Workers is the number of goroutines; 0 means runtime.GOMAXPROCS(0).
	Workers int
}

// ErrMismatch reports tensors that do not match the plan's geometry.
var ErrMismatch = errors.New("cpu: tensors do not match the plan")

// Run computes attention for the plan p into out and returns the work
// counters. q, k and v must match p.Geometry; out must be [B, Hq, Nq, Dv]
// in any storage type and layout, or nil to get a new float32 BHND tensor.
// scale multiplies QKᵀ before the softmax; 0 means 1/sqrt(D).
func (e Executor) Run(ctx context.Context, p *plan.Plan, q, k, v, out *tensor.Tensor, scale float32) (*tensor.Tensor, plan.Stats, error) {
	if p == nil {
		return nil, plan.Stats{}, fmt.Errorf("%w: nil plan", plan.ErrInvalid)
	}
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		return nil, plan.Stats{}, err
	}
	if g != p.Geometry {
		return nil, plan.Stats{}, fmt.Errorf("%w: tensors are %+v, plan is for %+v", ErrMismatch, g, p.Geometry)
	}
	if err := p.Validate(); err != nil {
		return nil, plan.Stats{}, err
	}
	want := tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.Dv}
	if out == nil {
		if out, err = tensor.New(tensor.Float32, tensor.BHND, want); err != nil {
			return nil, plan.Stats{}, err
		}
	} else if out.Shape() != want {
		return nil, plan.Stats{}, fmt.Errorf("%w: out is %v, want %v", ErrMismatch, out.Shape(), want)
	}
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(g.D)))
	}
	if !(scale > 0) || math.IsInf(float64(scale), 0) {
		return nil, plan.Stats{}, fmt.Errorf("%w: softmax scale %v must be positive and finite", plan.ErrInvalid, scale)
	}

	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	r := &run{p: p, g: g, q: q, k: k, v: v, out: out, scale: scale, maxLevel: maxLevel(p)}
	scratch := make([]*tile, workers)
	for i := range scratch {
		scratch[i] = newTile(p)
	}
	// Heads are done one KV head at a time so that only one head's packed
	// keys and values are alive; its query heads and blocks run in parallel.
	for b := range g.B {
		for kh := range g.Hkv {
			if err := ctx.Err(); err != nil {
				return nil, plan.Stats{}, err
			}
			r.pack(b, kh, workers)
			tasks := g.Group() * p.QBlocks()
			var next atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func(t *tile) {
					defer wg.Done()
					for {
						i := int(next.Add(1) - 1)
						if i >= tasks || ctx.Err() != nil {
							return
						}
						h := kh*g.Group() + i/p.QBlocks()
						t.row(r, b, h, i%p.QBlocks())
					}
				}(scratch[w])
			}
			wg.Wait()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, plan.Stats{}, err
	}
	stats := plan.Stats{DenseBlocks: float64(p.DenseBlocks())}
	for _, t := range scratch {
		stats.Add(t.stats)
	}
	return out, stats, nil
}

func maxLevel(p *plan.Plan) plan.Level {
	top := plan.Full
	for _, l := range p.Level {
		top = max(top, l)
	}
	return top
}
