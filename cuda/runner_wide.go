package cuda

import "github.com/sparseattn/sparseattn/plan"

// widen moves a dense runner to its tiling's wideDense blocks where the
// kernel chosen for them computes 128-key tiles (unless Tactics.DenseNarrowTiles),
// and keeps it as it is otherwise.
func (r *Runner) widen() {
	wt, ok := wideDense(r.t)
	if !ok {
		return
	}
	h, err := r.planner.header(wt)
	if err != nil {
		return
	}
	t, hdr := r.t, r.header
	r.t, r.header = wt, h // not yet shared: NewRunner's
	if v, err := r.variant(r.outType()); err != nil || !v.ws || v.kt != 128 {
		r.t, r.header = t, hdr
		return
	}
	r.askedN, r.dense = r.dense, h.DenseBlocks()
}

// wideDense returns t with 128-key blocks for its dense pass, when t's
// blocks are 64 keys wide under 128-row query blocks: the shape whose
// dense pass the warp-specialized kernel runs in 128-key tiles once its
// blocks are that wide.
func wideDense(t plan.Tiling) (plan.Tiling, bool) {
	if t.BlockK != 64 || t.BlockQ != 128 {
		return t, false
	}
	t.BlockK = 128
	return t, t.Validate() == nil
}

// askedStats restates s, counted in the blocks the kernels ran, in the
// caller's blocks: the same share of a dense pass. Counters of the
// caller's own tiling pass through.
func (r *Runner) askedStats(s plan.Stats) plan.Stats {
	if r.askedN == 0 || s.DenseBlocks <= 0 {
		return s
	}
	n := float64(r.askedN)
	scale := func(x float64) float64 {
		if x == s.DenseBlocks {
			return n // the whole pass, exactly
		}
		return x / s.DenseBlocks * n
	}
	s.QKBlocks, s.PVBlocks, s.DenseBlocks = scale(s.QKBlocks), scale(s.PVBlocks), n
	return s
}

// Name is the planner's name ("dense" without one).
func (r *Runner) Name() string { return r.name }
