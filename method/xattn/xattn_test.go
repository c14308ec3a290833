package xattn

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

type shape struct {
	plantest.Shape
	stride int // S, the antidiagonal stride
}

// shapes: GQA, ragged last groups and blocks, N below a block, chunked
// prefill, more queries than keys, non-causal, unequal block sizes.
var shapes = []shape{
	{plantest.Shape{Name: "causal-gqa", B: 1, Hq: 4, Hkv: 2, Nq: 256, Nk: 256, D: 64, BlockQ: 32, BlockK: 32, Causal: true, Heavy: true}, 8},
	{plantest.Shape{Name: "ragged", B: 1, Hq: 2, Hkv: 1, Nq: 203, Nk: 203, D: 32, BlockQ: 32, BlockK: 16, Causal: true}, 4},
	{plantest.Shape{Name: "below-block", B: 1, Hq: 1, Hkv: 1, Nq: 11, Nk: 11, D: 32, BlockQ: 16, BlockK: 16, Causal: true}, 8},
	{plantest.Shape{Name: "chunked-prefill", B: 2, Hq: 2, Hkv: 1, Nq: 70, Nk: 190, D: 48, BlockQ: 16, BlockK: 32, Causal: true}, 8},
	{plantest.Shape{Name: "more-queries-than-keys", B: 1, Hq: 1, Hkv: 1, Nq: 60, Nk: 20, D: 32, BlockQ: 16, BlockK: 16, Causal: true}, 4},
	{plantest.Shape{Name: "noncausal", B: 1, Hq: 2, Hkv: 2, Nq: 150, Nk: 130, D: 40, BlockQ: 32, BlockK: 16}, 16},
}

// inputs draws a problem of shape s, q and k with standard deviation 1.5.
func inputs(t *testing.T, s shape) (q, k, v *tensor.Tensor, tl plan.Tiling) {
	pr := s.Problem(t, testutil.Rand(t), 1.5, 1.5)
	return pr.Q, pr.K, pr.V, pr.Tiling
}

// naiveMass computes XAttention's block estimate in float64 straight from
// its definition: antidiagonal sums Σ_u q[iS+S−1−u]·k[jS+u] over existing
// tokens, times scale/S, soft-maxed over the key groups whose first key
// the group's first query sees, summed per block.
func naiveMass(p *plan.Plan, q, k *tensor.Tensor, b, h, s int) [][]float64 {
	g := p.Geometry
	scale := 1 / math.Sqrt(float64(g.D)) / float64(s)
	qg, kg := (g.Nq+s-1)/s, (g.Nk+s-1)/s
	mass := make([][]float64, p.QBlocks())
	for i := range mass {
		mass[i] = make([]float64, p.KBlocks())
	}
	for i := range qg {
		var logits []float64
		for j := range kg {
			if p.Causal && j*s > i*s+g.QueryOffset() {
				break
			}
			var a float64
			for u := range s {
				qi, kj := i*s+s-1-u, j*s+u
				if qi >= g.Nq || kj >= g.Nk {
					continue
				}
				for d := range g.D {
					a += float64(q.At(b, h, qi, d)) * float64(k.At(b, g.KVHead(h), kj, d))
				}
			}
			logits = append(logits, a*scale)
		}
		if len(logits) == 0 {
			continue
		}
		mx := slices.Max(logits)
		var sum float64
		for _, l := range logits {
			sum += math.Exp(l - mx)
		}
		for j, l := range logits {
			mass[i*s/p.BlockQ][j*s/p.BlockK] += math.Exp(l-mx) / sum
		}
	}
	return mass
}

// TestPlanMatchesNaiveEquations checks the block estimate against the
// float64 definition (1e-5 absolute: float32 dot products of S·D ≤ 2048
// terms of unit-scale logits, then a softmax of probabilities ≤ 1), and
// each row against the threshold rule evaluated on the float64 masses:
// forced blocks kept, kept mass ≥ τ·total, and no unkept block heavier than
// the lightest unforced kept one, which alone would have left the mass
// below τ·total.
func TestPlanMatchesNaiveEquations(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, _, tl := inputs(t, s)
			const tau = 0.8
			x := Planner{Stride: s.stride, Threshold: tau}
			p, err := x.Plan(context.Background(), tl, q, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			dense, _ := plan.Dense(tl)
			g := tl.Geometry
			const tol = 1e-5
			for b := range g.B {
				for h := range g.Hq {
					want := naiveMass(dense, q, k, b, h, s.stride)
					got := x.blockMass(dense, q, k, b, h, new(scratch))
					for qb := range want {
						for kb := range want[qb] {
							if math.Abs(want[qb][kb]-got[qb][kb]) > tol {
								t.Fatalf("head %d block (%d,%d): mass %.8f, float64 %.8f", h, qb, kb, got[qb][kb], want[qb][kb])
							}
						}
						visible, _ := dense.Entries(dense.Row(b, h, qb))
						kept, _ := p.Entries(p.Row(b, h, qb))
						if len(visible) == 0 {
							continue
						}
						var total, have float64
						for _, kb := range visible {
							total += want[qb][kb]
						}
						lightest := math.Inf(1)
						for _, kb := range kept {
							have += want[qb][kb]
							forced := s.Causal && (kb == 0 || kb == visible[len(visible)-1])
							if !forced {
								lightest = min(lightest, want[qb][kb])
							}
						}
						if s.Causal && (!slices.Contains(kept, 0) || !slices.Contains(kept, visible[len(visible)-1])) {
							t.Fatalf("head %d q block %d: kept %v lacks the sink or diagonal block", h, qb, kept)
						}
						if have < tau*total-tol {
							t.Fatalf("head %d q block %d: kept mass %.5f < τ·total %.5f", h, qb, have, tau*total)
						}
						if !math.IsInf(lightest, 1) && have-lightest >= tau*total+tol {
							t.Fatalf("head %d q block %d: kept mass without its lightest block %.5f still ≥ τ·total %.5f", h, qb, have-lightest, tau*total)
						}
						for _, kb := range visible {
							if !slices.Contains(kept, kb) && want[qb][kb] > lightest+tol {
								t.Fatalf("head %d q block %d: dropped block %d (%.5f) heavier than kept %.5f", h, qb, kb, want[qb][kb], lightest)
							}
						}
					}
				}
			}
		})
	}
}

// TestThresholdOneIsDense: the threshold is the method's knob; kept blocks
// grow monotonically with it (the kept set is a prefix of one fixed order)
// and at 1 the output is dense attention within the float32 executor's
// tolerance against the float64 reference (2e-5 absolute).
func TestThresholdOneIsDense(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, v, tl := inputs(t, s)
			ref := plantest.Reference(t, q, k, v, s.Causal)
			prev := -1.0
			for _, tau := range []float64{0.5, 0.9, 0.99, 1} {
				p, err := Planner{Stride: s.stride, Threshold: tau}.Plan(context.Background(), tl, q, k, nil)
				if err != nil {
					t.Fatal(err)
				}
				out, stats := plantest.Run(t, p, q, k, v)
				if stats.QKBlocks < prev {
					t.Fatalf("τ=%v computed %v blocks, fewer than %v at a smaller τ", tau, stats.QKBlocks, prev)
				}
				prev = stats.QKBlocks
				if tau < 1 {
					continue
				}
				e := plantest.Compare(t, ref, out)
				if !(e.MaxAbs <= 2e-5) {
					t.Fatalf("τ=1: max abs error %.3g against dense", e.MaxAbs)
				}
			}
		})
	}
}

func TestRejectsBadOptions(t *testing.T) {
	q, k, _, tl := inputs(t, shapes[0])
	for _, x := range []Planner{
		{Stride: -8, Threshold: 0.9}, // 0 is DefaultStride
		{Stride: 3, Threshold: 0.9},  // does not divide 32
		{Stride: 8, Threshold: -0.5}, // 0 is DefaultThreshold
		{Stride: 8, Threshold: 1.1},
		{Stride: 8, Threshold: math.NaN()},
	} {
		if _, err := x.Plan(context.Background(), tl, q, k, nil); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%+v: got %v, want plan.ErrInvalid", x, err)
		}
	}
	if _, err := (Planner{Stride: 8, Threshold: 0.9}).Plan(context.Background(), tl, nil, k, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("nil q: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Planner{Stride: 8, Threshold: 0.9}).Plan(ctx, tl, q, k, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}
