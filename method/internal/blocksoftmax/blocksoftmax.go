// Package blocksoftmax adds a row's softmax weights to per-block masses
// exactly as plan.AddBlockSoftmax does, bit for bit, with the block maxima,
// the shifts and the canonical exponentials computed eight at a time
// (kernel.BlockMaxShift, kernel.Exp64s) instead of one plan.Exp64 call
// after another. The planners whose device twins repeat
// plan.AddBlockSoftmax (xattn, unisparse) call it in their hot loops.
package blocksoftmax

import (
	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/plan"
)

// Scratch holds one worker's buffers; the zero value is ready to use. A
// Scratch is not safe for concurrent use.
type Scratch struct {
	x      []float64 // shifted logits, then their exponentials
	mb, eb []float64 // block maxima and sums
	t      []float64 // mb − m, then Exp64 of it
}

// Add adds to mass[kb] the canonical softmax weight of the logits l of one
// query row, grouped in consecutive blocks of per logits (kb = j/per):
// plan.AddBlockSoftmax(mass, l, per, …), bit for bit. Every float64 value
// that reaches mass is computed as there: each block's maximum mb, its
// shifted logits' Exp64 summed in increasing j from +0, the block sums
// times Exp64(mb − m), their plan.Sum64, then one division and add per
// block. Only the order in which independent values are computed differs.
// A maximum here may be a zero of the other sign than the comparison loop
// finds, which changes no shift's Exp64 (Exp64(−0) = Exp64(+0) = 1, and
// x − (±0) = x otherwise); a row whose sum comes out NaN (a NaN logit, or
// +Inf) is redone by plan.AddBlockSoftmax itself, so NaN rows match too.
// per must be positive and mass hold ⌈len(l)/per⌉ values.
func (s *Scratch) Add(mass, l []float64, per int) {
	nb := (len(l) + per - 1) / per
	if nb == 0 {
		return
	}
	s.x, s.mb, s.eb, s.t = grow(s.x, len(l)), grow(s.mb, nb), grow(s.eb, nb), grow(s.t, nb)
	x, mb, eb, t := s.x, s.mb, s.eb, s.t
	full := len(l) / per
	kernel.BlockMaxShift(x, l[:full*per], per, mb)
	if full < nb { // the ragged last block
		blk := l[full*per:]
		bm := blk[0]
		for _, v := range blk[1:] {
			bm = max(bm, v)
		}
		mb[full] = bm
		for j, v := range blk {
			x[full*per+j] = v - bm
		}
	}
	m := mb[0]
	for _, bm := range mb[1:] {
		m = max(m, bm)
	}
	kernel.Exp64s(x, x)
	for kb := range nb {
		var e float64
		for _, v := range x[kb*per : min(len(l), (kb+1)*per)] {
			e += v
		}
		eb[kb] = e
		t[kb] = mb[kb] - m
	}
	kernel.Exp64s(t, t)
	for kb := range nb {
		eb[kb] *= t[kb]
	}
	sum := plan.Sum64(eb)
	if sum != sum {
		plan.AddBlockSoftmax(mass, l, per, mb, eb)
		return
	}
	for kb := range nb {
		mass[kb] += eb[kb] / sum
	}
}

// grow returns s resized to n, reallocated only when too small, then to
// at least twice its capacity: causal rows lengthen one block at a time.
func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n, max(n, 2*cap(s)))
	}
	return s[:n]
}
