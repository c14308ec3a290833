package psa

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// shapes are the awkward cases every planner must handle.
var shapes = plantest.Awkward()

// f64 is a tensor copied to float64 once, so naive references read rows
// without converting them per use.
type f64 struct {
	s tensor.Shape
	x []float64
}

func to64(x *tensor.Tensor) f64 {
	s := x.Shape()
	out := f64{s: s, x: make([]float64, 0, s.B*s.H*s.N*s.D)}
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				for d := range s.D {
					out.x = append(out.x, float64(x.At(b, h, n, d)))
				}
			}
		}
	}
	return out
}

func (t f64) row(b, h, n int) []float64 {
	i := ((b*t.s.H+h)*t.s.N + n) * t.s.D
	return t.x[i : i+t.s.D]
}

func row64(x *tensor.Tensor, b, h, n int) []float64 {
	out := make([]float64, x.Shape().D)
	for d := range out {
		out[d] = float64(x.At(b, h, n, d))
	}
	return out
}

func dot64(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// meanPool is PSA Eq. 2–3's MeanPool(x, 2, 2) along the tokens; an odd last
// token is kept alone.
func meanPool(x [][]float64) [][]float64 {
	var out [][]float64
	for i := 0; i < len(x); i += 2 {
		if i+1 == len(x) {
			out = append(out, slices.Clone(x[i]))
			continue
		}
		m := make([]float64, len(x[i]))
		for d := range m {
			m[d] = (x[i][d] + x[i+1][d]) / 2
		}
		out = append(out, m)
	}
	return out
}

// algorithm1 computes PSA Algorithm 1 naively in float64 from the plan's
// levels: a level-h block attends to its KV pyramid level K_j^h, V_j^h with
// logit bias (h−1)·ln 2. A block whose length is not a multiple of 2^(h-1)
// (a ragged last block) uses the plan format's generalization instead: each
// pooled entry is the mean of the up to 2^(h-1) tokens it stands for, with
// bias ln(count).
func algorithm1(p *plan.Plan, qt, kt, vt *tensor.Tensor) [][]float64 {
	g := p.Geometry
	q, k, v := to64(qt), to64(kt), to64(vt)
	scale := float64(p.SoftmaxScale())
	var out [][]float64
	for b := range g.B {
		for h := range g.Hq {
			kh := g.KVHead(h)
			for qi := range g.Nq {
				qr := q.row(b, h, qi)
				blocks, levels := p.Entries(p.Row(b, h, qi/p.BlockQ))
				var logits []float64
				var vals [][]float64
				for e, kb := range blocks {
					lv := plan.Full
					if levels != nil {
						lv = levels[e]
					}
					lo, hi := p.KeyRange(int(kb))
					if lv == plan.Full {
						for j := lo; j < hi; j++ {
							if p.Visible(qi, j) {
								logits = append(logits, scale*dot64(qr, k.row(b, kh, j)))
								vals = append(vals, v.row(b, kh, j))
							}
						}
						continue
					}
					size := lv.Pool()
					var pk, pv [][]float64
					var bias []float64
					if (hi-lo)%size == 0 { // Eq. 2–3: pool 2× per level
						for j := lo; j < hi; j++ {
							pk = append(pk, slices.Clone(k.row(b, kh, j)))
							pv = append(pv, slices.Clone(v.row(b, kh, j)))
						}
						for range lv - 1 {
							pk, pv = meanPool(pk), meanPool(pv)
						}
						for range pk {
							bias = append(bias, float64(lv-1)*math.Ln2)
						}
					} else {
						for t := lo; t < hi; t += size {
							n := min(size, hi-t)
							mk, mv := make([]float64, g.D), make([]float64, g.Dv)
							for j := t; j < t+n; j++ {
								for d, x := range k.row(b, kh, j) {
									mk[d] += x / float64(n)
								}
								for d, x := range v.row(b, kh, j) {
									mv[d] += x / float64(n)
								}
							}
							pk, pv, bias = append(pk, mk), append(pv, mv), append(bias, math.Log(float64(n)))
						}
					}
					for i := range pk {
						logits = append(logits, scale*dot64(qr, pk[i])+bias[i])
						vals = append(vals, pv[i])
					}
				}
				o := make([]float64, g.Dv)
				if len(logits) > 0 {
					m := slices.Max(logits)
					var sum float64
					for i, s := range logits {
						w := math.Exp(s - m)
						sum += w
						for d := range o {
							o[d] += w * vals[i][d]
						}
					}
					for d := range o {
						o[d] /= sum
					}
				}
				out = append(out, o)
			}
		}
	}
	return out
}

// relL1 is Σ|got − want| / Σ|want| over every output row.
func relL1(t *testing.T, want [][]float64, got *tensor.Tensor) float64 {
	t.Helper()
	s := got.Shape()
	var num, den float64
	i := 0
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				for d := range s.D {
					x := float64(got.At(b, h, n, d))
					if math.IsNaN(x) || math.IsInf(x, 0) {
						t.Fatalf("output [%d,%d,%d,%d] = %v", b, h, n, d, x)
					}
					num += math.Abs(x - want[i][d])
					den += math.Abs(want[i][d])
				}
				i++
			}
		}
	}
	if den == 0 {
		return num
	}
	return num / den
}

// levelCounts returns how many entries each level has.
func levelCounts(p *plan.Plan) map[plan.Level]int {
	c := map[plan.Level]int{}
	for i := range p.KVBlock {
		c[p.LevelAt(i)]++
	}
	return c
}

// TestExecutorRunsAlgorithm1 checks the cpu executor on PSA plans against a
// float64 Algorithm 1 over explicitly pooled K and V with the (h−1)·ln 2
// bias, on every awkward shape. Tolerance 2e-5 relative L1: float32
// accumulation over at most a few hundred keys of O(1) values, with the
// float32 pooled means, stays near 1e-6; a wrong bias (ln 2 ≈ 0.69 in a
// logit) or a wrong pool moves outputs by percents.
func TestExecutorRunsAlgorithm1(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 1.5, 1)
			for _, pl := range []Planner{
				{Thresholds: []float64{0.3, 0.5, 0.7, 0.9}, Scale: 1},
				{Thresholds: []float64{0.2, 0.4, 0.6, 0.8, 0.9}, Estimator: Antidiagonal, Stride: 4, Scale: 1},
				{Rule: Quantile, Quantiles: []float64{0.2, 0.4, 0.6, 0.8}, Scale: 1},
			} {
				p, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				out, _ := plantest.Run(t, p, pr.Q, pr.K, pr.V)
				if e := relL1(t, algorithm1(p, pr.Q, pr.K, pr.V), out); e > 2e-5 {
					t.Errorf("%+v: rel L1 %.2e against float64 Algorithm 1 (levels %v)", pl, e, levelCounts(p))
				}
			}
		})
	}
}

// TestLevelOneEverywhereIsDense: with one level and τ = 1 (or any plan whose
// scale lifts τ_1 to 1) every visible block is read exactly, so the output is
// dense attention. Tolerance 2e-5 relative L1, as above.
func TestLevelOneEverywhereIsDense(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 1.5, 1)
			ref := plantest.Reference(t, pr.Q, pr.K, pr.V, s.Causal)
			for _, pl := range []Planner{
				{Thresholds: []float64{1}, Scale: 1},
				{Scale: 1 / 0.7},
				{Rule: Quantile, Quantiles: []float64{1, 1}, Scale: 1},
				{Estimator: Antidiagonal, Thresholds: []float64{1, 1, 1}, Scale: 1},
			} {
				p, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				if got := levelCounts(p); len(got) != 1 || got[plan.Full] == 0 {
					t.Errorf("%+v: levels %v, want level 1 only", pl, got)
				}
				out, st := plantest.Run(t, p, pr.Q, pr.K, pr.V)
				if st.Sparsity() != 0 {
					t.Errorf("%+v: sparsity %v, want 0", pl, st.Sparsity())
				}
				e := plantest.Compare(t, ref, out)
				if e.RelL1 > 2e-5 {
					t.Errorf("%+v: rel L1 %.2e against dense", pl, e.RelL1)
				}
			}
		})
	}
}

// naiveRowImportance recomputes one row's importance in float64 from the
// equations: Sampling (PSA Eq. 4) scores a block by the largest softmax
// weight among its sampled pairs, the softmax running over every sampled key
// of the row that the query may see; Antidiagonal (XAttention) takes, for
// each query group and key group of Stride tokens, scale/Stride times the sum
// of q·k over the visible pairs on the tile's antidiagonal, a softmax per
// query group over all key groups, and per block the summed weight. qTok and
// keyTok are the query rows' tokens and each block's key tokens (Sampling),
// or the groups' first tokens (Antidiagonal).
func naiveRowImportance(p *plan.Plan, c config, pr plantest.Problem, b, h, qb int, blocks []int32, qTok []int, keyTok [][]int) []float64 {
	g := p.Geometry
	kh := g.KVHead(h)
	scale := float64(p.SoftmaxScale())
	_, qhi := p.QueryRange(qb)
	q, k := to64(pr.Q), to64(pr.K)
	score := map[int32]float64{}
	for _, qt := range qTok {
		type logit struct {
			kb int32
			s  float64
		}
		var ls []logit
		for _, kb := range blocks {
			_, khi := p.KeyRange(int(kb))
			for _, kt := range keyTok[kb] {
				if c.estimator == Sampling {
					if p.Visible(qt, kt) {
						ls = append(ls, logit{kb, scale * dot64(q.row(b, h, qt), k.row(b, kh, kt))})
					}
					continue
				}
				var s float64
				any := false
				for t := range c.stride {
					qi, kj := qt+t, kt+c.stride-1-t
					if qi >= qhi || kj >= khi || !p.Visible(qi, kj) {
						continue
					}
					any = true
					s += dot64(q.row(b, h, qi), k.row(b, kh, kj))
				}
				if any {
					ls = append(ls, logit{kb, s * scale / float64(c.stride)})
				}
			}
		}
		if len(ls) == 0 {
			continue
		}
		m := math.Inf(-1)
		for _, l := range ls {
			m = max(m, l.s)
		}
		var sum float64
		for _, l := range ls {
			sum += math.Exp(l.s - m)
		}
		for _, l := range ls {
			w := math.Exp(l.s-m) / sum
			if c.estimator == Sampling {
				score[l.kb] = max(score[l.kb], w)
			} else {
				score[l.kb] += w
			}
		}
	}
	out := make([]float64, len(blocks))
	for i, kb := range blocks {
		out[i] = score[kb]
	}
	return out
}

// TestEstimatorsMatchEquations compares both importance estimators with
// their float64 equations on every shape. The sampled tokens are the
// planner's own draw (the same seeded generator), and the test also checks
// that a draw is SampleQ/SampleK distinct tokens of the block. Tolerance
// 1e-4 absolute on softmax weights in [0, 1]: float32 logits of D ≤ 256
// products of N(0, 1.5²)·N(0, 1) values err by ~1e-5.
func TestEstimatorsMatchEquations(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 1.5, 1)
			dense, err := plan.Dense(pr.Tiling)
			if err != nil {
				t.Fatal(err)
			}
			for _, pl := range []Planner{
				{SampleQ: 3, SampleK: 5, Seed: r.Uint64()},
				{Estimator: Antidiagonal, Stride: 4},
				{Estimator: Antidiagonal, Stride: 3}, // does not divide the blocks
			} {
				c, err := pl.config(pr.Tiling)
				if err != nil {
					t.Fatal(err)
				}
				est := newEstimator(dense, c, pr.Q, pr.K)
				g := pr.Tiling.Geometry
				for b := range g.B {
					for h := range g.Hq {
						est.head(b, h)
						keyTok := make([][]int, dense.KBlocks())
						for kb := range keyTok {
							lo, hi := dense.KeyRange(kb)
							keyTok[kb] = est.colTok[est.colStart[kb]:est.colStart[kb+1]]
							want := min(c.sampleK, hi-lo)
							if c.estimator == Antidiagonal {
								want = (hi - lo + c.stride - 1) / c.stride
							}
							checkDraw(t, keyTok[kb], lo, hi, want)
						}
						for qb := range dense.QBlocks() {
							blocks, _ := dense.Entries(dense.Row(b, h, qb))
							got := est.row(qb, blocks, nil)
							qTok := slices.Clone(est.qTok)
							qlo, qhi := dense.QueryRange(qb)
							want := min(c.sampleQ, qhi-qlo)
							if c.estimator == Antidiagonal {
								want = (qhi - qlo + c.stride - 1) / c.stride
							}
							checkDraw(t, qTok, qlo, qhi, want)
							ref := naiveRowImportance(dense, c, pr, b, h, qb, blocks, qTok, keyTok)
							for i := range ref {
								if math.Abs(got[i]-ref[i]) > 1e-4 {
									t.Fatalf("%v stride %d b%d h%d qb%d block %d: importance %.6f, want %.6f", c.estimator, c.stride, b, h, qb, blocks[i], got[i], ref[i])
								}
							}
						}
					}
				}
			}
		})
	}
}

// checkDraw checks that toks are want distinct tokens in [lo, hi).
func checkDraw(t *testing.T, toks []int, lo, hi, want int) {
	t.Helper()
	if len(toks) != want {
		t.Fatalf("drew %d tokens of [%d,%d), want %d", len(toks), lo, hi, want)
	}
	seen := map[int]bool{}
	for _, x := range toks {
		if x < lo || x >= hi || seen[x] {
			t.Fatalf("draw %v: token %d repeated or outside [%d,%d)", toks, x, lo, hi)
		}
		seen[x] = true
	}
}

// naiveLevels assigns levels from the rule's definition, block by block:
// rank a block by counting heavier blocks (ties broken by position); under
// Threshold its level is the first t whose τ_t exceeds the normalized mass
// ranked before it (or is 1), under Quantile the first t whose ⌈q_t·n⌉
// exceeds its rank; otherwise it is skipped.
func naiveLevels(rule Rule, cuts []float64, imp []float64) []plan.Level {
	n := len(imp)
	var total float64
	for _, x := range imp {
		total += x
	}
	w := func(j int) float64 {
		if total == 0 {
			return 1 / float64(n)
		}
		return imp[j] / total
	}
	out := make([]plan.Level, n)
	for j := range n {
		rank, before := 0, 0.0
		for i := range n {
			if imp[i] > imp[j] || (imp[i] == imp[j] && i < j) {
				rank++
				before += w(i)
			}
		}
		for t, cut := range cuts {
			if (rule == Threshold && (cut >= 1 || before < cut)) ||
				(rule == Quantile && float64(rank) < math.Ceil(cut*float64(n)-1e-9)) {
				out[j] = plan.Level(t + 1)
				break
			}
		}
	}
	return out
}

// TestAssignMatchesDefinition checks level assignment against naiveLevels
// on random rows (with ties and all-zero rows), and checks Algorithm 2's
// defining property: under Threshold the blocks at level ≤ t are the
// smallest set of heaviest blocks whose mass reaches τ_t.
func TestAssignMatchesDefinition(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		cuts []float64
		imp  []float64
		want []plan.Level
	}{
		{Threshold, []float64{0.5}, []float64{1, 1, 1, 1}, []plan.Level{1, 1, 0, 0}},              // the third block starts at exactly τ
		{Threshold, []float64{0.5, 0.75, 0.875}, []float64{1, 1, 2, 4}, []plan.Level{3, 0, 2, 1}}, // binary fractions: exact sums
		{Threshold, []float64{0.95}, []float64{97, 1, 1, 1}, []plan.Level{1, 0, 0, 0}},
		{Threshold, []float64{0}, []float64{1, 2}, []plan.Level{0, 0}},
		{Threshold, []float64{0.5, 1}, []float64{0, 0, 5}, []plan.Level{2, 2, 1}},
		{Quantile, []float64{0.25, 0.5}, []float64{4, 3, 2, 1}, []plan.Level{1, 2, 0, 0}},
		{Quantile, []float64{0.1, 0.1, 0.5}, []float64{1, 2, 3, 4}, []plan.Level{0, 0, 3, 1}},
	} {
		got := make([]plan.Level, len(tc.imp))
		assign(config{rule: tc.rule, cuts: tc.cuts}, tc.imp, got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v %v on %v: levels %v, want %v", tc.rule, tc.cuts, tc.imp, got, tc.want)
		}
	}
	r := testutil.Rand(t)
	for trial := range 500 {
		n := 1 + r.IntN(40)
		imp := make([]float64, n)
		for i := range imp {
			switch r.IntN(4) {
			case 0:
				imp[i] = float64(r.IntN(3)) // ties and zeros
			default:
				imp[i] = math.Exp(4 * r.NormFloat64())
			}
		}
		if trial%50 == 0 {
			clear(imp)
		}
		h := 1 + r.IntN(int(plan.MaxLevel))
		cuts := make([]float64, h)
		for i := range cuts {
			cuts[i] = r.Float64()
			if r.IntN(8) == 0 {
				cuts[i] = 1
			}
		}
		slices.Sort(cuts)
		for _, rule := range []Rule{Threshold, Quantile} {
			got := make([]plan.Level, n)
			assign(config{rule: rule, cuts: cuts}, imp, got)
			if want := naiveLevels(rule, cuts, imp); !slices.Equal(got, want) {
				t.Fatalf("%v cuts %v imp %v: levels %v, want %v", rule, cuts, imp, got, want)
			}
			if rule != Threshold {
				continue
			}
			var total float64
			for _, x := range imp {
				total += x
			}
			for lvl, tau := range cuts {
				var mass, lightest float64 = 0, math.Inf(1)
				for i, l := range got {
					if l != plan.Skip && int(l) <= lvl+1 {
						mass += imp[i]
						lightest = min(lightest, imp[i])
					}
				}
				if total == 0 {
					continue
				}
				if mass/total < tau-1e-12 {
					t.Fatalf("cuts %v imp %v: levels ≤ %d hold %.4f < τ=%v", cuts, imp, lvl+1, mass/total, tau)
				}
				if tau < 1 && lightest > 0 && (mass-lightest)/total >= tau+1e-12 {
					t.Fatalf("cuts %v imp %v: levels ≤ %d hold %.4f even without their lightest block", cuts, imp, lvl+1, mass/total)
				}
			}
		}
	}
}

// TestSimilarityCap checks Algorithm 3 against a direct float64
// computation on blocks built to be poolable to a known depth: keys that
// repeat in runs of 2^m tokens plus small noise are similar within groups of
// up to 2^m tokens and unrelated across runs.
func TestSimilarityCap(t *testing.T) {
	r := testutil.Rand(t)
	const d, bk, nk = 32, 16, 72 // ragged last block of 8
	k, err := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 3, N: nk, D: d})
	if err != nil {
		t.Fatal(err)
	}
	for h := range 3 {
		run := 1 << h // head h repeats keys in runs of 1, 2, 4
		base := make([]float64, d)
		for j := range nk {
			if j%run == 0 {
				for i := range base {
					base[i] = r.NormFloat64()
				}
			}
			for i := range base {
				k.Set(0, h, j, i, float32(base[i]+0.01*r.NormFloat64()))
			}
		}
	}
	g := tensor.Geometry{B: 1, Hq: 3, Hkv: 3, Nq: nk, Nk: nk, D: d, Dv: d}
	p, err := plan.Dense(plan.Tiling{Geometry: g, BlockQ: bk, BlockK: bk})
	if err != nil {
		t.Fatal(err)
	}
	sim := []float64{0.9, 0.9, 0.9}
	caps := similarityCaps(p, k, sim)
	for h := range 3 {
		for kb := range p.KBlocks() {
			lo, hi := p.KeyRange(kb)
			want := plan.Full
			for lv := 2; lv <= 4; lv++ {
				size := 1 << (lv - 1)
				var sum float64
				pairs := 0
				for a := lo; a < hi; a += size {
					z := min(a+size, hi) - 1
					if z == a {
						continue
					}
					ka, kz := row64(k, 0, h, a), row64(k, 0, h, z)
					sum += dot64(ka, kz) / math.Sqrt(dot64(ka, ka)*dot64(kz, kz))
					pairs++
				}
				if pairs == 0 || sum/float64(pairs) > sim[lv-2] {
					want = plan.Level(lv)
				}
			}
			if got := caps[h*p.KBlocks()+kb]; got != want {
				t.Errorf("head %d block %d: cap %d, want %d", h, kb, got, want)
			}
			// Runs of 2^h tokens admit exactly level h+1.
			if got := caps[h*p.KBlocks()+kb]; got != plan.Level(h+1) {
				t.Errorf("head %d (runs of %d) block %d: cap %d, want %d", h, 1<<h, kb, got, h+1)
			}
		}
	}
	// The cap bounds the planner's levels: −1 allows all, 1 forces level 1.
	pr := plantest.Problem{Tiling: plan.Tiling{Geometry: g, BlockQ: bk, BlockK: bk}, K: k}
	pr.Q = testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 3, N: nk, D: d}, 1)
	for _, tc := range []struct {
		sim  []float64
		most plan.Level
	}{{[]float64{1, 1, 1}, plan.Full}, {[]float64{0.9, 0.9, 0.9}, 3}} {
		pl := Planner{Thresholds: []float64{0.1, 0.2, 0.3, 1}, Similarity: tc.sim, Estimator: Antidiagonal, Scale: 1}
		pp, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, nil)
		if err != nil {
			t.Fatal(err)
		}
		for h := range 3 {
			for qb := range pp.QBlocks() {
				blocks, levels := pp.Entries(pp.Row(0, h, qb))
				for e, kb := range blocks {
					lv := plan.Full
					if levels != nil {
						lv = levels[e]
					}
					if lv > tc.most || lv > caps[h*p.KBlocks()+int(kb)] {
						t.Errorf("sim %v head %d: block %d at level %d above cap", tc.sim, h, kb, lv)
					}
				}
			}
		}
	}
}

// TestBudgetMatchesCounters checks that PlanBudget (Eq. 9 from the levels)
// equals Budget of the executor's counters, that Coverage counts every
// kept block, and that a binary mask's coverage equals its budget while
// PSA's exceeds it.
func TestBudgetMatchesCounters(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 1.5, 1)
			for _, pl := range []Planner{{Scale: 1}, {Thresholds: []float64{0.6}, Scale: 1}, {Rule: Quantile, Scale: 1}} {
				p, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				_, st := plantest.Run(t, p, pr.Q, pr.K, pr.V)
				if got, want := PlanBudget(p), Budget(st); math.Abs(got-want) > 1e-9 {
					t.Errorf("%+v: PlanBudget %.6f, executor budget %.6f", pl, got, want)
				}
				if math.Abs(Budget(st)-(1-st.Sparsity())) > 1e-12 {
					t.Errorf("Budget %v is not 1 − Sparsity %v", Budget(st), st.Sparsity())
				}
				cov := Coverage(p)
				if want := float64(len(p.KVBlock)) / float64(p.DenseBlocks()); cov != want {
					t.Errorf("Coverage %v, want %v", cov, want)
				}
				if levelCounts(p)[plan.Full] == len(p.KVBlock) && math.Abs(cov-PlanBudget(p)) > 1e-12 {
					t.Errorf("binary plan: coverage %v ≠ budget %v", cov, PlanBudget(p))
				}
				if levelCounts(p)[plan.Full] < len(p.KVBlock) && !(cov > PlanBudget(p)) {
					t.Errorf("pooled plan: coverage %v not above budget %v", cov, PlanBudget(p))
				}
			}
		})
	}
	if Budget(plan.Stats{}) != 0 || PlanBudget(&plan.Plan{}) != 0 || Coverage(&plan.Plan{}) != 0 {
		t.Error("empty stats and plans must give 0")
	}
}

// TestConvergesToDense: as Scale grows toward 1/τ_1 the plan approaches
// dense and the error against the float64 reference falls to float32
// rounding, and the budget never falls as Scale rises.
func TestConvergesToDense(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range []plantest.Shape{shapes[0], shapes[2]} {
		pr := s.Problem(t, r, 2, 1)
		ref := plantest.Reference(t, pr.Q, pr.K, pr.V, s.Causal)
		for _, est := range []Estimator{Sampling, Antidiagonal} {
			prev, prevBudget := math.Inf(1), 0.0
			var errs []float64
			for _, scale := range []float64{0.5, 0.8, 1, 1.2, 1.35, 1 / 0.7} {
				p, err := Planner{Scale: scale, Estimator: est}.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				out, st := plantest.Run(t, p, pr.Q, pr.K, pr.V)
				e := plantest.Compare(t, ref, out)
				t.Logf("%s %v scale %.2f: budget %.3f coverage %.3f rel L1 %.2e", s.Name, est, scale, Budget(st), Coverage(p), e.RelL1)
				if Budget(st) < prevBudget-1e-12 {
					t.Errorf("%s %v: budget fell from %.3f to %.3f as scale rose to %v", s.Name, est, prevBudget, Budget(st), scale)
				}
				errs = append(errs, e.RelL1)
				prev, prevBudget = e.RelL1, Budget(st)
			}
			// Individual steps may trade one block's level for another's,
			// but the sparsest plan must err more than the densest
			// non-dense one.
			if !(errs[0] > errs[len(errs)-2]) {
				t.Errorf("%s %v: rel L1 %.3g at scale 0.5 not above %.3g at 1.35", s.Name, est, errs[0], errs[len(errs)-2])
			}
			if prev > 2e-5 || prevBudget != 1 {
				t.Errorf("%s %v: at scale 1/τ_1 rel L1 %.2e budget %v, want dense", s.Name, est, prev, prevBudget)
			}
		}
	}
}

// TestBadOptions checks that out-of-range options give plan.ErrInvalid
// with the valid range in the message.
func TestBadOptions(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 64, Nk: 64, D: 32, Dv: 32}
	tl := plan.Tiling{Geometry: g, BlockQ: 16, BlockK: 16}
	r := testutil.Rand(t)
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 64, D: 32}, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 64, D: 32}, 1)
	for _, tc := range []struct {
		pl   Planner
		want string
	}{
		{Planner{Thresholds: []float64{}}, "1 to 8"},
		{Planner{Thresholds: make([]float64, 9)}, "1 to 8"},
		{Planner{Thresholds: []float64{0.5, 1.5}}, "[0, 1]"},
		{Planner{Thresholds: []float64{0.9, 0.5}}, "non-decreasing"},
		{Planner{Rule: Quantile, Quantiles: []float64{-0.1}}, "[0, 1]"},
		{Planner{Rule: 7}, "Threshold or Quantile"},
		{Planner{Estimator: 9}, "Sampling or Antidiagonal"},
		{Planner{Scale: -1}, "positive"},
		{Planner{Scale: math.NaN()}, "positive"},
		{Planner{SampleQ: -1}, "≥ 0"},
		{Planner{OutlierK: -2}, "≥ -1"},
		{Planner{Estimator: Antidiagonal, Stride: 17}, "1..min(BlockQ, BlockK) = 16"},
		{Planner{Similarity: []float64{0.5}}, "needs 3"},
		{Planner{Similarity: []float64{0.5, 2, 0.5}}, "[-1, 1]"},
	} {
		_, err := tc.pl.Plan(context.Background(), tl, q, k, nil)
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want ErrInvalid mentioning %q", tc.pl, err, tc.want)
		}
	}
	if _, err := (Planner{}).Plan(context.Background(), tl, k, k, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("mismatched Q: %v", err)
	}
	if _, err := (Planner{}).Plan(context.Background(), tl, nil, k, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("nil Q: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Planner{}).Plan(ctx, tl, q, k, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
	for _, x := range []fmt.Stringer{Sampling, Antidiagonal, Estimator(5), Threshold, Quantile, Rule(5)} {
		if x.String() == "" {
			t.Errorf("%#v has no name", x)
		}
	}
}

// TestDeterministicAndSeeded: the same seed gives the same plan, run after
// run and under concurrent use; another seed draws other samples.
func TestDeterministicAndSeeded(t *testing.T) {
	r := testutil.Rand(t)
	pr := shapes[1].Problem(t, r, 1.5, 1)
	pl := Planner{Seed: 7, SampleQ: 2, SampleK: 2, Scale: 1}
	first, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *plan.Plan, 4)
	for range 4 {
		go func() {
			p, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, nil)
			if err != nil {
				t.Error(err)
			}
			done <- p
		}()
	}
	for range 4 {
		p := <-done
		if p == nil || !slices.Equal(p.KVBlock, first.KVBlock) || !slices.Equal(p.Level, first.Level) {
			t.Fatal("same seed gave a different plan")
		}
	}
	differs := false
	for seed := uint64(8); seed < 20 && !differs; seed++ {
		pl.Seed = seed
		p, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, nil)
		if err != nil {
			t.Fatal(err)
		}
		differs = !slices.Equal(p.KVBlock, first.KVBlock) || !slices.Equal(p.Level, first.Level)
	}
	if !differs {
		t.Error("12 other seeds all gave the same plan; the seed is not used")
	}
}
