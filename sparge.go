package sparseattn

import (
	"context"

	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/tensor"
)

// Sparge computes SpargeAttn sparse attention of q [B, Hq, Nq, D], k
// [B, Hkv, Nk, D] and v [B, Hkv, Nk, Dv]. The result carries the plan and
// the executor's counters: Stats.QKBlocks is the work left by M_g,
// Stats.PVBlocks that left after the λ filter too, and Stats.Sparsity() the
// combined skipped fraction. Bad hyperparameters give errors wrapping
// sparge.ErrParams; bad shapes and options those of Attention.
func Sparge(ctx context.Context, q, k, v *tensor.Tensor, opts sparge.Options) (*Result, error) {
	p := sparge.Planner{Params: opts.Params, Heads: opts.Heads, RowGroup: opts.RowGroup, Sink: opts.Sink}
	bq, bk := opts.BlockQ, opts.BlockK
	if bq == 0 {
		bq = sparge.DefaultBlockQ
	}
	if bk == 0 {
		bk = sparge.DefaultBlockK
	}
	return Attention(ctx, q, k, v, Options{
		Causal: opts.Causal, Scale: opts.Scale, Planner: p, BlockQ: bq, BlockK: bk, Workers: opts.Workers,
	})
}
