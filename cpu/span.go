package cpu

import "github.com/sparseattn/sparseattn/plan"

// spanKeys is the most keys one step of a decode-like run (keys and values
// read in place) folds at once: consecutive visible blocks of a row are
// taken together, up to this many keys, so that each step reads a longer
// run of keys, then of values, and pays the per-block calls once. Measured
// on the 2-core AVX-512 machine (BENCHMARKS.md, issue 16), decode at 4K
// and 16K keys, D=128, spans of 256, 512 and 1024 keys against 64-key
// blocks in one process: 1.10–1.14×, 1.12–1.17× and 1.12–1.18×, MHA and
// GQA alike.
const spanKeys = 512

// spanning reports whether the run folds consecutive KV blocks in spans
// (span): keys and values read in place, and no plan feature that decides
// block by block (token orders, the λ filter, the stop rule) in the plan
// or in its Init plan, whose pass runs with the same setting.
func (r *run) spanning(noSpans bool) bool {
	if noSpans || r.kRows == nil || r.vRows == nil {
		return false
	}
	for p := r.p; p != nil; p = p.Init {
		if p.Order != nil || p.Filter != nil || p.Stop != nil {
			return false
		}
	}
	return true
}

// span extends blk, the in-place KV block blocks[0] of query block qb
// (head h, batch b), over the blocks listed after it while they are the
// next ones in the key sequence, whole (not the last, ragged block unless
// at the end), fully visible and at level Full, up to spanKeys keys and as
// many as the tile's logits hold for nq rows. It returns the block that
// covers them all and how many plan entries it covers. Folding a span is
// the online softmax over its keys at once: the result is that of the
// blocks one by one up to float32 rounding (a different row maximum per
// step).
func (r *run) span(b, h, qb, nq int, blk keyBlock, blocks []int32, levels []plan.Level) (keyBlock, int) {
	p := r.p
	most := min(len(blocks), max(1, spanKeys/p.BlockK), p.BlockQ/max(1, nq))
	kb0 := int(blocks[0])
	n := 1
	for ; n < most && !blk.partial && blk.n == n*p.BlockK; n++ {
		kb := kb0 + n
		if int(blocks[n]) != kb || levels != nil && levels[n] != plan.Full {
			break
		}
		if _, partial := p.BlockVisibility(qb, kb); partial {
			break
		}
		blk.n += r.head(b, h).levels[0].n[kb]
	}
	return blk, n
}
