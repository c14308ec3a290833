// Package sparseattn computes training-free sparse attention: a planner
// looks at Q and K and decides which blocks of the attention matrix to
// compute, and an executor runs a FlashAttention-style online softmax over
// only those blocks.
//
// The subpackages split the work one concept each:
//
//	tensor      [B, H, N, D] tensors in float32, float16 and bfloat16
//	tensorfile  .safetensors, .npy and .npz reading and writing
//	plan        the one plan format every method shares, and its counters
//	method/...  planners: window (sink + local), oracle (exact TopCdf)
//	cpu         the CPU executor
//	reference   a float64 naive attention for tests
//	metrics     error metrics and dense-equivalent throughput
//	workload    seeded generators of realistic Q/K/V
//
// Attention is the one-call entry point over all of them.
package sparseattn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Default block sizes: 64×64 tiles keep a D=128 head's query, key, value
// and logit tiles inside a 256 KiB L2 share per core.
const (
	DefaultBlockQ = 64
	DefaultBlockK = 64
)

// ErrOptions reports an out-of-range option.
var ErrOptions = errors.New("sparseattn: bad option")

// Options configure Attention. The zero value is dense, non-causal
// attention with scale 1/sqrt(D) on every CPU.
type Options struct {
	// Causal masks keys after each query, token-exact. Queries are taken to
	// be the last Nq of the Nk tokens, so a single decode token sees all keys.
	Causal bool
	// Scale multiplies QKᵀ before the softmax; 0 means 1/sqrt(D).
	Scale float32
	// Planner decides which blocks to compute; nil means dense.
	Planner plan.Planner
	// BlockQ and BlockK are the tile sizes; 0 means DefaultBlockQ/K.
	BlockQ, BlockK int
	// Workers is the number of CPU goroutines; 0 means GOMAXPROCS.
	Workers int
	// SkipFiniteCheck skips the scan that rejects NaN and Inf inputs.
	SkipFiniteCheck bool
}

// Result is the output of Attention with what it cost.
type Result struct {
	Out      *tensor.Tensor // [B, Hq, Nq, Dv], float32, BHND
	Plan     *plan.Plan     // the plan that ran
	Stats    plan.Stats     // work the executor really did; Stats.Sparsity() is the skipped fraction
	PlanTime time.Duration  // time spent predicting the plan
	RunTime  time.Duration  // time spent executing it
}

// Attention computes softmax(scale·QKᵀ)·V for q [B, Hq, Nq, D], k [B, Hkv,
// Nk, D] and v [B, Hkv, Nk, Dv], with Hkv dividing Hq, over the blocks the
// options' planner selects. Bad shapes, options and non-finite inputs give
// errors that wrap tensor.ErrShape, ErrOptions, plan.ErrInvalid or
// tensor.ErrNonFinite.
func Attention(ctx context.Context, q, k, v *tensor.Tensor, opts Options) (*Result, error) {
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		return nil, err
	}
	if opts.Scale < 0 || math.IsNaN(float64(opts.Scale)) || math.IsInf(float64(opts.Scale), 0) {
		return nil, fmt.Errorf("%w: scale %v must be positive and finite (0 for 1/sqrt(D))", ErrOptions, opts.Scale)
	}
	if opts.BlockQ < 0 || opts.BlockK < 0 || opts.BlockQ > plan.MaxBlock || opts.BlockK > plan.MaxBlock {
		return nil, fmt.Errorf("%w: block sizes %d×%d must be in 0..%d", ErrOptions, opts.BlockQ, opts.BlockK, plan.MaxBlock)
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("%w: workers %d must be ≥ 0", ErrOptions, opts.Workers)
	}
	if !opts.SkipFiniteCheck {
		for _, in := range []struct {
			name string
			t    *tensor.Tensor
		}{{"q", q}, {"k", k}, {"v", v}} {
			if err := in.t.CheckFinite(in.name); err != nil {
				return nil, err
			}
		}
	}
	t := plan.Tiling{Geometry: g, Causal: opts.Causal, BlockQ: opts.BlockQ, BlockK: opts.BlockK, Scale: opts.Scale}
	if t.BlockQ == 0 {
		t.BlockQ = DefaultBlockQ
	}
	if t.BlockK == 0 {
		t.BlockK = DefaultBlockK
	}
	planner := opts.Planner
	if planner == nil {
		planner = plan.DensePlanner{}
	}

	start := time.Now()
	p, err := planner.Plan(ctx, t, q, k, v)
	if err != nil {
		return nil, fmt.Errorf("planning with %s: %w", planner.Name(), err)
	}
	if p == nil || p.Geometry != g || p.Causal != t.Causal || p.SoftmaxScale() != t.SoftmaxScale() {
		return nil, fmt.Errorf("%w: %s returned a plan for another problem", plan.ErrInvalid, planner.Name())
	}
	planned := time.Now()
	out, stats, err := cpu.Executor{Workers: opts.Workers}.Run(ctx, p, q, k, v, nil)
	if err != nil {
		return nil, fmt.Errorf("executing %s plan: %w", planner.Name(), err)
	}
	return &Result{Out: out, Plan: p, Stats: stats, PlanTime: planned.Sub(start), RunTime: time.Since(planned)}, nil
}
