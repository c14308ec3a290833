package unisparse

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// naiveOutlier is the outlier query of query block qb (outlier.go) in
// float64 from the tensors: each token averaged over the head group's c_h
// heads, its squared distance from its c_q-token group's mean, the first
// farthest token of the block, and that token's softmax over the
// individual keys the block's last query sees (scaled by the softmax
// scale), summed per KV block. It returns the token (−1 when the block
// sees no key), every token's distance and the block masses.
func naiveOutlier(p *plan.Plan, q, k *tensor.Tensor, c config, b, h0, qb int) (tok int, dist map[int]float64, mass []float64) {
	g := p.Geometry
	token := func(x *tensor.Tensor, t int, keys bool) []float64 {
		out := make([]float64, g.D)
		for h := h0; h < h0+c.ch; h++ {
			src := h
			if keys {
				src = g.KVHead(h)
			}
			for d := range out {
				out[d] += float64(x.At(b, src, t, d)) / float64(c.ch)
			}
		}
		return out
	}
	qlo, qhi := p.QueryRange(qb)
	dist = map[int]float64{}
	tok = -1
	for lo := qlo; lo < qhi; lo += c.cq {
		hi := min(lo+c.cq, g.Nq)
		mean := make([]float64, g.D)
		for t := lo; t < hi; t++ {
			for d, v := range token(q, t, false) {
				mean[d] += v / float64(hi-lo)
			}
		}
		for t := lo; t < hi; t++ {
			var r float64
			for d, v := range token(q, t, false) {
				r += (v - mean[d]) * (v - mean[d])
			}
			dist[t] = r
			if tok < 0 || r > dist[tok] {
				tok = t
			}
		}
	}
	vis := g.Nk
	if p.Causal {
		vis = max(0, min(g.Nk, qhi-1+g.QueryOffset()+1))
	}
	if vis == 0 {
		return -1, dist, nil
	}
	qo := token(q, tok, false)
	scale := float64(p.SoftmaxScale())
	l := make([]float64, vis)
	m := math.Inf(-1)
	for j := range l {
		for d, v := range token(k, j, true) {
			l[j] += qo[d] * v
		}
		l[j] *= scale
		m = max(m, l[j])
	}
	mass = make([]float64, (vis+p.BlockK-1)/p.BlockK)
	var sum float64
	for _, v := range l {
		sum += math.Exp(v - m)
	}
	for j, v := range l {
		mass[j/p.BlockK] += math.Exp(v-m) / sum
	}
	return tok, dist, mass
}

// TestOutlierMatchesNaive checks the outlier rule against naiveOutlier on
// every awkward shape (causal and not, Nq < Nk, Nq > Nk, ragged blocks,
// GQA) and for each pooling and head compression: the planner's outlier
// token is the farthest (within 1e-4 of the largest distance: the planner
// rounds the head averages and means to float32 and sums the distances in
// float32, TestOutlierDistances bounds that), its extra block the
// heaviest (within 1e-4 of the largest mass), its masses (BlockScores)
// the naive ones within 1e-4, and each plan row is the NoOutlier row
// (Top-P alone, the same masses) plus that block.
func TestOutlierMatchesNaive(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 2, 1)
			g := pr.Tiling.Geometry
			for _, u := range []Planner{
				{TopP: 0.8},
				{TopP: 0.6, CQ: 2, CK: 8, Pooling: Max},
				{TopP: 0.9, CQ: 4, CK: 4, CH: g.Hq},
				{TopP: 0.7, CQ: 8, CK: 2, Pooling: Stochastic, Seed: 3},
			} {
				c, err := u.config(pr.Tiling)
				if err != nil {
					continue // a factor this shape's blocks do not take
				}
				ctx := context.Background()
				p, err := u.Plan(ctx, pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				paper := u
				paper.NoOutlier = true
				p0, err := paper.Plan(ctx, pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				for b := range g.B {
					for h0 := 0; h0 < g.Hq; h0 += c.ch {
						sc, err := u.BlockScores(ctx, pr.Tiling, pr.Q, pr.K, b, h0)
						if err != nil {
							t.Fatal(err)
						}
						for qb := range p.QBlocks() {
							o := sc.Outlier[qb]
							tok, dist, mass := naiveOutlier(p, pr.Q, pr.K, c, b, h0, qb)
							if (o.Token < 0) != (tok < 0) || (o.Block < 0) != (tok < 0) {
								t.Fatalf("%+v b%d h%d qb%d: outlier %+v, naive token %d", u, b, h0, qb, o, tok)
							}
							want, _ := p0.Entries(p0.Row(b, h0, qb))
							want = slices.Clone(want)
							if tok >= 0 {
								if dist[o.Token] < dist[tok]*(1-1e-4) {
									t.Fatalf("%+v b%d h%d qb%d: outlier token %d at distance %v, token %d at %v", u, b, h0, qb, o.Token, dist[o.Token], tok, dist[tok])
								}
								if o.Token == tok {
									for kb, m := range mass {
										if math.Abs(o.Mass[kb]-m) > 1e-4 {
											t.Fatalf("%+v b%d h%d qb%d: outlier mass %v, naive %v", u, b, h0, qb, o.Mass, mass)
										}
									}
									if mass[o.Block] < slices.Max(mass)-1e-4 {
										t.Fatalf("%+v b%d h%d qb%d: extra block %d of mass %v, naive masses %v", u, b, h0, qb, o.Block, mass[o.Block], mass)
									}
								}
								if i, ok := slices.BinarySearch(want, int32(o.Block)); !ok {
									want = slices.Insert(want, i, int32(o.Block))
								}
							}
							for h := h0; h < h0+c.ch; h++ {
								got, _ := p.Entries(p.Row(b, h, qb))
								if !slices.Equal(got, want) {
									t.Fatalf("%+v b%d h%d qb%d: row %v, want Top-P's %v with block %d", u, b, h, qb, got, want, o.Block)
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestOutlierKeepsPlantedPair plants one query–key pair (a needle: both
// tokens along a direction no other token has, logit 14) at positions
// that are not special, in a causal 512-token head whose every query
// attends to a sink (keys 0–3, logit 8) over weak noise, at the default
// 16×4 compression and Top-P: with the outlier query the row of the
// pair's query block keeps the key's block wherever the two sit; the
// paper's rule alone keeps few blocks besides the sink's, and drops the
// far ones ("lost").
func TestOutlierKeepsPlantedPair(t *testing.T) {
	const n, d = 512, 32
	for _, tc := range []struct {
		name       string
		query, key int
		lost       bool // Top-P alone drops the key's block
	}{
		{"last-query-third-key", 511, 170, true},
		{"middle-query", 300, 70, true},
		{"first-query-of-block", 256, 140, true},
		{"key-at-block-end", 383, 127, true},
		{"key-in-diagonal-block", 200, 193, false},
		{"key-in-sink-block", 450, 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := plantest.Shape{Name: tc.name, B: 1, Hq: 1, Hkv: 1, Nq: n, Nk: n, D: d, BlockQ: 64, BlockK: 64, Causal: true}
			pr := s.Problem(t, testutil.Rand(t), 0.3, 0.3)
			logit := func(l float64) float32 { return float32(math.Sqrt(l * math.Sqrt(d))) } // x·x/√d = l
			for i := range n {
				pr.Q.Set(0, 0, i, 0, 0)
				pr.K.Set(0, 0, i, 0, 0)
				pr.Q.Set(0, 0, i, 1, logit(8))
				pr.K.Set(0, 0, i, 1, 0)
			}
			for j := range 4 {
				pr.K.Set(0, 0, j, 1, logit(8))
			}
			pr.Q.Set(0, 0, tc.query, 0, logit(14))
			pr.K.Set(0, 0, tc.key, 0, logit(14))
			qb, kb := tc.query/64, int32(tc.key/64)
			for _, u := range []Planner{{}, {NoOutlier: true}} {
				p, err := u.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				row, _ := p.Entries(p.Row(0, 0, qb))
				kept := slices.Contains(row, kb)
				switch {
				case !u.NoOutlier && !kept:
					t.Errorf("with the outlier query: row %v of query block %d drops key block %d", row, qb, kb)
				case u.NoOutlier && tc.lost && kept:
					t.Errorf("Top-P alone keeps key block %d (row %v): the case no longer shows the loss", kb, row)
				}
			}
		})
	}
}

// TestOutlierTies: in a query block whose tokens are all equal every
// distance is 0 and the outlier is the block's first token; keys all
// equal give every visible key the same weight, and the extra block is
// the first of the heaviest (a full block outweighs the ragged diagonal
// one).
func TestOutlierTies(t *testing.T) {
	s := plantest.Shape{Name: "ties", B: 1, Hq: 1, Hkv: 1, Nq: 200, Nk: 200, D: 16, BlockQ: 32, BlockK: 32, Causal: true}
	pr := s.Problem(t, testutil.Rand(t), 1, 1)
	for i := range s.Nq {
		for d := range s.D {
			pr.Q.Set(0, 0, i, d, 0.5)
			pr.K.Set(0, 0, i, d, -0.25)
		}
	}
	u := Planner{CQ: 8, CK: 4}
	sc, err := u.BlockScores(context.Background(), pr.Tiling, pr.Q, pr.K, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for qb, o := range sc.Outlier {
		if o.Token != qb*s.BlockQ || o.Block != 0 {
			t.Errorf("query block %d: outlier token %d, block %d; want %d and 0", qb, o.Token, o.Block, qb*s.BlockQ)
		}
	}
}
