// Package cpu runs attention plans on the CPU: a FlashAttention-style tiled
// online softmax over exactly the blocks a plan names, multi-threaded over
// (batch, head, query block) — on the GEMM path over groups of consecutive
// query blocks of a head, which share each KV block while it is in cache —
// with vectorized inner loops from internal/kernel.
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
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Executor runs plans. The zero value uses every CPU. An Executor holds no
// state between calls and is safe for concurrent use.
type Executor struct {
	// Workers is the number of goroutines; 0 means runtime.GOMAXPROCS(0).
	// It is capped at 4·GOMAXPROCS.
	Workers int
	// PackBudget bounds the bytes of keys and values repacked for the
	// kernels at any one time; KV heads are processed in chunks that fit.
	// 0 means DefaultPackBudget. At least one head is always packed.
	PackBudget int
	// CheckFinite rejects NaN and Inf anywhere in q, k and v with the
	// *tensor.NonFiniteError tensor.CheckFiniteAll would give, checked as
	// the run reads the inputs: each query row as it is loaded, each key
	// and value block as it is packed or first computed with in place, and
	// the blocks the plan never reads at the end. So a plan that reads
	// everything once (decode) checks at no extra pass over memory. The
	// output is then undefined.
	CheckFinite bool

	// rowGroup, when positive, sets how many query blocks of a head each
	// task runs together (see rowGroupSize), for the tests.
	rowGroup int
	// noTrim computes diagonal blocks as full tiles (see diag.go), for the
	// tests.
	noTrim bool
	// noSpans folds in-place KV blocks one by one (see span.go), for the
	// tests.
	noSpans bool
}

// maxWorkersPerCPU caps Workers: goroutines beyond a few per CPU only cost
// memory for their scratch tiles.
const maxWorkersPerCPU = 4

// DefaultPackBudget is the PackBudget used when none is set: 256 MiB.
const DefaultPackBudget = 256 << 20

// ErrMismatch reports tensors that do not match the plan's geometry.
var ErrMismatch = errors.New("cpu: tensors do not match the plan")

// Run computes attention for the plan p into out and returns the work
// counters. q, k and v must match p.Geometry; out must be [B, Hq, Nq, Dv]
// in any storage type and layout, or nil to get a new float32 BHND tensor.
// The softmax scale is the plan's. A plan with an Init plan runs it first
// and resumes its per-query softmax states; both plans' work is counted.
func (e Executor) Run(ctx context.Context, p *plan.Plan, q, k, v, out *tensor.Tensor) (*tensor.Tensor, plan.Stats, error) {
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

	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, maxWorkersPerCPU*runtime.GOMAXPROCS(0))
	r := &run{p: p, g: g, q: q, k: k, v: v, out: out, scale: p.SoftmaxScale(), maxLevel: maxLevel(p), noTrim: e.noTrim}
	if p.Init != nil {
		r.maxLevel = max(r.maxLevel, maxLevel(p.Init))
		r.state = newStates(g)
	}
	if e.CheckFinite {
		r.check = newFiniteCheck(g, p.KBlocks())
	}
	r.stack = stackedHeads(p)
	r.readInPlace() // after stack: it counts the stacked rows
	r.spans = r.spanning(e.noSpans)
	defer r.release()
	tiles := takeTiles(p, workers)
	defer tileSets.Put(tiles)
	scratch := tiles.tiles
	// KV heads (over the batch) are packed and run in chunks, so that the
	// packed keys and values stay within the budget while every worker
	// draws from one pool of (head, query block) tasks per chunk.
	total := g.B * g.Hkv
	budget := e.PackBudget
	if budget <= 0 {
		budget = DefaultPackBudget
	}
	chunk := max(1, min(total, budget/r.packedBytes()))
	for first := 0; first < total; first += chunk {
		if err := ctx.Err(); err != nil {
			return nil, plan.Stats{}, err
		}
		heads := min(chunk, total-first)
		if !allGathered(p) {
			r.pack(first, heads, workers)
		}
		rows := heads * g.Group() / r.stack // tasks per query block in this chunk
		tasks := rows * p.QBlocks()
		// Last query blocks first: under causal masking they are the
		// longest, and starting them early balances the finish times.
		locate := func(task int) (b, h, qb int) {
			bh := first*g.Group() + task%rows*r.stack // b·Hq + h
			return bh / g.Hq, bh % g.Hq, p.QBlocks() - 1 - task/rows
		}
		if p.Order != nil && splitCount(p, tasks, workers) == 1 {
			// Token orders: each task is a group of rows sharing a key
			// order (an S2O segment), so that every gathered KV block
			// serves all the group's query blocks that list it.
			h0, nh := first*g.Group(), heads*g.Group()
			groups := rowGroups(p, h0, nh)
			if p.Init != nil {
				init := *r
				init.p, init.pass1 = p.Init, true
				first := rowGroups(p.Init, h0, nh)
				if passTogether(p, first, groups) {
					// Pass 1 then pass 2 of each group in one task.
					pairs := make([][2]rowGroup, len(groups))
					for i := range pairs {
						pairs[i] = [2]rowGroup{first[i], groups[i]}
					}
					longestFirst(pairs, func(x [2]rowGroup) int { return x[0].work + x[1].work })
					pool(ctx, len(pairs), scratch, func(t *tile, i int) {
						t.group(&init, pairs[i][0])
						t.group(r, pairs[i][1])
					})
					continue
				}
				longestFirst(first, func(x rowGroup) int { return x.work })
				pool(ctx, len(first), scratch, func(t *tile, i int) { t.group(&init, first[i]) })
			}
			longestFirst(groups, func(x rowGroup) int { return x.work })
			pool(ctx, len(groups), scratch, func(t *tile, i int) { t.group(r, groups[i]) })
			continue
		}
		if p.Init != nil {
			// Pass 1: the Init plan's rows, on the same packed heads, leave
			// their softmax states for the rows below to resume.
			init := *r
			init.p, init.pass1 = p.Init, true
			pool(ctx, tasks, scratch, func(t *tile, i int) {
				b, h, qb := locate(i)
				t.rowInit(&init, b, h, qb)
			})
		}
		splits := splitCount(p, tasks, workers)
		if gq := r.rowGroupSize(tasks, workers, e.rowGroup); splits == 1 && gq > 1 {
			// Groups of gq query blocks of a head, the last ones first.
			qgroups := (p.QBlocks() + gq - 1) / gq
			pool(ctx, rows*qgroups, scratch, func(t *tile, i int) {
				bh := first*g.Group() + i%rows*r.stack // b·Hq + h
				j := qgroups - 1 - i/rows
				t.rows(r, bh/g.Hq, bh%g.Hq, j*gq, min(p.QBlocks(), (j+1)*gq))
			})
			continue
		}
		if splits == 1 {
			pool(ctx, tasks, scratch, func(t *tile, i int) {
				b, h, qb := locate(i)
				t.row(r, b, h, qb)
			})
			continue
		}
		// Too few rows to keep every worker busy (decode, short prompts):
		// split each row's KV blocks, then merge the partial softmax states.
		parts := newPartials(tasks*splits, p.BlockQ, g.Dv)
		pool(ctx, tasks*splits, scratch, func(t *tile, i int) {
			b, h, qb := locate(i / splits)
			n := t.begin(r, b, h, qb)
			t.visit(r, b, h, qb, n, i%splits, splits)
			parts.save(i, t, n, g.Dv)
		})
		pool(ctx, tasks, scratch, func(t *tile, task int) {
			b, h, qb := locate(task)
			parts.merge(r, t, b, h, qb, task*splits, splits)
		})
	}
	if err := ctx.Err(); err != nil {
		return nil, plan.Stats{}, err
	}
	if c := r.check; c != nil {
		if !c.bad.Load() {
			r.checkRest(ctx, workers, scratch)
		}
		if c.bad.Load() { // locate the first one in logical order, if an input holds it
			if err := tensor.CheckFiniteAll(ctx, tensor.Named{Name: "q", T: q}, tensor.Named{Name: "k", T: k}, tensor.Named{Name: "v", T: v}); err != nil {
				return nil, plan.Stats{}, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, plan.Stats{}, err
		}
	}
	stats := plan.Stats{DenseBlocks: float64(p.DenseBlocks())}
	for _, t := range scratch {
		if t.err != nil {
			return nil, plan.Stats{}, t.err
		}
		stats.Add(t.stats)
	}
	return out, stats, nil
}

// stackedHeads is how many query heads of a GQA group share each tile: the
// whole group when its queries fit in one block together and every head of
// the group has the same plan row (as dense decode does), so that each key
// and value block is read once per group instead of once per head.
// Otherwise 1.
func stackedHeads(p *plan.Plan) int {
	g := p.Geometry
	if g.Group() == 1 || g.Nq*g.Group() > p.BlockQ || p.Order != nil || p.Filter != nil || p.Stop != nil || p.Init != nil {
		return 1 // the λ filter and the stop rule decide per head's query block
	}
	for b := range g.B {
		for h := range g.Hq {
			if h%g.Group() == 0 {
				continue
			}
			for qb := range p.QBlocks() {
				r0, r := p.Row(b, h-h%g.Group(), qb), p.Row(b, h, qb)
				b0, l0 := p.Entries(r0)
				b1, l1 := p.Entries(r)
				if !slices.Equal(b0, b1) || !slices.Equal(l0, l1) {
					return 1
				}
			}
		}
	}
	return g.Group()
}

// pool runs f(t, i) for i in [0, n), each worker with its own tile, and
// stops early when ctx is canceled.
func pool(ctx context.Context, n int, scratch []*tile, f func(t *tile, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, t := range scratch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				f(t, i)
			}
		}()
	}
	wg.Wait()
}

// minSplitBlocks is the fewest KV blocks worth a split of their own.
const minSplitBlocks = 8

// splitCount is how many parts each row's KV blocks are cut into so that
// about two tasks per worker exist. Rows under a stop rule are never split:
// the rule needs them in order, nor rows resuming an Init plan's states,
// nor rows under a λ filter: SpargeAttn's rule (§3.4) compares each block's
// row maxima with the running maxima of all the blocks before it in the
// row, and a part that started from −∞ would keep P̃·V products the whole
// row skips, so the output and the counters would depend on the number of
// workers.
func splitCount(p *plan.Plan, tasks, workers int) int {
	if p.Stop != nil || p.Init != nil || p.Filter != nil || tasks >= 2*workers {
		return 1
	}
	longest := 0
	for r := range p.Rows() {
		longest = max(longest, p.RowStart[r+1]-p.RowStart[r])
	}
	return max(1, min((2*workers+tasks-1)/tasks, longest/minSplitBlocks))
}

// allGathered reports whether every row of p (and of its Init plan) reads
// its keys by token index, so that no KV head needs packing.
func allGathered(p *plan.Plan) bool {
	for ; p != nil; p = p.Init {
		o := p.Order
		if o == nil {
			return false
		}
		if o.Query == nil {
			if o.RowKV == nil || slices.Contains(o.RowKV, -1) {
				return false
			}
		}
	}
	return true
}

func maxLevel(p *plan.Plan) plan.Level {
	top := plan.Full
	for _, l := range p.Level {
		top = max(top, l)
	}
	return top
}
