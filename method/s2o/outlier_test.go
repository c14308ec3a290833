package s2o

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
)

// TestDistances checks distances against a float64 naive reference (the
// squared distance in float64, to 1e-12) and against the canonical sum
// written out plainly (bit for bit), on every row count around the four-row
// groups, and NaN as −1.
func TestDistances(t *testing.T) {
	r := testutil.Rand(t)
	for _, n := range []int{0, 1, 3, 4, 5, 8, 11} {
		for _, d := range []int{1, 7, 64} {
			x := make([]float32, n*d)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 3)
			}
			mean := meanRows(x, d, 0, n)
			got := make([]float64, n)
			distances(got, x, mean, d)
			for i := range n {
				var naive, canon float64
				for c := range d {
					e := float64(x[i*d+c]) - float64(mean[c])
					naive += e * e
					canon += float64(e * e)
				}
				if math.Abs(got[i]-naive) > 1e-12*(1+naive) || got[i] != canon {
					t.Fatalf("n=%d d=%d row %d: distance %v, naive %v, canonical %v", n, d, i, got[i], naive, canon)
				}
			}
		}
	}
	x := []float32{1, 2, float32(math.NaN()), 4, float32(math.Inf(1)), 0}
	got := make([]float64, 3)
	distances(got, x, []float32{0, 0}, 2)
	if want := []float64{5, -1, math.Inf(1)}; !slices.Equal(got, want) {
		t.Fatalf("distances %v, want %v", got, want)
	}
}

// TestPickOutliers checks pickOutliers against a stable sort by
// descending distance.
func TestPickOutliers(t *testing.T) {
	for _, tc := range []struct {
		name string
		dist []float64
		k    int
		want []int
	}{
		{"one", []float64{1, 5, 3}, 1, []int{1}},
		{"two", []float64{1, 5, 3}, 2, []int{1, 2}},
		{"more-than-rows", []float64{1, 5, 3}, 5, []int{1, 2, 0}},
		{"ties-earliest-first", []float64{2, 7, 2, 7, 7}, 4, []int{1, 3, 4, 0}},
		{"all-equal", []float64{0, 0, 0, 0}, 2, []int{0, 1}},
		{"nan-as-minus-one", []float64{-1, 0, -1, 3}, 3, []int{3, 1, 0}},
		{"empty", nil, 1, nil},
		{"none", []float64{1, 2}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pickOutliers(nil, tc.dist, tc.k)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("pick %v, want %v", got, tc.want)
			}
			idx := make([]int, len(tc.dist))
			for i := range idx {
				idx[i] = i
			}
			slices.SortStableFunc(idx, func(a, b int) int {
				switch {
				case tc.dist[a] > tc.dist[b]:
					return -1
				case tc.dist[a] < tc.dist[b]:
					return 1
				}
				return 0
			})
			if ref := idx[:min(tc.k, len(idx))]; !slices.Equal(got, ref) && (len(got) > 0 || len(ref) > 0) {
				t.Fatalf("pick %v, the stable sort's first %d %v", got, tc.k, ref)
			}
		})
	}
}

// TestPromote checks that promote puts the moved tokens first, in
// increasing order, and keeps the others' order.
func TestPromote(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ranked, moved []int32
		want          []int32
	}{
		{"none", []int32{4, 2, 9}, nil, []int32{4, 2, 9}},
		{"already-first", []int32{4, 2, 9}, []int32{4}, []int32{4, 2, 9}},
		{"last", []int32{4, 2, 9}, []int32{9}, []int32{9, 4, 2}},
		{"two", []int32{4, 2, 9, 7, 1}, []int32{1, 9}, []int32{1, 9, 4, 2, 7}},
		{"all", []int32{3, 1, 2}, []int32{1, 2, 3}, []int32{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Clone(tc.ranked)
			promote(got, tc.moved)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("promote(%v, %v) = %v, want %v", tc.ranked, tc.moved, got, tc.want)
			}
		})
	}
}

// TestOutlierKeepsPlantedPair plants a lone query–key pair (a needle) in a
// sink-dominated head at several positions and checks that the default
// planner leads the query's segment's ranked keys with the needle key and
// gets the needle query's output right, where the paper's key order
// (NoOutliers) ranks the needle key last and stops before its tile for the
// pairs marked lost. The needle key scores low against the segment's mean
// query (its component 2 is −3 where every query's is 1), so nothing but
// the needle query itself points at it.
func TestOutlierKeepsPlantedPair(t *testing.T) {
	const n, d, seg = 512, 32, 128
	for _, tc := range []struct {
		name       string
		query, key int
		lost       bool // the paper's order drops the needle key
	}{
		{"last-query-third-key", 511, 170, true},
		{"middle-query", 300, 70, true},
		{"first-query-of-segment", 256, 140, true},
		{"key-just-before-segment", 383, 255, true},
		{"key-in-own-segment", 200, 193, false},
		{"key-among-sinks", 450, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := plantest.Shape{Name: tc.name, B: 1, Hq: 1, Hkv: 1, Nq: n, Nk: n, D: d, BlockQ: 32, BlockK: 32, Causal: true}
			pr := s.Problem(t, testutil.Rand(t), 0.3, 0.3)
			logit := func(l float64) float32 { return float32(math.Sqrt(l * math.Sqrt(d))) } // x·x/√d = l
			for i := range n {
				pr.Q.Set(0, 0, i, 0, 0)
				pr.K.Set(0, 0, i, 0, 0)
				pr.Q.Set(0, 0, i, 1, logit(8))
				pr.K.Set(0, 0, i, 1, 0)
				pr.Q.Set(0, 0, i, 2, 1)
			}
			for j := range 4 {
				pr.K.Set(0, 0, j, 1, logit(8))
			}
			pr.Q.Set(0, 0, tc.query, 0, logit(16))
			pr.K.Set(0, 0, tc.key, 0, logit(16))
			pr.K.Set(0, 0, tc.key, 2, -3)
			ref := plantest.Reference(t, pr.Q, pr.K, pr.V, true)
			want := ref.Row(0, 0, tc.query)
			for _, pl := range []Planner{{Segment: seg, Tau: 0.01, QueryPerm: true}, {Segment: seg, Tau: 0.01, Outliers: NoOutliers, QueryPerm: true}} {
				p, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				out, _ := plantest.Run(t, p, pr.Q, pr.K, pr.V)
				worst := 0.0
				for c, w := range want {
					worst = max(worst, math.Abs(float64(out.At(0, 0, tc.query, c))-w))
				}
				o := p.Order
				ord := o.RowKV[p.Row(0, 0, tc.query/s.BlockQ)]
				keys := o.KV[o.KVStart[ord]:o.KVStart[ord+1]]
				wlo, whi := pl.window(pr.Tiling, tc.query/seg)
				switch {
				case pl.Outliers >= 0 && worst > 1e-3:
					t.Errorf("with the outlier queries: the needle query's output is off by %.3g", worst)
				case pl.Outliers >= 0 && tc.key < wlo && keys[whi-wlo] != int32(tc.key):
					t.Errorf("with the outlier queries: the ranked keys of query %d's segment start %v, not with key %d", tc.query, keys[whi-wlo:whi-wlo+4], tc.key)
				case pl.Outliers < 0 && tc.lost && worst < 0.05:
					t.Errorf("the paper's order keeps the needle (output off by %.3g): the case no longer shows the loss", worst)
				}
			}
		})
	}
}
