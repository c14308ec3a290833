package cpu

import (
	"context"
	"sync/atomic"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/tensor"
)

// finiteCheck is Executor.CheckFinite's state for one run: which key and
// value blocks have been checked, and whether a NaN or Inf was seen.
//
// Packed blocks are checked as they are packed, row by row in cache. Blocks
// read in place (float32 decode) are never read twice: a NaN or Inf in a
// key makes its logit NaN or ±Inf whatever the (finite) query — q·Inf is
// ±Inf, 0·Inf is NaN, and they survive the sum — and one in a value makes
// every output row that folds the block NaN or ±Inf, since P·V multiplies
// every probability, zeros included. So the executor tests the block's
// logits before masking and the rows' accumulators after P·V, both small
// and in L1, and marks the block checked. The blocks no worker verified are
// checked at the end. A NaN or Inf seen anywhere is then located by
// tensor.CheckFiniteAll; when that finds none, the inputs were finite and
// an intermediate overflowed, which the run reports as before.
type finiteCheck struct {
	kblocks int
	done    []atomic.Uint32 // per b·Hkv+kh, kb: bit 0 keys checked, bit 1 values checked
	bad     atomic.Bool
}

const (
	checkedK = 1 << iota
	checkedV
)

func newFiniteCheck(g tensor.Geometry, kblocks int) *finiteCheck {
	return &finiteCheck{kblocks: kblocks, done: make([]atomic.Uint32, g.B*g.Hkv*kblocks)}
}

// row records a NaN or Inf in x, one input row as the executor read it
// (converted to float32, which keeps NaN and Inf).
func (c *finiteCheck) row(x []float32) {
	if kernel.FirstNonFinite32(x) >= 0 {
		c.bad.Store(true)
	}
}

// claim marks the parts (bits) of block kb of KV head b·Hkv+kh checked and
// returns those that were not checked before.
func (c *finiteCheck) claim(bkh, kb int, bits uint32) uint32 {
	f := &c.done[bkh*c.kblocks+kb]
	if f.Load()&bits == bits {
		return 0
	}
	return bits &^ f.Or(bits)
}

// block checks the rows [lo, hi) of KV head kh of batch b in t in place.
func (c *finiteCheck) block(t *tensor.Tensor, b, kh, lo, hi int) {
	if hi <= lo {
		return
	}
	d := t.Shape().D
	if t.DType() != tensor.Float32 {
		row := make([]float32, d)
		for j := lo; j < hi; j++ {
			t.ReadRow(b, kh, j, row)
			c.row(row)
		}
		return
	}
	x, stride := t.Float32s(), t.RowStride()
	if stride == d { // consecutive rows are contiguous (BHND)
		off := t.RowOffset(b, kh, lo)
		c.row(x[off : off+(hi-lo)*d])
		return
	}
	for j := lo; j < hi; j++ {
		off := t.RowOffset(b, kh, j)
		c.row(x[off : off+d])
	}
}

// rest checks every key and value block no worker has checked, on up to
// workers goroutines, after folding in the workers' own records.
func (r *run) checkRest(ctx context.Context, workers int, scratch []*tile) {
	c, g := r.check, r.g
	for _, t := range scratch {
		for i, bits := range t.checked {
			if bits != 0 {
				c.done[i].Or(bits)
			}
		}
	}
	all := true // the common case when the plan reads every block: nothing to start
	for i := range c.done {
		if c.done[i].Load() != checkedK|checkedV {
			all = false
			break
		}
	}
	if all {
		return
	}
	parallel(len(c.done), workers, func(i int) {
		if c.bad.Load() || ctx.Err() != nil {
			return
		}
		bkh, kb := i/c.kblocks, i%c.kblocks
		b, kh := bkh/g.Hkv, bkh%g.Hkv
		todo := c.claim(bkh, kb, checkedK|checkedV)
		lo, hi := r.p.KeyRange(kb)
		if todo&checkedK != 0 {
			c.block(r.k, b, kh, lo, hi)
		}
		if todo&checkedV != 0 {
			c.block(r.v, b, kh, lo, hi)
		}
	})
}
