package minference

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/internal/probe"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// shapes are the awkward cases of the probing planners.
var shapes = plantest.Prefill()

// inputs draws a problem of shape s, q and k with standard deviation 1.5.
func inputs(t *testing.T, s plantest.Shape) (q, k, v *tensor.Tensor, tl plan.Tiling) {
	pr := s.Problem(t, testutil.Rand(t), 1.5, 1.5)
	return pr.Q, pr.K, pr.V, pr.Tiling
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
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, _, tl := inputs(t, s)
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
					for i := range pr.Len() {
						for j, x := range pr.Row(i, nil) {
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
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, v, tl := inputs(t, s)
			prev := -1.0
			var out *tensor.Tensor
			for _, n := range []int{1, 10, 50, s.Nk} {
				p, err := Planner{LastQ: 64, Vertical: n, Slash: n}.Plan(context.Background(), tl, q, k, nil)
				if err != nil {
					t.Fatal(err)
				}
				var stats plan.Stats
				out, stats = plantest.Run(t, p, q, k, v)
				if stats.QKBlocks < prev {
					t.Fatalf("budget %d computed %v blocks, fewer than %v at a smaller budget", n, stats.QKBlocks, prev)
				}
				prev = stats.QKBlocks
			}
			ref := plantest.Reference(t, q, k, v, s.Causal)
			e := plantest.Compare(t, ref, out)
			if !(e.MaxAbs <= 2e-5) {
				t.Fatalf("full budget: max abs error %.3g against dense", e.MaxAbs)
			}
		})
	}
}

func TestRejectsBadOptions(t *testing.T) {
	q, k, _, tl := inputs(t, shapes[0])
	for _, m := range []Planner{{LastQ: -1}, {Vertical: -3}, {Slash: -1}, {Budget: 1.5}, {Budget: -0.5}, {Budget: math.NaN()}} {
		if _, err := m.Plan(context.Background(), tl, q, k, nil); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%+v: got %v, want plan.ErrInvalid", m, err)
		}
	}
	if _, err := (Planner{LastQ: 64, Vertical: 10, Slash: 10}).Plan(context.Background(), tl, k, q, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("swapped q and k: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Planner{LastQ: 64, Vertical: 10, Slash: 10}).Plan(ctx, tl, q, k, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

// The zero value takes MInference's 128K line counts scaled to the keys,
// with at least one vertical line per probe query (or per key, when there
// are fewer keys), and plans exactly as those explicit counts do.
func TestDefaultsScaleWithLength(t *testing.T) {
	for _, nk := range []int{1, 100, 4096, 32 << 10, DefaultLength, 1 << 20} {
		m := Planner{}.ForLength(nk)
		wantV := max(min(DefaultLastQ, nk), int(math.Ceil(float64(DefaultVertical)*float64(nk)/DefaultLength)))
		wantS := max(1, int(math.Ceil(float64(DefaultSlash)*float64(nk)/DefaultLength)))
		if m.LastQ != DefaultLastQ || m.Vertical != wantV || m.Slash != wantS {
			t.Errorf("Nk %d: %+v, want LastQ %d, Vertical %d, Slash %d", nk, m, DefaultLastQ, wantV, wantS)
		}
		if half := (Planner{Budget: 0.5}).ForLength(nk); half.Vertical != max(1, wantV/2) || half.Slash != max(1, wantS/2) {
			t.Errorf("Nk %d, budget 0.5: %+v", nk, half)
		}
	}
	q, k, _, tl := inputs(t, shapes[0])
	zero, err := Planner{}.Plan(context.Background(), tl, q, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := Planner{}.ForLength(tl.Geometry.Nk).Plan(context.Background(), tl, q, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(zero, explicit) {
		t.Error("the zero value plans differently from its explicit defaults")
	}
}
