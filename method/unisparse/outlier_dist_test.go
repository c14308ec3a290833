package unisparse

import (
	"context"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
)

// canonDist is a token's squared distance from mean in the canonical
// float32 order (outlier.go), written out plainly: differences, squares
// and sums each rounded on its own, in increasing d.
func canonDist(x, mean []float32) float32 {
	var r float32
	for d, v := range x {
		e := v - mean[d]
		r += float32(e * e)
	}
	return r
}

// TestOutlierDistances drives outlierStats as compressTokens does (the
// tokens of each c_q group with their average-pooled mean) on random
// tokens of awkward sizes: groups of 1 to 16 (around the four-token
// interleave), a last query block shorter than c_q, N not a multiple of
// the block, D from 32 to 256. For each query block the kept distance
// must be the canonical float32 sum of its token bit for bit (canonDist),
// the token the first of the block's largest canonical distances, its row
// copied to s.oq, and the distance within γ(D+2) = (D+2)u/(1−(D+2)u),
// u = 2⁻²⁴, of the float64 distance from the same float32 mean: the
// difference, the square and D−1 adds each round once and every term is
// nonnegative, so the relative error of the sum is at most that. The
// token's float64 distance is then within 2γ of the block's largest.
func TestOutlierDistances(t *testing.T) {
	r := testutil.Rand(t)
	for _, tc := range []struct {
		name         string
		n, bq, cq, d int
	}{
		{"c1", 37, 8, 1, 32},
		{"c2-one-short-block", 9, 16, 2, 64},
		{"c3-tails", 50, 12, 3, 40},
		{"c4-exact", 128, 64, 4, 96},
		{"c5-ragged", 71, 20, 5, 256},
		{"c8-odd-d", 100, 32, 8, 200},
		{"c16-last-block-short", 203, 64, 16, 128},
		{"c16-d33", 77, 16, 16, 33},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := plantest.Shape{Name: tc.name, B: 1, Hq: 1, Hkv: 1, Nq: tc.n, Nk: tc.n, D: tc.d, BlockQ: tc.bq, BlockK: tc.bq, Causal: true}
			dense, err := plan.Dense(s.Tiling())
			if err != nil {
				t.Fatal(err)
			}
			sc := newScorer(dense, config{cq: tc.cq, ck: 1, ch: 1, outlier: true}, nil, nil)
			D := tc.d
			x := make([]float32, tc.n*D)
			for i := range tc.n {
				// An offset the differences cancel, and spreads from
				// tight to wide.
				spread := math.Exp(r.NormFloat64())
				for d := range D {
					x[i*D+d] = float32(2 + r.NormFloat64()*spread)
				}
			}
			means := make([]float32, tc.n*D) // each token's group mean
			for lo := 0; lo < tc.n; lo += tc.cq {
				hi := min(lo+tc.cq, tc.n)
				mean := means[lo*D : (lo+1)*D]
				averagePool(mean, x[lo*D:hi*D], D)
				for i := lo + 1; i < hi; i++ {
					copy(means[i*D:(i+1)*D], mean)
				}
				sc.outlierStats(x[lo*D:hi*D], mean, lo)
			}
			u := math.Ldexp(1, -24)
			gamma := float64(D+2) * u / (1 - float64(D+2)*u)
			for qb := range dense.QBlocks() {
				qlo, qhi := dense.QueryRange(qb)
				first, most := -1, float32(0)
				top := 0.0 // the block's largest float64 distance
				ref := map[int]float64{}
				for i := qlo; i < qhi; i++ {
					row, mean := x[i*D:(i+1)*D], means[i*D:(i+1)*D]
					if c := canonDist(row, mean); first < 0 || c > most {
						first, most = i, c
					}
					var f float64
					for d, v := range row {
						e := float64(v) - float64(mean[d])
						f += e * e
					}
					ref[i] = f
					top = max(top, f)
				}
				tok, got := int(sc.otok[qb]), sc.odist[qb]
				if tok != first || math.Float32bits(got) != math.Float32bits(most) {
					t.Fatalf("query block %d: token %d at %v, canonical first farthest %d at %v", qb, tok, got, first, most)
				}
				for d := range D {
					if sc.oq[qb*D+d] != x[tok*D+d] {
						t.Fatalf("query block %d: s.oq is not token %d's row", qb, tok)
					}
				}
				if f := ref[tok]; math.Abs(float64(got)-f) > gamma*f {
					t.Fatalf("query block %d: distance %v, float64 %v: off by %.3g of it, bound %.3g", qb, got, f, math.Abs(float64(got)-f)/f, gamma)
				}
				if ref[tok] < top*(1-2*gamma) {
					t.Fatalf("query block %d: token %d at float64 distance %v, the block's largest %v", qb, tok, ref[tok], top)
				}
			}
		})
	}
}

// TestOutlierDistanceTies plants exact ties through the planner
// (BlockScores): one query head whose tokens are all zero but for a few
// at ±a along one dimension, so that every group's mean, every difference
// and every square is exact and the planted tokens' distances are equal.
// The outlier of each query block must be the first planted token, in the
// same interleaved four, across fours, in a group's tail (tokens past its
// last four), across groups, and never the block's first token unless it
// is planted. Each case checks first that the canonical distances really
// tie.
func TestOutlierDistanceTies(t *testing.T) {
	const d = 32
	for _, tc := range []struct {
		name    string
		n, cq   int
		bq      int
		planted map[int]float32 // token: its value at dimension 3
		tie     []int           // the tokens of query block 0's largest distance
	}{
		{"same-four", 16, 8, 16, map[int]float32{1: 4, 3: -4}, []int{1, 3}},
		{"across-fours", 16, 8, 16, map[int]float32{2: 4, 5: -4}, []int{2, 5}},
		{"group-tail", 12, 6, 12, map[int]float32{4: 4, 5: -4}, []int{4, 5}},
		{"four-and-tail", 12, 6, 12, map[int]float32{3: 0.5, 5: -0.5}, []int{3, 5}},
		{"across-groups", 32, 8, 32, map[int]float32{9: 2, 10: -2, 17: 2, 20: -2}, []int{9, 10, 17, 20}},
		{"ragged-block", 22, 4, 32, map[int]float32{13: 1, 14: -1, 20: 1, 21: -1}, []int{13, 14, 20, 21}},
		{"first-token-planted", 16, 4, 16, map[int]float32{0: 1, 1: -1, 6: 1, 7: -1}, []int{0, 1, 6, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := plantest.Shape{Name: tc.name, B: 1, Hq: 1, Hkv: 1, Nq: tc.n, Nk: tc.n, D: d, BlockQ: tc.bq, BlockK: tc.bq, Causal: true}
			pr := s.Problem(t, testutil.Rand(t), 1, 1)
			x := make([]float32, tc.n*d)
			for i := range tc.n {
				for j := range d {
					pr.Q.Set(0, 0, i, j, 0)
				}
				if v, ok := tc.planted[i]; ok {
					pr.Q.Set(0, 0, i, 3, v)
					x[i*d+3] = v
				}
			}
			// The planted tokens' canonical distances tie at the largest.
			mean := make([]float32, d)
			var top float32
			dist := map[int]float32{}
			for lo := 0; lo < tc.n; lo += tc.cq {
				hi := min(lo+tc.cq, tc.n)
				averagePool(mean, x[lo*d:hi*d], d)
				for i := lo; i < hi; i++ {
					dist[i] = canonDist(x[i*d:(i+1)*d], mean)
					top = max(top, dist[i])
				}
			}
			for _, i := range tc.tie {
				if dist[i] != top || top == 0 {
					t.Fatalf("token %d at distance %v, the largest %v: no tie", i, dist[i], top)
				}
			}
			sc, err := Planner{CQ: tc.cq, CK: 4}.BlockScores(context.Background(), pr.Tiling, pr.Q, pr.K, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := sc.Outlier[0].Token; got != tc.tie[0] {
				t.Errorf("outlier token %d, want the first of the tie, %d (distances %v)", got, tc.tie[0], dist)
			}
		})
	}
}
