package selftest

import (
	"context"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestTopCDFWithin checks the oracle's tie-break judge on hand-made masses:
// sets that are TopCdf sets under a perturbation of tol pass, and sets that
// miss mass, keep a superfluous block or skip a heavier block fail.
func TestTopCDFWithin(t *testing.T) {
	mass := []float64{0.5, 0.45, 0.03, 0.02, 0}
	for _, tc := range []struct {
		name string
		kept []int32
		cdf  float64
		ok   bool
	}{
		{"exact TopCdf set", []int32{0, 1}, 0.95, true},
		{"boundary block dropped within tol", []int32{0, 1}, 0.950005, true},
		{"next block added within tol", []int32{0, 1, 2}, 0.949995, true},
		{"too little mass", []int32{0}, 0.95, false},
		{"superfluous block", []int32{0, 1, 2}, 0.9, false},
		{"heavier block left out", []int32{0, 2}, 0.53, false},
		{"nothing kept", nil, 0.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := topCDFWithin(mass, tc.kept, tc.cdf, 1e-5)
			if (err == nil) != tc.ok {
				t.Errorf("topCDFWithin(%v, cdf %v) = %v, want ok=%v", tc.kept, tc.cdf, err, tc.ok)
			}
		})
	}
}

// TestThresholdWithin checks the cumulative-share judge with forced blocks
// (XAttention's causal first and diagonal blocks) on hand-made shares.
func TestThresholdWithin(t *testing.T) {
	mass := []float64{0.05, 0.5, 0.3, 0.1, 0.05} // block 0 and 4 forced
	forced := []int32{0, 4}
	for _, tc := range []struct {
		name string
		kept []int32
		thr  float64
		ok   bool
	}{
		{"forced blocks reach the threshold alone", []int32{0, 4}, 0.1, true},
		{"exact selection", []int32{0, 1, 4}, 0.55, true},
		{"boundary block added within tol", []int32{0, 1, 4}, 0.600005, true},
		{"boundary block dropped within tol", []int32{0, 1, 2, 4}, 0.599995, true},
		{"forced block missing", []int32{1, 2, 4}, 0.8, false},
		{"too little mass", []int32{0, 1, 4}, 0.7, false},
		{"superfluous block", []int32{0, 1, 2, 4}, 0.55, false},
		{"heavier block left out", []int32{0, 2, 3, 4}, 0.45, false},
		{"block past the visible ones", []int32{0, 4, 5}, 0.1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := thresholdWithin(mass, tc.kept, forced, tc.thr, 1e-5)
			if (err == nil) != tc.ok {
				t.Errorf("thresholdWithin(%v, thr %v) = %v, want ok=%v", tc.kept, tc.thr, err, tc.ok)
			}
		})
	}
}

// TestTensorCoreShareTol checks the bound's terms: it grows with the logit
// bound, the row length, the columns and the split, and stays below 2% of
// a row's mass for XAttention's longest rows (S·D = 2048 products of unit
// inputs, a logit bound of 5), where a looser judge would pass real
// errors.
func TestTensorCoreShareTol(t *testing.T) {
	base := tensorCoreShareTol(5, 2048, 2048, false)
	for _, c := range []struct {
		name string
		tol  float64
	}{
		{"larger bound", tensorCoreShareTol(10, 2048, 2048, false)},
		{"longer rows", tensorCoreShareTol(5, 4096, 2048, false)},
		{"more columns", tensorCoreShareTol(5, 2048, 8192, false)},
		{"split", tensorCoreShareTol(5, 2048, 2048, true)},
	} {
		if !(c.tol > base) {
			t.Errorf("%s: %g not above %g", c.name, c.tol, base)
		}
	}
	if !(base > 0 && base < 0.02) {
		t.Errorf("xattn-like tolerance %g outside (0, 0.02)", base)
	}
}

// TestMassJudges runs the xattn and unisparse judges on CPU plans of a
// random problem: every CPU row passes (it is its own exact selection), a
// row without a causal forced block fails, and a row whose heaviest
// unforced kept block is swapped for a lighter left-out block, where the
// two differ by more than the tolerance, fails.
func TestMassJudges(t *testing.T) {
	c := cuda.Case{B: 1, Hq: 4, Hkv: 2, Nq: 700, Nk: 700, D: 64, Dv: 64, DType: tensor.BFloat16, Layout: tensor.BHND, Causal: true, BlockQ: 64, BlockK: 64}
	q, k, v, err := cuda.RandomInputs(testutil.Rand(t), c, 1)
	if err != nil {
		t.Fatal(err)
	}
	tl := plan.Tiling{Geometry: c.Geometry(), Causal: true, BlockQ: c.BlockQ, BlockK: c.BlockK}
	ctx := context.Background()
	for _, p := range []plan.Planner{xattn.Planner{Stride: 16, Threshold: 0.9}, xattn.Planner{Stride: 8, Threshold: 0.6}, unisparse.Planner{TopP: 0.8}} {
		t.Run(p.Name(), func(t *testing.T) {
			want, err := p.Plan(ctx, tl, q, k, v)
			if err != nil {
				t.Fatal(err)
			}
			judge := tieBreakFor(p, tl, q, k)
			if judge == nil {
				t.Fatal("no judge")
			}
			swapped := 0
			for row := range want.Rows() {
				kept, _ := want.Entries(row)
				if err := judge(ctx, row, kept, kept); err != nil {
					t.Fatalf("row %d: the CPU's own row %v rejected: %v", row, kept, err)
				}
				if _, isX := p.(xattn.Planner); isX && len(kept) > 0 {
					if err := judge(ctx, row, kept, kept[1:]); err == nil {
						t.Errorf("row %d: a row without its first block %v accepted", row, kept[1:])
					}
				}
				if bad := swapHeaviest(ctx, t, p, tl, q, k, row, kept); bad != nil {
					swapped++
					if err := judge(ctx, row, kept, bad); err == nil {
						t.Errorf("row %d: %v accepted in place of %v", row, bad, kept)
					}
				}
			}
			if swapped == 0 {
				t.Error("no row had blocks far enough apart to swap")
			}
		})
	}
}

// swapHeaviest returns row's kept blocks with the heaviest unforced kept
// block replaced by the lightest left-out visible block, or nil when no
// such pair differs in share by more than 1e-2 (far above the tolerance).
func swapHeaviest(ctx context.Context, t *testing.T, p plan.Planner, tl plan.Tiling, q, k *tensor.Tensor, row int, kept []int32) []int32 {
	g := tl.Geometry
	qBlocks := (g.Nq + tl.BlockQ - 1) / tl.BlockQ
	bh, qb := row/qBlocks, row%qBlocks
	var mass []float64
	var forced []int32
	switch x := p.(type) {
	case xattn.Planner:
		s, err := x.BlockScores(ctx, tl, q, k, bh/g.Hq, bh%g.Hq)
		if err != nil {
			t.Fatal(err)
		}
		nvis := (min((qb+1)*tl.BlockQ, g.Nq) - 1 + g.Nk - g.Nq) / tl.BlockK
		mass = s.Mass[qb][:nvis+1]
		forced = []int32{0, int32(nvis)}
	case unisparse.Planner:
		s, err := x.BlockScores(ctx, tl, q, k, bh/g.Hq, bh%g.Hq)
		if err != nil {
			t.Fatal(err)
		}
		mass = s.Mass[qb]
		if s.Outlier != nil && s.Outlier[qb].Block >= 0 {
			forced = []int32{int32(s.Outlier[qb].Block)} // the outlier query's: kept whatever its share
		}
	}
	sh := shares(mass)
	heavy, light := -1, -1
	for _, kb := range kept {
		if !slices.Contains(forced, kb) && (heavy < 0 || sh[kb] > sh[heavy]) {
			heavy = int(kb)
		}
	}
	for kb := range sh {
		if !slices.Contains(kept, int32(kb)) && (light < 0 || sh[kb] < sh[light]) {
			light = kb
		}
	}
	if heavy < 0 || light < 0 || sh[heavy]-sh[light] < 1e-2 {
		return nil
	}
	out := []int32{int32(light)}
	for _, kb := range kept {
		if int(kb) != heavy {
			out = append(out, kb)
		}
	}
	slices.Sort(out)
	return out
}
