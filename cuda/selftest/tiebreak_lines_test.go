package selftest

import (
	"context"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// items widens exact scores by rel into sure candidates (forced where
// listed).
func items(rel float64, forced []int, xs ...float64) []scored {
	out := make([]scored, len(xs))
	for i, x := range xs {
		lo, hi := widen(x, rel, 0)
		out[i] = scored{lo: lo, hi: hi, forced: slices.Contains(forced, i), cand: sureCand}
	}
	return out
}

// TestTopKBounds checks the top-k bounds on hand-made scores: lines apart
// by more than the tolerance are decided, lines within it are only maybe
// kept, the forced class ranks first, and non-candidates are never kept.
func TestTopKBounds(t *testing.T) {
	notCandidate := items(0, nil, 0.5, 0.4, 0.3)
	notCandidate[1].cand = notCand
	maybeCandidate := items(0, nil, 0.5, 0.4, 0.3)
	maybeCandidate[0].cand = maybeCand
	for _, tc := range []struct {
		name        string
		items       []scored
		kLo, kHi    int
		sure, maybe []int
	}{
		{"exact", items(0, nil, 0.5, 0.3, 0.31, 0.1), 2, 2, []int{0, 2}, []int{0, 2}},
		{"tie within tolerance", items(1e-3, nil, 0.5, 0.3, 0.3001, 0.1), 2, 2, []int{0}, []int{0, 1, 2}},
		{"far apart despite tolerance", items(1e-3, nil, 0.5, 0.3, 0.2, 0.1), 2, 2, []int{0, 1}, []int{0, 1}},
		{"forced first", items(0, []int{3}, 0.5, 0.3, 0.2, 0.01), 2, 2, []int{0, 3}, []int{0, 3}},
		{"k range", items(0, nil, 0.5, 0.3, 0.2, 0.1), 1, 3, []int{0}, []int{0, 1, 2}},
		{"k above the candidates", items(1e-3, nil, 0.5, 0.5), 5, 5, []int{0, 1}, []int{0, 1}},
		{"equal scores", items(0, nil, 0.2, 0.2, 0.2), 2, 2, nil, []int{0, 1, 2}},
		{"not a candidate", notCandidate, 2, 2, []int{0, 2}, []int{0, 2}},
		{"maybe a candidate", maybeCandidate, 1, 1, nil, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sure, maybe := topKBounds(tc.items, tc.kLo, tc.kHi)
			if got := pick(sure, 0); !slices.Equal(got, tc.sure) {
				t.Errorf("sure %v, want %v", got, tc.sure)
			}
			if got := pick(maybe, 0); !slices.Equal(got, tc.maybe) {
				t.Errorf("maybe %v, want %v", got, tc.maybe)
			}
		})
	}
}

// TestCoverBounds checks the γ-cover bounds: exact scores give the exact
// cover (the items before the first whose running sum exceeds γ), and a
// running sum within the tolerance of γ leaves its item undecided.
func TestCoverBounds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		items       []scored
		g           float64
		sure, maybe []int
	}{
		{"exact", items(0, nil, 0.15, 0.5, 0.05, 0.3), 0.8, []int{1, 3}, []int{1, 3}},
		{"running sum at γ within tolerance", items(1e-3, nil, 0.15, 0.5, 0.05, 0.3), 0.8, []int{1}, []int{1, 3}},
		{"clear of γ", items(1e-3, nil, 0.15, 0.5, 0.05, 0.3), 0.9, []int{1, 3}, []int{1, 3}},
		{"everything within γ", items(1e-3, nil, 0.1, 0.2), 0.9, []int{0, 1}, []int{0, 1}},
		{"first item above γ", items(0, nil, 0.95, 0.05), 0.9, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sure, maybe := coverBounds(tc.items, tc.g)
			if got := pick(sure, 0); !slices.Equal(got, tc.sure) {
				t.Errorf("sure %v, want %v", got, tc.sure)
			}
			if got := pick(maybe, 0); !slices.Equal(got, tc.maybe) {
				t.Errorf("maybe %v, want %v", got, tc.maybe)
			}
		})
	}
}

// TestLineJudges runs the minference and flexprefill judges on CPU plans
// of random inputs: every CPU row lies within its bounds (the exact scores
// are one of the perturbations), a row that drops a block every
// perturbation keeps fails, and so does a row with a block no perturbation
// keeps.
func TestLineJudges(t *testing.T) {
	r := testutil.Rand(t)
	for _, c := range []cuda.Case{
		{Name: "causal", B: 1, Hq: 2, Hkv: 1, Nq: 700, Nk: 700, D: 64, Dv: 64, DType: tensor.BFloat16, Layout: tensor.BHND, Causal: true, BlockQ: 64, BlockK: 64},
		{Name: "non-causal f32", B: 1, Hq: 2, Hkv: 2, Nq: 600, Nk: 600, D: 32, Dv: 32, DType: tensor.Float32, Layout: tensor.BHND, BlockQ: 64, BlockK: 32},
	} {
		q, k, v, err := cuda.RandomInputs(r, c, 1)
		if err != nil {
			t.Fatal(err)
		}
		tl := plan.Tiling{Geometry: c.Geometry(), Causal: c.Causal, BlockQ: c.BlockQ, BlockK: c.BlockK}
		for _, p := range []plan.Planner{
			minference.Planner{LastQ: 16, Vertical: 20, Slash: 40},
			flexprefill.Planner{Gamma: 0.9, Tau: 0.1},
			flexprefill.Planner{Gamma: 0.8, Tau: 1},
		} {
			t.Run(c.Name+"/"+p.Name(), func(t *testing.T) {
				ctx := context.Background()
				want, err := p.Plan(ctx, tl, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				dense, err := plan.Dense(tl)
				if err != nil {
					t.Fatal(err)
				}
				judge := tieBreakFor(p, tl, q, k)
				if judge == nil {
					t.Fatal("no judge")
				}
				dropped, added := 0, 0
				for row := range want.Rows() {
					got, _ := want.Entries(row)
					if err := judge(ctx, row, got, got); err != nil {
						t.Fatalf("row %d: the CPU's own row fails: %v", row, err)
					}
					// Block 0 is kept by every perturbation (sinks, the
					// forced vertical block): a row without it fails.
					if len(got) > 0 && got[0] == 0 {
						if judge(ctx, row, got, got[1:]) == nil {
							t.Errorf("row %d: passes without block 0", row)
						}
						dropped++
					}
					visible, _ := dense.Entries(row)
					for _, kb := range visible {
						if !slices.Contains(got, kb) {
							more := append(slices.Clone(got), kb)
							slices.Sort(more)
							if judge(ctx, row, got, more) == nil {
								added++ // a tie: some perturbation keeps kb
							}
						}
					}
				}
				if dropped == 0 {
					t.Error("no row keeps block 0")
				}
				t.Logf("%d rows; %d extra blocks within the tie-break", want.Rows(), added)
			})
		}
	}
}
