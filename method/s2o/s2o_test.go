package s2o

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

type shape struct {
	plantest.Shape
	segment, window int  // S2O segment length and local window
	qperm           bool // Q_perm's two passes (QueryPerm); false: the fused default
}

// shapes covers GQA, ragged segments and blocks, N below one segment and
// one block, chunked prefill (Nq < Nk), more queries than keys (fully
// masked rows), non-causal attention, the fused variant and a local window.
var shapes = []shape{
	{plantest.Shape{Name: "causal-gqa", B: 1, Hq: 4, Hkv: 2, Nq: 256, Nk: 256, D: 64, BlockQ: 16, BlockK: 16, Causal: true, Heavy: true}, 64, 0, true},
	{plantest.Shape{Name: "ragged", B: 1, Hq: 2, Hkv: 1, Nq: 200, Nk: 200, D: 32, BlockQ: 16, BlockK: 32, Causal: true}, 48, 8, true},
	{plantest.Shape{Name: "below-segment", B: 1, Hq: 2, Hkv: 2, Nq: 40, Nk: 40, D: 32, BlockQ: 16, BlockK: 16, Causal: true}, 64, 0, true},
	{plantest.Shape{Name: "below-block", B: 1, Hq: 1, Hkv: 1, Nq: 5, Nk: 5, D: 32, BlockQ: 16, BlockK: 16, Causal: true}, 16, 0, true},
	{plantest.Shape{Name: "chunked-prefill", B: 1, Hq: 2, Hkv: 1, Nq: 100, Nk: 230, D: 32, BlockQ: 16, BlockK: 16, Causal: true}, 32, 16, true},
	{plantest.Shape{Name: "more-queries-than-keys", B: 1, Hq: 1, Hkv: 1, Nq: 60, Nk: 20, D: 32, BlockQ: 16, BlockK: 16, Causal: true}, 32, 0, true},
	{plantest.Shape{Name: "noncausal", B: 1, Hq: 2, Hkv: 2, Nq: 150, Nk: 150, D: 48, BlockQ: 16, BlockK: 16}, 64, 0, true},
	{plantest.Shape{Name: "noncausal-nq-ne-nk", B: 1, Hq: 2, Hkv: 1, Nq: 70, Nk: 120, D: 32, BlockQ: 16, BlockK: 8}, 32, 0, true},
	{plantest.Shape{Name: "fused", B: 1, Hq: 2, Hkv: 1, Nq: 200, Nk: 200, D: 32, BlockQ: 16, BlockK: 16, Causal: true}, 64, 16, false},
	{plantest.Shape{Name: "batch-d128-odd-bk", B: 2, Hq: 2, Hkv: 1, Nq: 130, Nk: 130, D: 128, BlockQ: 32, BlockK: 24, Causal: true, Heavy: true}, 64, 0, true},
}

// inputs draws a problem of shape s, q and k with standard deviation 1.5.
func inputs(t *testing.T, s shape) (q, k, v *tensor.Tensor, tl plan.Tiling) {
	pr := s.Problem(t, testutil.Rand(t), 1.5, 1.5)
	return pr.Q, pr.K, pr.V, pr.Tiling
}

func (s shape) planner(tau float64) Planner {
	return Planner{Segment: s.segment, Tau: tau, Window: s.window, QueryPerm: s.qperm}
}

// dot64 is the float64 dot product of query row i of head h and key row j
// of KV head kh, or of a float64 vector x when row < 0.
func dot64(x []float64, t *tensor.Tensor, b, h, j int) float64 {
	var s float64
	for d := range x {
		s += x[d] * float64(t.At(b, h, j, d))
	}
	return s
}

func mean64(t *tensor.Tensor, b, h, lo, hi int) []float64 {
	m := make([]float64, t.Shape().D)
	for i := lo; i < hi; i++ {
		for d := range m {
			m[d] += float64(t.At(b, h, i, d)) / float64(hi-lo)
		}
	}
	return m
}

// nonIncreasing reports the first place where scores rise by more than the
// float32 rounding of the planner's dot products can explain.
func nonIncreasing(scores []float64) int {
	for i := 1; i < len(scores); i++ {
		if scores[i] > scores[i-1]+1e-4*(1+math.Abs(scores[i])) {
			return i
		}
	}
	return -1
}

// TestOrdersMatchEquations recomputes S2O Alg. 1 in float64 — the guide
// key and query scores of Eq. 1, the segment mean queries and key scores of
// Eq. 2 — and checks the plan's index arrays and rows against them: each
// segment's queries sorted by ⟨q, k_guide⟩, each key order made of the
// segment's own window in natural order then exactly its causal prefix (or,
// non-causal, every other key) sorted by ⟨q_mean, k⟩, pass-1 tiles listed
// only where a pair is visible and counted in RowAfter, and no pass-2 key in
// the future of any query of its row.
func TestOrdersMatchEquations(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, _, tl := inputs(t, s)
			p, err := s.planner(0.01).Plan(context.Background(), tl, q, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			g := tl.Geometry
			off := g.QueryOffset()
			segs := (g.Nq + s.segment - 1) / s.segment
			o := p.Order
			checked, withRanked := 0, 0 // segments whose outlier and top key are clear in float64; segments with ranked keys
			defer func() {
				if withRanked > 0 && checked == 0 && !t.Failed() {
					t.Errorf("no segment had a clear outlier query and top key")
				}
			}()
			if s.qperm != (o.Query != nil) {
				t.Fatalf("query order present = %v with QueryPerm = %v", o.Query != nil, s.qperm)
			}
			for b := range g.B {
				for h := range g.Hq {
					bh := b*g.Hq + h
					kh := g.KVHead(h)
					guide := mean64(k, b, kh, 0, min(s.segment, g.Nk))
					for n := range segs {
						qlo, qhi := n*s.segment, min((n+1)*s.segment, g.Nq)
						// Eq. 1: Q_perm sorts the segment by ⟨q, k_guide⟩.
						if o.Query != nil {
							perm := o.Query[bh*g.Nq+qlo : bh*g.Nq+qhi]
							sorted := slices.Clone(perm)
							slices.Sort(sorted)
							var scores []float64
							for i, tok := range sorted {
								if int(tok) != qlo+i {
									t.Fatalf("head %d segment %d: query order is not a permutation of [%d,%d)", bh, n, qlo, qhi)
								}
							}
							for _, tok := range perm {
								scores = append(scores, dot64(guide, q, b, h, int(tok)))
							}
							if i := nonIncreasing(scores); i >= 0 {
								t.Fatalf("head %d segment %d: query score rises at position %d: %v > %v", bh, n, i, scores[i], scores[i-1])
							}
						}
						// Eq. 2: the key order of the segment.
						r0 := p.Row(b, h, qlo/s.BlockQ)
						ord := o.RowKV[r0]
						keys := o.KV[o.KVStart[ord]:o.KVStart[ord+1]]
						whi := min(max(qhi+off, 0), g.Nk)
						wlo := min(max(qlo+off-s.window, 0), whi)
						for i := range whi - wlo {
							if int(keys[i]) != wlo+i {
								t.Fatalf("head %d segment %d: local key %d is token %d, want %d", bh, n, i, keys[i], wlo+i)
							}
						}
						ranked := keys[whi-wlo:]
						var want []int32
						for j := range g.Nk {
							if j < wlo || (!s.Causal && j >= whi) {
								want = append(want, int32(j))
							}
						}
						got := slices.Clone(ranked)
						slices.Sort(got)
						if !slices.Equal(got, want) {
							t.Fatalf("head %d segment %d: ranked keys %v, want the set %v", bh, n, got, want)
						}
						qmean := mean64(q, b, h, qlo, qhi)
						// The outlier query's top key leads the ranked
						// keys (outlier.go); the others follow KV_perm.
						if len(ranked) > 0 {
							withRanked++
							top, clear := outlierTopKey(q, k, b, h, kh, qlo, qhi, qmean, want)
							if clear {
								checked++
								if ranked[0] != top {
									t.Fatalf("head %d segment %d: ranked keys start with %d, want the outlier query's top key %d", bh, n, ranked[0], top)
								}
							}
							ranked = ranked[1:]
						}
						var scores []float64
						for _, j := range ranked {
							scores = append(scores, dot64(qmean, k, b, kh, int(j)))
						}
						if i := nonIncreasing(scores); i >= 0 {
							t.Fatalf("head %d segment %d: key score rises at position %d", bh, n, i)
						}
						// Rows of the segment. Pass 1 (natural query order)
						// lists the local tiles holding a visible pair; pass 2
						// lists every ranked tile.
						local := whi - wlo
						nb := (len(keys) + s.BlockK - 1) / s.BlockK
						localBlocks := (local + s.BlockK - 1) / s.BlockK
						for qb := qlo / s.BlockQ; qb < (qhi+s.BlockQ-1)/s.BlockQ; qb++ {
							r := p.Row(b, h, qb)
							if o.RowKV[r] != ord {
								t.Fatalf("row %d uses key order %d, want its segment's %d", r, o.RowKV[r], ord)
							}
							lo, hi := qb*s.BlockQ, min((qb+1)*s.BlockQ, g.Nq)
							minQ := math.MaxInt // earliest query of the pass-2 row
							for pos := lo; pos < hi; pos++ {
								tok := pos
								if o.Query != nil {
									tok = int(o.Query[bh*g.Nq+pos])
								}
								minQ = min(minQ, tok)
							}
							var want1, want2 []int32
							for kb := range localBlocks {
								tile := keys[kb*s.BlockK : min((kb+1)*s.BlockK, len(keys))]
								if !s.Causal || int(slices.Min(tile)) <= hi-1+off {
									want1 = append(want1, int32(kb))
								}
							}
							for kb := localBlocks; kb < nb; kb++ {
								want2 = append(want2, int32(kb))
								for _, j := range keys[kb*s.BlockK : min((kb+1)*s.BlockK, len(keys))] {
									if s.Causal && int(j) < wlo && int(j) > minQ+off {
										t.Fatalf("row %d: pass-2 key %d is in the future of query %d", r, j, minQ)
									}
								}
							}
							pass1, pass2 := passes(t, p, r)
							if !slices.Equal(pass1, want1) || !slices.Equal(pass2, want2) {
								t.Fatalf("row %d: pass 1 %v and pass 2 %v, want %v and %v", r, pass1, pass2, want1, want2)
							}
						}
					}
				}
			}
		})
	}
}

// outlierTopKey recomputes in float64 the top key, among the ranked keys
// (in increasing order), of the query of [qlo, qhi) farthest from the
// segment's mean query qmean, and says whether both choices are clear: the
// largest distance and the largest score each ahead of the next by more
// than the planner's float32 roundings can explain.
func outlierTopKey(q, k *tensor.Tensor, b, h, kh, qlo, qhi int, qmean []float64, ranked []int32) (top int32, clear bool) {
	far, d1, d2 := -1, math.Inf(-1), math.Inf(-1) // the farthest query, its distance, the runner-up's
	for i := qlo; i < qhi; i++ {
		var r float64
		for c, m := range qmean {
			e := float64(q.At(b, h, i, c)) - m
			r += e * e
		}
		switch {
		case r > d1:
			far, d1, d2 = i, r, d1
		case r > d2:
			d2 = r
		}
	}
	x := make([]float64, len(qmean))
	for c := range x {
		x[c] = float64(q.At(b, h, far, c))
	}
	s1, s2 := math.Inf(-1), math.Inf(-1)
	for _, j := range ranked {
		switch v := dot64(x, k, b, kh, int(j)); {
		case v > s1:
			top, s1, s2 = j, v, s1
		case v > s2:
			s2 = v
		}
	}
	return top, d1-d2 > 1e-4*(1+d1) && s1-s2 > 1e-4*(1+math.Abs(s1))
}

// passes splits row r of an S2O plan into its pass-1 and pass-2 tiles,
// checking the plan's structure: with Q_perm, pass 1 is an Init plan in
// natural query order on the same key orders and the stop rule covers all
// of pass 2; fused, pass 1 is the first RowAfter entries of the row.
func passes(t *testing.T, p *plan.Plan, r int) (pass1, pass2 []int32) {
	t.Helper()
	blocks, _ := p.Entries(r)
	if p.Init != nil {
		if p.Init.Order.Query != nil || p.Init.Stop != nil || p.Init.Order.RowKV[r] != p.Order.RowKV[r] {
			t.Fatal("the Init plan must run in natural order, without a stop, on the main plan's key orders")
		}
		if p.Stop != nil && (p.Stop.After != 0 || p.Stop.RowAfter != nil) {
			t.Fatal("pass 2 must be entirely under the stop rule")
		}
		first, _ := p.Init.Entries(r)
		return first, blocks
	}
	after := 0
	if p.Stop != nil {
		after = p.Stop.AfterRow(r)
	}
	return blocks[:after], blocks[after:]
}

// TestNoStopIsDense: with the stop off (NoStop) every visible pair is
// computed once, so the output is dense attention (tolerance of the float32 executor
// against the float64 reference: 2e-5 absolute on unit-scale values, as in
// package cpu) and the gather path computes at least the dense work.
func TestNoStopIsDense(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, v, tl := inputs(t, s)
			p, err := s.planner(NoStop).Plan(context.Background(), tl, q, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.Stop != nil {
				t.Fatal("NoStop must not attach a stop rule")
			}
			out, stats := plantest.Run(t, p, q, k, v)
			ref := plantest.Reference(t, q, k, v, s.Causal)
			e := plantest.Compare(t, ref, out)
			if !(e.MaxAbs <= 2e-5) {
				t.Fatalf("max abs error %.3g against dense", e.MaxAbs)
			}
			if stats.Stopped != 0 {
				t.Fatalf("%d rows stopped with NoStop", stats.Stopped)
			}
		})
	}
}

// simulate replays the plan in float64 on physically gathered copies of
// each row's queries, keys and values: the row's queries in Q_perm order,
// its key tiles copied out in KV_perm order, causal masking by original
// token index, and the stop rule applied tile by tile. An Init plan runs
// first and its per-query (ℓ, acc) carry over. It returns the output
// [b][h][token][d], the tiles computed, and ok=false when a stop decision
// is within rounding of τ (float32 may then decide otherwise).
func simulate(p *plan.Plan, q, k, v *tensor.Tensor) (out [][][][]float64, tiles int, ok bool) {
	g := p.Geometry
	l := make([]float64, g.B*g.Hq*g.Nq)
	acc := make([][]float64, len(l))
	for i := range acc {
		acc[i] = make([]float64, g.Dv)
	}
	ok = true
	if p.Init != nil {
		tiles += simulateRows(p.Init, q, k, v, l, acc, &ok)
	}
	tiles += simulateRows(p, q, k, v, l, acc, &ok)
	out = make([][][][]float64, g.B)
	for b := range g.B {
		out[b] = make([][][]float64, g.Hq)
		for h := range g.Hq {
			out[b][h] = make([][]float64, g.Nq)
			for tok := range g.Nq {
				at := (b*g.Hq+h)*g.Nq + tok
				row := make([]float64, g.Dv)
				if l[at] > 0 {
					for d := range row {
						row[d] = acc[at][d] / l[at]
					}
				}
				out[b][h][tok] = row
			}
		}
	}
	return out, tiles, ok
}

// simulateRows runs every row of p on physical copies, updating the
// unnormalized state (l, acc) of each (b, h, token), and returns the tiles
// computed. Logits of unit-scale test inputs are small, so exp without a
// running max is exact enough in float64.
func simulateRows(p *plan.Plan, q, k, v *tensor.Tensor, l []float64, acc [][]float64, ok *bool) (tiles int) {
	g := p.Geometry
	off := g.QueryOffset()
	scale := float64(p.SoftmaxScale())
	for b := range g.B {
		for h := range g.Hq {
			kh := g.KVHead(h)
			for qb := range p.QBlocks() {
				r := p.Row(b, h, qb)
				lo, hi := p.QueryRange(qb)
				var qtok []int
				var qc [][]float64
				for pos := lo; pos < hi; pos++ {
					tok := pos
					if p.Order.Query != nil {
						tok = int(p.Order.Query[(b*g.Hq+h)*g.Nq+pos])
					}
					qtok = append(qtok, tok)
					row := make([]float64, g.D)
					for d := range row {
						row[d] = float64(q.At(b, h, tok, d))
					}
					qc = append(qc, row)
				}
				ord := p.Order.RowKV[r]
				keys := p.Order.KV[p.Order.KVStart[ord]:p.Order.KVStart[ord+1]]
				blocks, _ := p.Entries(r)
				for e, kb := range blocks {
					tokens := keys[int(kb)*p.BlockK : min(int(kb+1)*p.BlockK, len(keys))]
					kc := make([][]float64, len(tokens))
					vc := make([][]float64, len(tokens))
					for j, tok := range tokens {
						kc[j], vc[j] = make([]float64, g.D), make([]float64, g.Dv)
						for d := range g.D {
							kc[j][d] = float64(k.At(b, kh, int(tok), d))
						}
						for d := range g.Dv {
							vc[j][d] = float64(v.At(b, kh, int(tok), d))
						}
					}
					tiles++
					worst := math.Inf(-1) // largest (gain − τℓ)/gain; the tile is small when < 0
					for i := range qc {
						at := (b*g.Hq+h)*g.Nq + qtok[i]
						var gain float64
						for j, tok := range tokens {
							if p.Causal && int(tok) > qtok[i]+off {
								continue
							}
							var s float64
							for d := range g.D {
								s += qc[i][d] * kc[j][d]
							}
							w := math.Exp(s * scale)
							gain += w
							for d := range g.Dv {
								acc[at][d] += w * vc[j][d]
							}
						}
						switch {
						case l[at] == 0 && gain == 0:
							worst = math.Inf(1) // nothing visible yet: no evidence for a stop
						case gain > 0 && p.Stop != nil:
							worst = max(worst, (gain-float64(p.Stop.Tau)*l[at])/gain)
						}
						l[at] += gain
					}
					if p.Stop == nil || e < p.Stop.AfterRow(r) {
						continue
					}
					if math.Abs(worst) < 1e-4 {
						*ok = false
					}
					if worst < 0 {
						break
					}
				}
			}
		}
	}
	return tiles
}

// TestGatherEqualsPermutedCopy: the executor's index-gathered run of an
// S2O plan with early stopping equals the same computation on physically
// permuted copies, tile for tile (same number of tiles computed) and value
// for value (2e-5 absolute, the float32 executor's tolerance).
func TestGatherEqualsPermutedCopy(t *testing.T) {
	var stopped int64 // over all shapes: the test must exercise the stop rule
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, v, tl := inputs(t, s)
			p, err := s.planner(0.2).Plan(context.Background(), tl, q, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, stats := plantest.Run(t, p, q, k, v)
			want, tiles, ok := simulate(p, q, k, v)
			if !ok {
				t.Skip("a stop decision lies within rounding of τ; rerun with another seed")
			}
			t.Logf("%d rows stopped early", stats.Stopped)
			stopped += stats.Stopped
			if stats.QKBlocks != float64(tiles) {
				t.Fatalf("executor computed %v tiles, the permuted copy %d", stats.QKBlocks, tiles)
			}
			g := tl.Geometry
			var worst float64
			for b := range g.B {
				for h := range g.Hq {
					for i := range g.Nq {
						for d := range g.Dv {
							worst = max(worst, math.Abs(float64(out.At(b, h, i, d))-want[b][h][i][d]))
						}
					}
				}
			}
			if !(worst <= 2e-5) {
				t.Fatalf("max abs difference %.3g from the permuted copy", worst)
			}
		})
	}
	if stopped == 0 {
		t.Fatal("no row of any shape stopped early: the test exercised no stop")
	}
}

// TestCausalValidity: changing the values of future tokens changes no
// output of an earlier query. Values are read by neither the planner nor
// the stop rule, so the run is otherwise identical and outputs must match
// bit for bit.
func TestCausalValidity(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		if !s.Causal {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			q, k, v, tl := inputs(t, s)
			pl := s.planner(0.05)
			p, err := pl.Plan(context.Background(), tl, q, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := plantest.Run(t, p, q, k, v)
			g := tl.Geometry
			cut := g.Nk / 2 // keys ≥ cut change
			v2 := v.Clone()
			for b := range g.B {
				for h := range g.Hkv {
					for j := cut; j < g.Nk; j++ {
						for d := range g.Dv {
							v2.Set(b, h, j, d, 100+v.At(b, h, j, d))
						}
					}
				}
			}
			out2, _ := plantest.Run(t, p, q, k, v2)
			for b := range g.B {
				for h := range g.Hq {
					for i := range g.Nq {
						if i+g.QueryOffset() >= cut {
							continue
						}
						for d := range g.Dv {
							if out.At(b, h, i, d) != out2.At(b, h, i, d) {
								t.Fatalf("query %d of head %d changed when only keys ≥ %d changed", i, h, cut)
							}
						}
					}
				}
			}
		})
	}
}

// TestTauTradesWorkForError: lowering τ never stops a row earlier (the
// trajectory of ℓ does not depend on τ), so computed work grows
// monotonically as τ falls, reaching dense output with the stop off.
func TestTauTradesWorkForError(t *testing.T) {
	s := shape{plantest.Shape{B: 1, Hq: 2, Hkv: 1, Nq: 512, Nk: 512, D: 64, BlockQ: 32, BlockK: 32, Causal: true}, 128, 0, true}
	if testing.Short() {
		s = shape{plantest.Shape{B: 1, Hq: 1, Hkv: 1, Nq: 256, Nk: 256, D: 64, BlockQ: 16, BlockK: 16, Causal: true}, 32, 0, true}
	}
	q, k, v, tl := inputs(t, s)
	ref := plantest.Reference(t, q, k, v, true)
	prev := -1.0
	var errs []float64
	for _, tau := range []float64{0.3, 0.1, 0.03, 0.01, 0.001, NoStop} {
		p, err := s.planner(tau).Plan(context.Background(), tl, q, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, stats := plantest.Run(t, p, q, k, v)
		if stats.QKBlocks < prev {
			t.Fatalf("τ=%v computed %v tiles, fewer than %v at a larger τ", tau, stats.QKBlocks, prev)
		}
		prev = stats.QKBlocks
		e := plantest.Compare(t, ref, out)
		errs = append(errs, e.RelL1)
		t.Logf("τ=%-6v sparsity %.3f rel L1 %.4f", tau, stats.Sparsity(), e.RelL1)
	}
	if errs[0] <= errs[len(errs)-1] || errs[len(errs)-1] > 1e-5 {
		t.Fatalf("errors %v: want the largest τ worse than no stop, and no stop exact", errs)
	}
}

func TestRejectsBadOptions(t *testing.T) {
	s := shapes[0]
	q, k, _, tl := inputs(t, s)
	for _, tc := range []struct {
		name string
		p    Planner
	}{
		{"negative-segment", Planner{Segment: -64}},
		{"segment-not-multiple-of-block", Planner{Segment: 24}},
		{"tau-one", Planner{Segment: 64, Tau: 1}},
		{"tau-nan", Planner{Segment: 64, Tau: math.NaN()}},
		{"tau-minus-inf", Planner{Segment: 64, Tau: math.Inf(-1)}},
		{"negative-window", Planner{Segment: 64, Window: -1}},
		{"outliers-below-none", Planner{Segment: 64, Outliers: -2}},
		{"outliers-past-segment", Planner{Segment: 64, Outliers: 65}},
	} {
		if _, err := tc.p.Plan(context.Background(), tl, q, k, nil); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%s: got %v, want plan.ErrInvalid", tc.name, err)
		}
	}
	if _, err := (Planner{Segment: 64}).Plan(context.Background(), tl, nil, k, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("nil q: %v", err)
	}
	if _, err := (Planner{Segment: 64}).Plan(context.Background(), tl, k, q, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("swapped q and k: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Planner{Segment: 64}).Plan(ctx, tl, q, k, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

// TestDefaultSegment checks the zero Segment's length per N and BlockQ,
// and that a zero Segment plans exactly as the length it stands for.
func TestDefaultSegment(t *testing.T) {
	for _, tc := range []struct{ nq, bq, want int }{
		{100, 64, 512}, {4096, 64, 512}, {8192, 128, 512}, {16384, 128, 1024},
		{32768, 64, 2048}, {131072, 128, 2048}, {20000, 128, 1280}, {20000, 96, 1344},
	} {
		if got := DefaultSegment(tc.nq, tc.bq); got != tc.want {
			t.Errorf("DefaultSegment(%d, %d) = %d, want %d", tc.nq, tc.bq, got, tc.want)
		}
	}
	q, k, v, tl := inputs(t, shape{Shape: plantest.Shape{Name: "long", B: 1, Hq: 2, Hkv: 1, Nq: 1200, Nk: 1200, D: 32, BlockQ: 64, BlockK: 64, Causal: true}})
	for _, qperm := range []bool{true, false} {
		zero, err := Planner{Tau: 0.01, QueryPerm: qperm}.Plan(context.Background(), tl, q, k, v)
		if err != nil {
			t.Fatal(err)
		}
		explicit, err := Planner{Segment: DefaultSegment(tl.Geometry.Nq, tl.BlockQ), Tau: 0.01, QueryPerm: qperm}.Plan(context.Background(), tl, q, k, v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(zero, explicit) {
			t.Errorf("QueryPerm %v: a zero Segment plans differently from DefaultSegment", qperm)
		}
	}
}

// TestTauSettings: a zero Tau plans exactly as DefaultTau (stop rule
// attached at that τ), and every negative τ exactly as NoStop (no stop
// rule): the zero value is the CLI's default and the exact plan stays one
// field away.
func TestTauSettings(t *testing.T) {
	s := shapes[0]
	q, k, v, tl := inputs(t, s)
	run := func(tau float64) *plan.Plan {
		t.Helper()
		p, err := s.planner(tau).Plan(context.Background(), tl, q, k, v)
		if err != nil {
			t.Fatalf("τ=%v: %v", tau, err)
		}
		return p
	}
	zero, def := run(0), run(DefaultTau)
	if zero.Stop == nil || zero.Stop.Tau != float32(DefaultTau) || !reflect.DeepEqual(zero, def) {
		t.Errorf("τ=0 plans differently from DefaultTau %v (stop rule %+v)", DefaultTau, zero.Stop)
	}
	off := run(NoStop)
	if off.Stop != nil {
		t.Errorf("NoStop attached a stop rule %+v", off.Stop)
	}
	for _, tau := range []float64{-1e-9, -0.5, -math.MaxFloat64} {
		if !reflect.DeepEqual(run(tau), off) {
			t.Errorf("τ=%v plans differently from NoStop", tau)
		}
	}
}
