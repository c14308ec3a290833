package flexprefill

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// shapes are the awkward cases of the probing planners.
var shapes = plantest.Prefill()

// inputs draws a problem of shape s, q and k with standard deviation 1.2.
func inputs(t *testing.T, s plantest.Shape) (q, k, v *tensor.Tensor, tl plan.Tiling) {
	pr := s.Problem(t, testutil.Rand(t), 1.2, 1.2)
	return pr.Q, pr.K, pr.V, pr.Tiling
}

// naive is one head's FlexPrefill quantities in float64, from the
// definitions: the probe (last query block) attention, its mean per key
// and per diagonal, their block sums, the pooled estimate and the
// square-root JS divergence.
type naive struct {
	vert, vb []float64
	slash    map[int]float64 // per offset
	sb       map[int]float64 // per block diagonal
	dist     float64
}

func computeNaive(p *plan.Plan, q, k *tensor.Tensor, b, h int) naive {
	g := p.Geometry
	kh := g.KVHead(h)
	n := min(p.BlockQ, g.Nq)
	scale := 1 / math.Sqrt(float64(g.D))
	nv := naive{vert: make([]float64, g.Nk), vb: make([]float64, p.KBlocks()), slash: map[int]float64{}, sb: map[int]float64{}}
	qmean := make([]float64, g.D)
	for i := g.Nq - n; i < g.Nq; i++ {
		pos := i + g.QueryOffset()
		w := make([]float64, g.Nk)
		var sum float64
		for j := range g.Nk {
			if p.Causal && j > pos {
				continue
			}
			var s float64
			for d := range g.D {
				s += float64(q.At(b, h, i, d)) * float64(k.At(b, kh, j, d))
			}
			w[j] = math.Exp(s * scale)
			sum += w[j]
		}
		for j := range w {
			w[j] /= sum * float64(n)
			nv.vert[j] += w[j]
			nv.vb[j/p.BlockK] += w[j]
			if w[j] > 0 {
				nv.slash[pos-j] += w[j]
				nv.sb[int(math.Floor(float64(pos-j)/float64(p.BlockK)))] += w[j]
			}
		}
		for d := range g.D {
			qmean[d] += float64(q.At(b, h, i, d)) / float64(n)
		}
	}
	est := make([]float64, p.KBlocks())
	var sum float64
	for kb := range est {
		klo, khi := p.KeyRange(kb)
		var s float64
		for j := klo; j < khi; j++ {
			for d := range g.D {
				s += qmean[d] * float64(k.At(b, kh, j, d)) / float64(khi-klo)
			}
		}
		est[kb] = math.Exp(s * scale)
		sum += est[kb]
	}
	var js float64
	for kb := range est {
		pe, pv := est[kb]/sum, nv.vb[kb]
		m := (pe + pv) / 2
		js += 0.5 * pe * math.Log(pe/m)
		if pv > 0 {
			js += 0.5 * pv * math.Log(pv/m)
		}
	}
	nv.dist = math.Sqrt(max(js, 0)) // rounding can leave js a hair below 0 for equal distributions
	return nv
}

// TestDecisionsMatchNaive: distances and the JS choice match float64 (τ is
// set between the heads' distances so both patterns occur), budgets are
// the γ-cover in blocks, the vertical and slash blocks are the top pooled
// sums after the forced first block and main diagonal, query-aware blocks
// follow the heaviest-first γ rule, and rows are exactly the union of the
// head's patterns over its visible blocks.
func TestDecisionsMatchNaive(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, _, tl := inputs(t, s)
			dense, _ := plan.Dense(tl)
			g := tl.Geometry
			var nvs []naive
			var dists []float64
			for b := range g.B {
				for h := range g.Hq {
					nv := computeNaive(dense, q, k, b, h)
					nvs = append(nvs, nv)
					dists = append(dists, nv.dist)
				}
			}
			sorted := slices.Clone(dists)
			sort.Float64s(sorted)
			tau := (sorted[len(sorted)/2] + sorted[max(len(sorted)/2-1, 0)]) / 2
			if len(sorted) > 1 && sorted[len(sorted)/2]-sorted[len(sorted)/2-1] < 1e-5 {
				t.Skip("median distances tie within rounding")
			}
			const gamma = 0.8
			f := Planner{Gamma: gamma, Tau: tau}
			p, err := f.Plan(context.Background(), tl, q, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			aware := 0
			for i, nv := range nvs {
				b, h := i/g.Hq, i%g.Hq
				hd := f.Decide(dense, q, k, b, h)
				if math.Abs(hd.Distance-nv.dist) > 1e-6 {
					t.Fatalf("head %d: distance %.9f, float64 %.9f", i, hd.Distance, nv.dist)
				}
				if hd.QueryAware != (nv.dist < tau) {
					t.Fatalf("head %d: query-aware %v with distance %.6f and τ %.6f", i, hd.QueryAware, nv.dist, tau)
				}
				// Budgets and top blocks.
				cover := func(x []float64) int {
					s := slices.Clone(x)
					sort.Sort(sort.Reverse(sort.Float64Slice(s)))
					var c float64
					for i, v := range s {
						if c += v; c > gamma {
							return i
						}
					}
					return len(s)
				}
				var slashVals []float64
				for _, x := range nv.slash {
					slashVals = append(slashVals, x)
				}
				wantV := min(max(cover(nv.vert)/s.BlockK+1, 1), dense.KBlocks())
				wantS := min(max(cover(slashVals)/s.BlockK+1, 1), dense.KBlocks())
				if hd.QueryAware {
					wantV, wantS = 1, 1
					aware++
				}
				if len(hd.Vertical) != wantV || len(hd.Slash) != min(wantS, len(nv.sb)+1) && len(hd.Slash) != min(wantS, len(nv.sb)) {
					t.Fatalf("head %d: %d vertical and %d slash blocks, want %d and %d", i, len(hd.Vertical), len(hd.Slash), wantV, wantS)
				}
				checkTop(t, "vertical", hd.Vertical, dense.KBlocks(), func(kb int) float64 { return nv.vb[kb] })
				var diags []int
				for s := range nv.sb {
					diags = append(diags, s)
				}
				if hd.Slash[0] != 0 {
					t.Fatalf("head %d: main diagonal not kept first: %v", i, hd.Slash)
				}
				for _, s := range hd.Slash[1:] {
					for _, o := range diags {
						if o != 0 && !slices.Contains(hd.Slash, o) && nv.sb[o] > nv.sb[s]+1e-6 {
							t.Fatalf("head %d: diagonal %d (%.6f) dropped, %d (%.6f) kept", i, o, nv.sb[o], s, nv.sb[s])
						}
					}
				}
				if hd.QueryAware {
					checkQueryAware(t, dense, q, k, b, h, hd, gamma)
				}
				for qb := range dense.QBlocks() {
					visible, _ := dense.Entries(dense.Row(b, h, qb))
					_, qhi := dense.QueryRange(qb)
					diag := (qhi - 1 + g.QueryOffset()) / s.BlockK
					var want []int32
					for _, kb := range visible {
						if slices.Contains(hd.Vertical, int(kb)) || slices.Contains(hd.Slash, diag-int(kb)) || hd.Blocks != nil && slices.Contains(hd.Blocks[qb], int(kb)) {
							want = append(want, kb)
						}
					}
					if got, _ := p.Entries(p.Row(b, h, qb)); !slices.Equal(got, want) {
						t.Fatalf("head %d q block %d: %v, want %v", i, qb, got, want)
					}
				}
			}
			if len(nvs) > 1 && (aware == 0 || aware == len(nvs)) {
				t.Fatalf("%d of %d heads query-aware; τ between the distances should split them", aware, len(nvs))
			}
		})
	}
}

// checkTop: block 0 first, then no dropped block outscores a kept one.
func checkTop(t *testing.T, what string, kept []int, n int, score func(int) float64) {
	t.Helper()
	if kept[0] != 0 {
		t.Fatalf("%s: first block not kept first: %v", what, kept)
	}
	for _, kb := range kept[1:] {
		for o := 1; o < n; o++ {
			if !slices.Contains(kept, o) && score(o) > score(kb)+1e-6 {
				t.Fatalf("%s: block %d (%.6f) dropped, %d (%.6f) kept", what, o, score(o), kb, score(kb))
			}
		}
	}
}

// checkQueryAware recomputes the pooled estimate in float64 and checks the
// γ rule: kept pairs total at most γ·rows, heaviest first, and the
// heaviest dropped pair would not fit.
func checkQueryAware(t *testing.T, p *plan.Plan, q, k *tensor.Tensor, b, h int, hd Head, gamma float64) {
	t.Helper()
	g := p.Geometry
	scale := 1 / math.Sqrt(float64(g.D))
	var kept, dropped []float64
	rows := 0
	for qb := range p.QBlocks() {
		visible, _ := p.Entries(p.Row(b, h, qb))
		if len(visible) == 0 {
			continue
		}
		rows++
		qlo, qhi := p.QueryRange(qb)
		w := map[int]float64{}
		var sum float64
		for _, kb := range visible {
			klo, khi := p.KeyRange(int(kb))
			var s float64
			for i := qlo; i < qhi; i++ {
				for j := klo; j < khi; j++ {
					for d := range g.D {
						s += float64(q.At(b, h, i, d)) * float64(k.At(b, g.KVHead(h), j, d))
					}
				}
			}
			w[int(kb)] = math.Exp(s / float64((qhi-qlo)*(khi-klo)) * scale)
			sum += w[int(kb)]
		}
		for kb, x := range w {
			if slices.Contains(hd.Blocks[qb], kb) {
				kept = append(kept, x/sum)
			} else {
				dropped = append(dropped, x/sum)
			}
		}
	}
	var total float64
	lightest := math.Inf(1)
	for _, x := range kept {
		total += x
		lightest = min(lightest, x)
	}
	if total > gamma*float64(rows)+1e-6 {
		t.Fatalf("query-aware blocks hold %.6f > γ·rows %.6f", total, gamma*float64(rows))
	}
	heaviest := 0.0
	for _, x := range dropped {
		heaviest = max(heaviest, x)
		if x > lightest+1e-6 {
			t.Fatalf("query-aware: dropped pair %.6f heavier than kept %.6f", x, lightest)
		}
	}
	if len(dropped) > 0 && total+heaviest <= gamma*float64(rows)-1e-6 {
		t.Fatalf("query-aware: the heaviest dropped pair %.6f would still fit (%.6f of %.6f)", heaviest, total, gamma*float64(rows))
	}
}

// TestGammaOneIsDense: γ is the knob; kept blocks grow with it (budgets
// grow and every selection is a prefix of one fixed order), and with γ = 1
// and vertical-slash heads (NoQueryAware) every block is kept: dense output within
// the float32 executor's 2e-5 against the float64 reference.
func TestGammaOneIsDense(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, v, tl := inputs(t, s)
			for _, tau := range []float64{NoQueryAware, 1} {
				prev := -1.0
				var out *tensor.Tensor
				for _, gamma := range []float64{0.5, 0.8, 0.95, 1} {
					p, err := Planner{Gamma: gamma, Tau: tau}.Plan(context.Background(), tl, q, k, nil)
					if err != nil {
						t.Fatal(err)
					}
					var stats plan.Stats
					out, stats = plantest.Run(t, p, q, k, v)
					if stats.QKBlocks < prev {
						t.Fatalf("τ=%v γ=%v computed %v blocks, fewer than %v at a smaller γ", tau, gamma, stats.QKBlocks, prev)
					}
					prev = stats.QKBlocks
				}
				if tau > 0 {
					continue
				}
				ref := plantest.Reference(t, q, k, v, s.Causal)
				e := plantest.Compare(t, ref, out)
				if !(e.MaxAbs <= 2e-5) {
					t.Fatalf("γ=1: max abs error %.3g against dense", e.MaxAbs)
				}
			}
		})
	}
}

func TestRejectsBadOptions(t *testing.T) {
	q, k, _, tl := inputs(t, shapes[0])
	for _, f := range []Planner{
		{Gamma: -0.5, Tau: 0.1}, // 0 is DefaultGamma
		{Gamma: 1.1, Tau: 0.1},
		{Gamma: 0.9, Tau: math.NaN()},
		{Gamma: 0.9, Tau: math.Inf(1)},
		{Gamma: 0.9, Tau: math.Inf(-1)},
		{Gamma: 0.9, MinBudget: -1},
		{Gamma: 0.9, MinBudget: 4, MaxBudget: 2},
	} {
		if _, err := f.Plan(context.Background(), tl, q, k, nil); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%+v: got %v, want plan.ErrInvalid", f, err)
		}
	}
	if _, err := (Planner{Gamma: 0.9}).Plan(context.Background(), tl, nil, k, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("nil q: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Planner{Gamma: 0.9}).Plan(ctx, tl, q, k, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

// TestTauSettings: a zero Tau plans exactly as DefaultTau, and every
// negative τ exactly as NoQueryAware, with every head vertical-slash.
func TestTauSettings(t *testing.T) {
	for _, s := range plantest.Select(shapes) {
		t.Run(s.Name, func(t *testing.T) {
			q, k, _, tl := inputs(t, s)
			run := func(f Planner) *plan.Plan {
				t.Helper()
				p, err := f.Plan(context.Background(), tl, q, k, nil)
				if err != nil {
					t.Fatalf("%+v: %v", f, err)
				}
				return p
			}
			if !reflect.DeepEqual(run(Planner{Gamma: 0.9}), run(Planner{Gamma: 0.9, Tau: DefaultTau})) {
				t.Errorf("τ=0 plans differently from DefaultTau %v", DefaultTau)
			}
			off := run(Planner{Gamma: 0.9, Tau: NoQueryAware})
			for _, tau := range []float64{-1e-9, -0.5, -math.MaxFloat64} {
				if !reflect.DeepEqual(run(Planner{Gamma: 0.9, Tau: tau}), off) {
					t.Errorf("τ=%v plans differently from NoQueryAware", tau)
				}
			}
			dense, err := plan.Dense(tl)
			if err != nil {
				t.Fatal(err)
			}
			for b := range tl.Geometry.B {
				for h := range tl.Geometry.Hq {
					if hd := (Planner{Tau: NoQueryAware}).Decide(dense, q, k, b, h); hd.QueryAware || hd.Blocks != nil {
						t.Errorf("head (%d, %d) query-aware under NoQueryAware (distance %v)", b, h, hd.Distance)
					}
				}
			}
		})
	}
}
