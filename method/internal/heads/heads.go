// Package heads holds the plumbing every planner repeats: checking q and k
// against the tiling, and running independent per-head (or per-group) work
// on GOMAXPROCS goroutines with context cancellation.
package heads

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// CheckInputs reports, wrapping plan.ErrInvalid, a nil q or k or one whose
// shape is not the tiling's: q [B, Hq, Nq, D] and k [B, Hkv, Nk, D]. name
// is the planner's name, for the message.
func CheckInputs(t plan.Tiling, q, k *tensor.Tensor, name string) error {
	g := t.Geometry
	if q == nil || k == nil {
		return fmt.Errorf("%w: %s needs Q and K", plan.ErrInvalid, name)
	}
	if s := q.Shape(); s != (tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.D}) {
		return fmt.Errorf("%w: %s: Q is %v, the tiling's geometry needs [B=%d H=%d N=%d D=%d]", plan.ErrInvalid, name, s, g.B, g.Hq, g.Nq, g.D)
	}
	if s := k.Shape(); s != (tensor.Shape{B: g.B, H: g.Hkv, N: g.Nk, D: g.D}) {
		return fmt.Errorf("%w: %s: K is %v, the tiling's geometry needs [B=%d H=%d N=%d D=%d]", plan.ErrInvalid, name, s, g.B, g.Hkv, g.Nk, g.D)
	}
	return nil
}

// ForEach calls fn(i) once for each i in [0, n), on min(GOMAXPROCS, n)
// goroutines taking indices in increasing order. Calls for different i run
// concurrently, so fn must only write state owned by its index. Once ctx is
// done no further call starts, and ForEach returns ctx.Err() after the
// running ones finish; it returns ctx.Err() too when ctx ends just after
// the last call.
func ForEach(ctx context.Context, n int, fn func(i int)) error {
	return ForEachWorker(ctx, n, func() func(int) { return fn })
}

// ForEachWorker is ForEach with per-goroutine state: each goroutine calls
// newWorker once, then the function it returns for each index it takes, so
// scratch buffers are allocated once per goroutine rather than per index.
func ForEachWorker(ctx context.Context, n int, newWorker func() func(i int)) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := newWorker()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				work(i)
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// SelectBlocks returns the plan of t that visits, at full level, the KV
// blocks each head keeps. For every head (b, h), in parallel through
// ForEach, perHead does the head's work on dense, the dense plan of t, and
// returns the function that picks query block qb's blocks from visible,
// the row's causally visible KV blocks; the plan visits them in the order
// picked.
func SelectBlocks(ctx context.Context, t plan.Tiling, perHead func(dense *plan.Plan, b, h int) func(qb int, visible []int32) []int32) (*plan.Plan, error) {
	return SelectBlocksWorker(ctx, t, func() func(*plan.Plan, int, int) func(int, []int32) []int32 { return perHead })
}

// SelectBlocksWorker is SelectBlocks with per-worker state: newWorker runs
// once in each worker goroutine and returns that worker's perHead, which
// may then keep scratch buffers from one head to the next.
func SelectBlocksWorker(ctx context.Context, t plan.Tiling, newWorker func() func(dense *plan.Plan, b, h int) func(qb int, visible []int32) []int32) (*plan.Plan, error) {
	dense, err := plan.Dense(t)
	if err != nil {
		return nil, err
	}
	g := t.Geometry
	kept := make([][]int32, dense.Rows())
	err = ForEachWorker(ctx, g.B*g.Hq, func() func(int) {
		perHead := newWorker()
		return func(i int) {
			b, h := i/g.Hq, i%g.Hq
			pick := perHead(dense, b, h)
			for qb := range dense.QBlocks() {
				r := dense.Row(b, h, qb)
				visible, _ := dense.Entries(r)
				kept[r] = pick(qb, visible)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return BuildKept(t, kept)
}

// BuildKept builds the plan of tiling t whose row r lists the KV blocks
// kept[r] (ascending), each at full resolution.
func BuildKept(t plan.Tiling, kept [][]int32) (*plan.Plan, error) {
	bld, err := plan.NewBuilder(t)
	if err != nil {
		return nil, err
	}
	for r, blocks := range kept {
		for _, kb := range blocks {
			bld.Add(r, int(kb), plan.Full)
		}
	}
	return bld.Build()
}

// Sentinel returns a sentinel error that reads msg and wraps
// plan.ErrInvalid, for a method whose bad settings have a sentinel of
// their own (sparge.ErrParams, auto.ErrPlan): every planner's bad
// settings then answer errors.Is(err, plan.ErrInvalid), and the method's
// own sentinel still tells them apart.
func Sentinel(msg string) error { return &sentinel{msg} }

// sentinel is Sentinel's error.
type sentinel struct{ msg string }

// Error returns the message.
func (e *sentinel) Error() string { return e.msg }

// Unwrap returns plan.ErrInvalid.
func (e *sentinel) Unwrap() error { return plan.ErrInvalid }
