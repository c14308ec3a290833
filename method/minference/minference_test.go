package minference

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/internal/probe"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

type shape struct {
	name       string
	b, hq, hkv int
	nq, nk, d  int
	bq, bk     int
	causal     bool
}

var shapes = []shape{
	{"causal-gqa", 1, 4, 2, 300, 300, 64, 32, 32, true},
	{"ragged-unequal-blocks", 1, 2, 1, 203, 203, 32, 16, 32, true},
	{"below-block", 1, 1, 1, 11, 11, 32, 16, 16, true},
	{"chunked-prefill", 2, 2, 1, 70, 190, 48, 16, 16, true},
	{"more-queries-than-keys", 1, 1, 1, 60, 20, 32, 16, 16, true},
	{"noncausal", 1, 2, 2, 150, 130, 40, 32, 16, false},
}

// testShapes is shapes, less the largest under -short (the race detector
// makes the float64 references slow); every property stays covered.
func testShapes() []shape {
	if !testing.Short() {
		return shapes
	}
	return shapes[1:]
}

func (s shape) inputs(t *testing.T) (q, k, v *tensor.Tensor, tl plan.Tiling) {
	r := testutil.Rand(t)
	q = testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: s.b, H: s.hq, N: s.nq, D: s.d}, 1.5)
	k = testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: s.b, H: s.hkv, N: s.nk, D: s.d}, 1.5)
	v = testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: s.b, H: s.hkv, N: s.nk, D: s.d}, 1)
	g := tensor.Geometry{B: s.b, Hq: s.hq, Hkv: s.hkv, Nq: s.nq, Nk: s.nk, D: s.d, Dv: s.d}
	return q, k, v, plan.Tiling{Geometry: g, Causal: s.causal, BlockQ: s.bq, BlockK: s.bk}
}

// checkTop checks a top-k selection against its float64 scores: the
// forced lines come first (as many as fit), then no unkept unforced line
// outscores a kept unforced one, and the count is min(budget, candidates).
func checkTop(t *testing.T, what string, kept, candidates []int, score func(int) float64, forced func(int) bool, budget int) {
	t.Helper()
	if len(kept) != min(budget, len(candidates)) {
		t.Fatalf("%s: kept %d lines, want min(%d, %d)", what, len(kept), budget, len(candidates))
	}
	nForced := 0
	for _, c := range candidates {
		if forced(c) {
			nForced++
		}
	}
	lightest := 2.0 // scores are sums of probabilities over ≤ 64 probes, but kept ones come first
	keptSet := map[int]bool{}
	for i, c := range kept {
		keptSet[c] = true
		if i < min(nForced, budget) != forced(c) {
			t.Fatalf("%s: line %d at rank %d, forced=%v, but %d forced lines rank first", what, c, i, forced(c), nForced)
		}
		if !forced(c) {
			lightest = min(lightest, score(c))
		}
	}
	if len(kept) == len(candidates) || nForced >= budget {
		return
	}
	for _, c := range candidates {
		if !keptSet[c] && !forced(c) && score(c) > lightest {
			t.Fatalf("%s: line %d (score %v) dropped while a kept line scores %v", what, c, score(c), lightest)
		}
	}
}

// TestLinesAndBlocksMatchNaive: the vertical and slash lines are the top
// sums of the probe's attention (the probe itself is checked against
// float64 in package probe), and each row's blocks are exactly the visible
// blocks that hold a kept vertical key or a key on a kept diagonal of one
// of the block's queries, found token by token.
func TestLinesAndBlocksMatchNaive(t *testing.T) {
	for _, s := range testShapes() {
		t.Run(s.name, func(t *testing.T) {
			q, k, _, tl := s.inputs(t)
			m := Planner{LastQ: 16, Vertical: 40, Slash: 110}
			p, err := m.Plan(context.Background(), tl, q, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			dense, _ := plan.Dense(tl)
			g := tl.Geometry
			for b := range g.B {
				for h := range g.Hq {
					pr := probe.Last(tl, q, k, b, h, m.LastQ)
					l := m.Lines(pr)
					// Naive sums from the probabilities.
					vert := make(map[int]float64)
					slash := make(map[int]float64)
					for i, row := range pr.P {
						for j, x := range row {
							vert[j] += x
							slash[pr.Pos[i]-j] += x
						}
					}
					var keys, offs []int
					for j := range g.Nk {
						keys = append(keys, j)
					}
					for d := -(g.Nk - 1); d < g.Nk; d++ {
						if d >= 0 || slash[d] > 0 {
							offs = append(offs, d)
						}
					}
					checkTop(t, "vertical", l.Vertical, keys, func(j int) float64 { return vert[j] }, func(j int) bool { return j < SinkKeys }, m.Vertical)
					checkTop(t, "slash", l.Slash, offs, func(d int) float64 { return slash[d] }, func(d int) bool { return d >= 0 && d < RecentSlashes }, m.Slash)
					for qb := range dense.QBlocks() {
						visible, _ := dense.Entries(dense.Row(b, h, qb))
						var want []int32
						qlo, qhi := dense.QueryRange(qb)
						for _, kb := range visible {
							klo, khi := dense.KeyRange(int(kb))
							hit := false
							for j := klo; j < khi && !hit; j++ {
								hit = slices.Contains(l.Vertical, j)
								for i := qlo; i < qhi && !hit; i++ {
									hit = slices.Contains(l.Slash, i+g.QueryOffset()-j)
								}
							}
							if hit {
								want = append(want, kb)
							}
						}
						got, _ := p.Entries(p.Row(b, h, qb))
						if !slices.Equal(got, want) {
							t.Fatalf("head %d q block %d: blocks %v, want %v", h, qb, got, want)
						}
					}
				}
			}
		})
	}
}

// TestFullBudgetIsDense: the budget is the knob; larger budgets keep
// supersets (each selection is a prefix of one fixed order), and keeping
// every key as a vertical gives dense attention (2e-5 absolute, the float32
// executor's tolerance against the float64 reference).
func TestFullBudgetIsDense(t *testing.T) {
	for _, s := range testShapes() {
		t.Run(s.name, func(t *testing.T) {
			q, k, v, tl := s.inputs(t)
			prev := -1.0
			var out *tensor.Tensor
			for _, n := range []int{1, 10, 50, s.nk} {
				p, err := Planner{LastQ: 64, Vertical: n, Slash: n}.Plan(context.Background(), tl, q, k, nil)
				if err != nil {
					t.Fatal(err)
				}
				var stats plan.Stats
				if out, stats, err = (cpu.Executor{}).Run(context.Background(), p, q, k, v, nil); err != nil {
					t.Fatal(err)
				}
				if stats.QKBlocks < prev {
					t.Fatalf("budget %d computed %v blocks, fewer than %v at a smaller budget", n, stats.QKBlocks, prev)
				}
				prev = stats.QKBlocks
			}
			ref, err := reference.Attention(context.Background(), q, k, v, s.causal, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			e, err := metrics.Compare(ref, metrics.Tensor{Tensor: out})
			if err != nil {
				t.Fatal(err)
			}
			if !(e.MaxAbs <= 2e-5) {
				t.Fatalf("full budget: max abs error %.3g against dense", e.MaxAbs)
			}
		})
	}
}

func TestRejectsBadOptions(t *testing.T) {
	q, k, _, tl := shapes[0].inputs(t)
	for _, m := range []Planner{{0, 10, 10}, {64, 0, 10}, {64, 10, -1}} {
		if _, err := m.Plan(context.Background(), tl, q, k, nil); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%+v: got %v, want plan.ErrInvalid", m, err)
		}
	}
	if _, err := (Planner{64, 10, 10}).Plan(context.Background(), tl, k, q, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("swapped q and k: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Planner{64, 10, 10}).Plan(ctx, tl, q, k, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}
