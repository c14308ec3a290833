package unisparse

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
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

// naiveComposites pools tokens [a·c, (a+1)·c) of the head group h0..h0+ch−1
// in float64 (UniSparse Eq. 2–3): each token is first averaged over the
// group's heads (their KV heads for keys), then the c tokens are averaged or
// max-pooled.
func naiveComposites(x *tensor.Tensor, g tensor.Geometry, b, h0, ch, c, n int, keys bool, pooling Pooling) [][]float64 {
	var out [][]float64
	for lo := 0; lo < n; lo += c {
		hi := min(lo+c, n)
		comp := make([]float64, g.D)
		for t := lo; t < hi; t++ {
			tok := make([]float64, g.D)
			for h := h0; h < h0+ch; h++ {
				src := h
				if keys {
					src = g.KVHead(h)
				}
				for d := range tok {
					tok[d] += float64(x.At(b, src, t, d)) / float64(ch)
				}
			}
			for d := range comp {
				switch {
				case pooling == Average:
					comp[d] += tok[d] / float64(hi-lo)
				case t == lo:
					comp[d] = tok[d]
				default:
					comp[d] = math.Max(comp[d], tok[d])
				}
			}
		}
		out = append(out, comp)
	}
	return out
}

// naiveMass is UniSparse Eq. 4–5 in float64: per composite query of query
// block qb, a softmax over the composite keys in its valid causal range
// (first key token visible to the composite's last query token), summed per
// original KV block.
func naiveMass(p *plan.Plan, cq, ck [][]float64, c config, qb int) []float64 {
	g := p.Geometry
	scale := float64(p.SoftmaxScale())
	mass := make([]float64, p.KBlocks())
	qlo, qhi := p.QueryRange(qb)
	for a := qlo / c.cq; a*c.cq < qhi; a++ {
		last := min((a+1)*c.cq, g.Nq) - 1
		logits := make([]float64, len(ck))
		m := math.Inf(-1)
		for j := range ck {
			logits[j] = math.Inf(-1)
			if p.Visible(last, j*c.ck) {
				var s float64
				for d := range ck[j] {
					s += cq[a][d] * ck[j][d]
				}
				logits[j] = s * scale
				m = max(m, logits[j])
			}
		}
		if math.IsInf(m, -1) {
			continue
		}
		var sum float64
		for _, l := range logits {
			sum += math.Exp(l - m)
		}
		for j, l := range logits {
			mass[j*c.ck/p.BlockK] += math.Exp(l-m) / sum
		}
	}
	return mass
}

// TestMassMatchesEquations compares the planner's compressed block masses
// with naiveMass for average and max pooling, with and without head
// compression, on every shape. Tolerance 1e-4 absolute on masses summing to
// at most BlockQ/c_q: float32 logits of D ≤ 256 products err by ~1e-5.
func TestMassMatchesEquations(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 2, 1)
			dense, err := plan.Dense(pr.Tiling)
			if err != nil {
				t.Fatal(err)
			}
			g := pr.Tiling.Geometry
			for _, u := range []Planner{
				{CQ: 4, CK: 4},
				{CQ: 8, CK: 2, Pooling: Max},
				{CQ: 1, CK: 16, CH: 2},
			} {
				c, err := u.config(pr.Tiling)
				if err != nil {
					if errors.Is(err, plan.ErrInvalid) && (s.BlockQ%max(u.CQ, 1) != 0 || s.BlockK%max(u.CK, 1) != 0 || s.Hq%max(u.CH, 1) != 0) {
						continue // this shape's blocks or heads do not admit the factors
					}
					t.Fatal(err)
				}
				sc := newScorer(dense, c, pr.Q, pr.K)
				for b := range g.B {
					for h0 := 0; h0 < g.Hq; h0 += c.ch {
						sc.compress(b, h0)
						cq := naiveComposites(pr.Q, g, b, h0, c.ch, c.cq, g.Nq, false, c.pooling)
						ck := naiveComposites(pr.K, g, b, h0, c.ch, c.ck, g.Nk, true, c.pooling)
						for qb := range dense.QBlocks() {
							blocks, _ := dense.Entries(dense.Row(b, h0, qb))
							got := slices.Clone(sc.blockMass(qb, blocks))
							want := naiveMass(dense, cq, ck, c, qb)
							for i, kb := range blocks {
								if math.Abs(got[i]-want[kb]) > 1e-4 {
									t.Fatalf("%+v b%d h%d qb%d block %d: mass %.6f, want %.6f", u, b, h0, qb, kb, got[i], want[kb])
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestPlanKeepsTopP checks every planned row against naive float64 masses:
// the kept blocks reach Top-P of the row's mass, dropping the lightest kept
// block would not, and no dropped block outweighs a kept one (1e-4 slack
// for float32 masses). Heads of one compressed group share their rows.
// The rows are the paper's (NoOutlier); TestOutlierMatchesNaive checks the
// outlier query's block on top of them.
func TestPlanKeepsTopP(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 2, 1)
			g := pr.Tiling.Geometry
			for _, u := range []Planner{{TopP: 0.8, NoOutlier: true}, {TopP: 0.6, CQ: 2, CK: 8, Pooling: Max, NoOutlier: true}, {TopP: 0.9, CH: g.Hq, NoOutlier: true}} {
				c, err := u.config(pr.Tiling)
				if err != nil {
					t.Fatal(err)
				}
				p, err := u.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				for b := range g.B {
					for h := range g.Hq {
						h0 := h / c.ch * c.ch
						cq := naiveComposites(pr.Q, g, b, h0, c.ch, c.cq, g.Nq, false, c.pooling)
						ck := naiveComposites(pr.K, g, b, h0, c.ch, c.ck, g.Nk, true, c.pooling)
						for qb := range p.QBlocks() {
							mass := naiveMass(p, cq, ck, c, qb)
							blocks, _ := p.Entries(p.Row(b, h, qb))
							lead, _ := p.Entries(p.Row(b, h0, qb))
							if !slices.Equal(blocks, lead) {
								t.Fatalf("head %d row %d differs from its group's first head %d", h, qb, h0)
							}
							checkTopP(t, mass, blocks, c.topP)
						}
					}
				}
			}
		})
	}
}

func checkTopP(t *testing.T, mass []float64, kept []int32, p float64) {
	t.Helper()
	var total, got float64
	lightest := math.Inf(1)
	isKept := map[int32]bool{}
	for _, kb := range kept {
		got += mass[kb]
		lightest = min(lightest, mass[kb])
		isKept[kb] = true
	}
	for _, m := range mass {
		total += m
	}
	if total == 0 {
		return
	}
	const slack = 1e-4
	if got < p*total-slack {
		t.Fatalf("kept mass %.5f < %v of %.5f (masses %v, kept %v)", got, p, total, mass, kept)
	}
	if got-lightest >= p*total+slack {
		t.Fatalf("kept %v reach %.5f even without the lightest (%.5f); Top-P %v of %.5f", kept, got, lightest, p, total)
	}
	for kb, m := range mass {
		if !isKept[int32(kb)] && m > lightest+slack {
			t.Fatalf("block %d (mass %.5f) dropped while lighter %.5f kept", kb, m, lightest)
		}
	}
}

// TestTopPDefinition checks topP on random rows with ties and zeros against
// Eq. 6 literally: sort descending (stable), keep until the cumulative mass
// reaches p of the total.
func TestTopPDefinition(t *testing.T) {
	r := testutil.Rand(t)
	for range 500 {
		n := 1 + r.IntN(30)
		mass := make([]float64, n)
		for i := range mass {
			if r.IntN(4) > 0 {
				mass[i] = math.Exp(3 * r.NormFloat64())
			} else {
				mass[i] = float64(r.IntN(2))
			}
		}
		p := r.Float64()
		if r.IntN(10) == 0 {
			p = 1
		}
		got := make([]bool, n)
		topP(mass, p, got)
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			if mass[a] != mass[b] {
				if mass[a] > mass[b] {
					return -1
				}
				return 1
			}
			return 0
		})
		total, cum := plan.Sum64(mass), 0.0
		want := make([]bool, n)
		for _, i := range idx {
			if total == 0 || (p < 1 && cum >= p*total) {
				break
			}
			want[i] = true
			cum += mass[i]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("mass %v p %v: kept %v, want %v", mass, p, got, want)
		}
	}
}

// TestStochasticPooling: a draw is one of the group's tokens, chosen with
// probability proportional to its norm (20000 draws, tolerance 0.02 ≈ 6σ),
// never a zero token unless all are; composites are exactly such tokens.
func TestStochasticPooling(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rows := []float32{0, 0, 1, 0, 0, 2, 3, 0, 0, 0} // norms 0, 1, 2, 3, 0
	counts := make([]int, 5)
	const draws = 20000
	for range draws {
		counts[pickByNorm(r, rows, 2)]++
	}
	for i, want := range []float64{0, 1.0 / 6, 2.0 / 6, 3.0 / 6, 0} {
		if got := float64(counts[i]) / draws; math.Abs(got-want) > 0.02 {
			t.Errorf("token %d drawn %.3f of the time, want %.3f", i, got, want)
		}
	}
	zero := make([]float32, 6)
	seen := map[int]bool{}
	for range 200 {
		seen[pickByNorm(r, zero, 2)] = true
	}
	if len(seen) != 3 {
		t.Errorf("all-zero tokens: drew %v, want all 3", seen)
	}
	tr := testutil.Rand(t)
	pr := shapes[1].Problem(t, tr, 2, 1)
	dense, _ := plan.Dense(pr.Tiling)
	c, err := Planner{Pooling: Stochastic, CQ: 4, CK: 4, Seed: 3}.config(pr.Tiling)
	if err != nil {
		t.Fatal(err)
	}
	sc := newScorer(dense, c, pr.Q, pr.K)
	sc.compress(0, 1)
	g := pr.Tiling.Geometry
	for j := range sc.nk {
		found := false
		for tk := j * 4; tk < min(j*4+4, g.Nk) && !found; tk++ {
			match := true
			for d := range g.D {
				match = match && sc.ck[j*g.D+d] == pr.K.At(0, g.KVHead(1), tk, d)
			}
			found = match
		}
		if !found {
			t.Fatalf("composite key %d is none of its tokens", j)
		}
	}
}

// TestConvergesToDense: raising Top-P to 1 keeps every visible block and
// reproduces dense attention (2e-5 relative L1, float32 rounding); lower
// Top-P skips more and errs more.
func TestConvergesToDense(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 2, 1)
			ref := plantest.Reference(t, pr.Q, pr.K, pr.V, s.Causal)
			var errs, spars []float64
			for _, p := range []float64{0.3, 0.7, 0.9, 0.99, 1} {
				pl, err := Planner{TopP: p, CQ: 4, CK: 4}.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				out, st := plantest.Run(t, pl, pr.Q, pr.K, pr.V)
				e := plantest.Compare(t, ref, out)
				errs, spars = append(errs, e.RelL1), append(spars, st.Sparsity())
			}
			t.Logf("top-p 0.3..1: sparsity %.3f, rel L1 %.2e", spars, errs)
			if errs[4] > 2e-5 || spars[4] != 0 {
				t.Errorf("Top-P 1: sparsity %v rel L1 %.2e, want dense", spars[4], errs[4])
			}
			for i := 1; i < len(spars); i++ {
				if spars[i] > spars[i-1]+1e-12 {
					t.Errorf("sparsity rose from %.3f to %.3f as Top-P rose", spars[i-1], spars[i])
				}
			}
			if spars[0] > 0 && !(errs[0] > errs[3]) {
				t.Errorf("rel L1 %.2e at Top-P 0.3 not above %.2e at 0.99", errs[0], errs[3])
			}
		})
	}
}

// TestBadOptions checks that out-of-range options give plan.ErrInvalid
// naming the valid range.
func TestBadOptions(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 64, Nk: 64, D: 32, Dv: 32}
	tl := plan.Tiling{Geometry: g, BlockQ: 16, BlockK: 16}
	r := testutil.Rand(t)
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 4, N: 64, D: 32}, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 64, D: 32}, 1)
	for _, tc := range []struct {
		u    Planner
		want string
	}{
		{Planner{TopP: 1.5}, "(0, 1]"},
		{Planner{TopP: -0.1}, "(0, 1]"},
		{Planner{TopP: math.NaN()}, "(0, 1]"},
		{Planner{CQ: 3}, "divisor of BlockQ 16"},
		{Planner{CK: -2}, "divisor of BlockK 16"},
		{Planner{CK: 32}, "divisor of BlockK 16"},
		{Planner{CH: 3}, "divisor of the 4 query heads"},
		{Planner{Pooling: 9}, "Average, Max or Stochastic"},
	} {
		_, err := tc.u.Plan(context.Background(), tl, q, k, nil)
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrInvalid mentioning %q", tc.u, err, tc.want)
		}
	}
	if _, err := (Planner{}).Plan(context.Background(), tl, k, k, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("mismatched Q: %v", err)
	}
	if _, err := (Planner{}).Plan(context.Background(), tl, q, nil, nil); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("nil K: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Planner{}).Plan(ctx, tl, q, k, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
	for _, p := range []Pooling{Average, Max, Stochastic, 7} {
		if p.String() == "" {
			t.Errorf("pooling %d has no name", p)
		}
	}
	// Defaults adapt to blocks the default factors do not divide.
	small := plan.Tiling{Geometry: g, BlockQ: 4, BlockK: 6}
	if c, err := (Planner{}).config(small); err != nil || c.cq != 4 || c.ck != 2 {
		t.Errorf("defaults for 4×6 blocks: %+v %v, want c_q 4, c_k 2", c, err)
	}
	if c, err := (Planner{}).config(tl); err != nil || c.cq != DefaultCQ || c.ck != DefaultCK || c.topP != DefaultTopP || c.ch != 1 {
		t.Errorf("defaults for 16×16 blocks: %+v %v", c, err)
	}
}

// TestDeterministic: plans are the same run after run and under concurrent
// use, stochastic pooling included, and the seed changes the draw.
func TestDeterministic(t *testing.T) {
	r := testutil.Rand(t)
	pr := shapes[0].Problem(t, r, 2, 1)
	u := Planner{Pooling: Stochastic, TopP: 0.7, CQ: 4, CK: 4, Seed: 5}
	first, err := u.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *plan.Plan, 4)
	for range 4 {
		go func() {
			p, err := u.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, nil)
			if err != nil {
				t.Error(err)
			}
			done <- p
		}()
	}
	for range 4 {
		if p := <-done; p == nil || !slices.Equal(p.KVBlock, first.KVBlock) {
			t.Fatal("same seed gave another plan")
		}
	}
	differs := false
	for seed := uint64(6); seed < 20 && !differs; seed++ {
		u.Seed = seed
		p, err := u.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, nil)
		if err != nil {
			t.Fatal(err)
		}
		differs = !slices.Equal(p.KVBlock, first.KVBlock)
	}
	if !differs {
		t.Error("14 other seeds gave the same stochastic plan")
	}
}
