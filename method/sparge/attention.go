package sparge

import (
	"context"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/tensor"
)

// Options configure Attention. The zero value is non-causal SpargeAttn with
// the defaults: top-k 0.5, θ = DefaultTheta, no λ filter, 128×64 blocks.
type Options struct {
	// Params apply to every query head (see Params for the defaults).
	Params
	// Heads, when non-nil, gives each query head its own hyperparameters,
	// as a tuned profile does (tune.Layer.Heads); it overrides Params.
	Heads []Params
	// Causal masks keys after each query, token-exact; queries are the last
	// Nq of the Nk tokens.
	Causal bool
	// Scale multiplies QKᵀ before the softmax; 0 means 1/sqrt(D).
	Scale float32
	// BlockQ and BlockK are the tile sizes; 0 means DefaultBlockQ/K.
	BlockQ, BlockK int
	// RowGroup and Sink are as in Planner.
	RowGroup int
	Sink     bool
	// Workers is the number of CPU goroutines; 0 means GOMAXPROCS.
	Workers int
}

// Attention computes SpargeAttn sparse attention of q [B, Hq, Nq, D], k
// [B, Hkv, Nk, D] and v [B, Hkv, Nk, Dv]. The result carries the plan and
// the executor's counters: Stats.QKBlocks is the work left by M_g,
// Stats.PVBlocks that left after the λ filter too, and Stats.Sparsity() the
// combined skipped fraction. Bad hyperparameters give errors wrapping
// ErrParams; bad shapes and options those of sparseattn.Attention.
func Attention(ctx context.Context, q, k, v *tensor.Tensor, opts Options) (*sparseattn.Result, error) {
	p := Planner{Params: opts.Params, Heads: opts.Heads, RowGroup: opts.RowGroup, Sink: opts.Sink}
	bq, bk := opts.BlockQ, opts.BlockK
	if bq == 0 {
		bq = DefaultBlockQ
	}
	if bk == 0 {
		bk = DefaultBlockK
	}
	return sparseattn.Attention(ctx, q, k, v, sparseattn.Options{
		Causal: opts.Causal, Scale: opts.Scale, Planner: p, BlockQ: bq, BlockK: bk, Workers: opts.Workers,
	})
}
