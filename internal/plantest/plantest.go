// Package plantest is the test support the planner packages share: the
// awkward shapes every planner is checked on, random problems of a shape,
// and running a plan on cpu.Executor against the float64 reference.
package plantest

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// Shape is one test problem's geometry (with Dv = D) and tiling. A
// package whose cases need more parameters embeds it.
type Shape struct {
	Name           string
	B, Hq, Hkv     int
	Nq, Nk, D      int
	BlockQ, BlockK int
	Causal         bool
	// Heavy marks a shape that -short leaves out (see Select): the race
	// detector makes float64 references slow, and the other shapes still
	// cover every property.
	Heavy bool
}

func (s Shape) heavy() bool { return s.Heavy }

// Geometry returns the shape's geometry, with Dv = D.
func (s Shape) Geometry() tensor.Geometry {
	return tensor.Geometry{B: s.B, Hq: s.Hq, Hkv: s.Hkv, Nq: s.Nq, Nk: s.Nk, D: s.D, Dv: s.D}
}

// Tiling returns the shape's tiling, with the default softmax scale.
func (s Shape) Tiling() plan.Tiling {
	return plan.Tiling{Geometry: s.Geometry(), Causal: s.Causal, BlockQ: s.BlockQ, BlockK: s.BlockK}
}

// QShape is the shape of the queries, [B, Hq, Nq, D].
func (s Shape) QShape() tensor.Shape { return tensor.Shape{B: s.B, H: s.Hq, N: s.Nq, D: s.D} }

// KVShape is the shape of the keys and values, [B, Hkv, Nk, D].
func (s Shape) KVShape() tensor.Shape { return tensor.Shape{B: s.B, H: s.Hkv, N: s.Nk, D: s.D} }

// Problem is a tiling with its float32 BHND inputs.
type Problem struct {
	Tiling  plan.Tiling
	Q, K, V *tensor.Tensor
}

// Problem draws q, k and v for the shape, in that order, i.i.d. Gaussian
// with standard deviations qSigma, kSigma and 1: a larger sigma makes the
// attention peakier, so that block selection matters.
func (s Shape) Problem(t testing.TB, r *rand.Rand, qSigma, kSigma float64) Problem {
	t.Helper()
	return Problem{
		Tiling: s.Tiling(),
		Q:      testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s.QShape(), qSigma),
		K:      testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s.KVShape(), kSigma),
		V:      testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s.KVShape(), 1),
	}
}

// Awkward returns the shapes every block planner must handle: ragged last
// blocks, N below one block, head dims 32–256, GQA up to 4:1, batch 2,
// non-causal attention, Nq < Nk with causal bottom-right alignment, and
// Nq > Nk (the first queries see no key).
func Awkward() []Shape {
	return []Shape{
		{"square-causal", 1, 2, 1, 128, 128, 32, 16, 16, true, false},
		{"ragged-causal-gqa", 1, 4, 2, 100, 100, 64, 16, 32, true, false},
		{"ragged-bidirectional", 2, 2, 2, 77, 77, 32, 16, 16, false, false},
		{"n-below-block", 1, 2, 1, 10, 10, 32, 64, 64, true, false},
		{"suffix-queries", 1, 2, 1, 40, 130, 32, 16, 16, true, false},
		{"more-queries-than-keys", 1, 2, 1, 70, 40, 32, 16, 16, true, false}, // the first 30 queries see no key
		{"d256", 1, 1, 1, 64, 64, 256, 16, 16, false, false},
		{"d128-gqa4", 1, 4, 1, 96, 96, 128, 32, 32, true, false},
	}
}

// Prefill returns the shapes for planners that probe the last queries of
// each head (MInference, FlexPrefill): a long GQA head (heavy), ragged
// blocks with BlockQ ≠ BlockK, N below one block, chunked prefill
// (batch 2, Nq < Nk), Nq > Nk, and non-causal Nq ≠ Nk with GQA.
func Prefill() []Shape {
	return []Shape{
		{"causal-gqa", 1, 8, 2, 300, 300, 64, 32, 32, true, true},
		{"ragged-unequal-blocks", 1, 4, 1, 203, 203, 32, 16, 32, true, false},
		{"below-block", 1, 2, 1, 11, 11, 32, 16, 16, true, false},
		{"chunked-prefill", 2, 2, 1, 70, 190, 48, 16, 16, true, false},
		{"more-queries-than-keys", 1, 2, 1, 60, 20, 32, 16, 16, true, false},
		{"noncausal", 1, 4, 2, 150, 130, 40, 32, 16, false, false},
	}
}

// Select returns all, less the shapes marked Heavy when tests run with
// -short. S is Shape or a package's own type embedding it.
func Select[S interface{ heavy() bool }](all []S) []S {
	if !testing.Short() {
		return all
	}
	var out []S
	for _, s := range all {
		if !s.heavy() {
			out = append(out, s)
		}
	}
	return out
}

// Run executes p on cpu.Executor with default options, failing t on error.
func Run(t testing.TB, p *plan.Plan, q, k, v *tensor.Tensor) (*tensor.Tensor, plan.Stats) {
	t.Helper()
	out, st, err := cpu.Executor{}.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

// Reference is dense attention in float64 (reference.Attention with the
// default scale and no weight), failing t on error.
func Reference(t testing.TB, q, k, v *tensor.Tensor, causal bool) *reference.Output {
	t.Helper()
	ref, err := reference.Attention(context.Background(), q, k, v, causal, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// Compare returns out's errors against ref, failing t on error.
func Compare(t testing.TB, ref metrics.Rows, out *tensor.Tensor) metrics.Errors {
	t.Helper()
	e, err := metrics.Compare(ref, metrics.Tensor{Tensor: out})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
