package psa

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// naiveOutlierScores is the score's definition in float64, written as
// the formula reads: z_j = Σ_i (x_ji − μ_i)²/v_i over the dimensions with
// v_i > 0 (a division per term, where outlierScores multiplies by 1/v_i).
func naiveOutlierScores(rows [][]float64) []float64 {
	n, d := len(rows), len(rows[0])
	z := make([]float64, n)
	for i := range d {
		mu := 0.0
		for _, r := range rows {
			mu += r[i]
		}
		mu /= float64(n)
		v := 0.0
		for _, r := range rows {
			v += (r[i] - mu) * (r[i] - mu)
		}
		if v == 0 {
			continue
		}
		for j, r := range rows {
			z[j] += (r[i] - mu) * (r[i] - mu) / v
		}
	}
	return z
}

// TestOutlierScores checks outlierScores against the definition
// (naiveOutlierScores, within the float32 bound outlierScoreTol) and
// hand-worked values: one outlier among equal rows, a constant dimension
// (left out), scale invariance per dimension, outliers in different
// dimensions, equal rows, one row, and random rows with an odd count (the
// four-row unrolling and its tail); TestOutlierScoresFloat32 covers more
// sizes.
func TestOutlierScores(t *testing.T) {
	r := testutil.Rand(t)
	random := func(n, d int) [][]float64 {
		rows := make([][]float64, n)
		for j := range rows {
			rows[j] = make([]float64, d)
			for i := range rows[j] {
				rows[j][i] = float64(float32(r.NormFloat64() * float64(1+i%3)))
			}
		}
		return rows
	}
	for _, tc := range []struct {
		name string
		rows [][]float64
		want []float64 // nil: the definition's values only
	}{
		{"one outlier", [][]float64{{0}, {0}, {0}, {4}}, []float64{1.0 / 12, 1.0 / 12, 1.0 / 12, 9.0 / 12}},
		{"constant dimension left out", [][]float64{{5, 0}, {5, 0}, {5, 0}, {5, 4}}, []float64{1.0 / 12, 1.0 / 12, 1.0 / 12, 9.0 / 12}},
		{"scale per dimension", [][]float64{{0, 0}, {0, 0}, {0, 0}, {4, 4000}}, []float64{2.0 / 12, 2.0 / 12, 2.0 / 12, 18.0 / 12}},
		{"outliers in two dimensions", [][]float64{{0, 0}, {0, 0}, {4, 0}, {0, 4}}, []float64{2.0 / 12, 2.0 / 12, 10.0 / 12, 10.0 / 12}},
		{"equal rows", [][]float64{{1, -2, 3}, {1, -2, 3}, {1, -2, 3}}, []float64{0, 0, 0}},
		{"one row", [][]float64{{1, 2}}, []float64{0}},
		{"random 64×128", random(64, 128), nil},
		{"random 7×5", random(7, 5), nil},
		{"random 13×256", random(13, 256), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, d := len(tc.rows), len(tc.rows[0])
			x := make([]float32, n*d)
			for j, row := range tc.rows {
				for i, v := range row {
					x[j*d+i] = float32(v)
				}
			}
			z := make([]float32, n)
			outlierScores(x, n, d, make([]float32, d), make([]float32, d), z)
			def, tol := naiveOutlierScores(tc.rows), outlierScoreTol(tc.rows)
			for j := range z {
				if math.Abs(float64(z[j])-def[j]) > tol[j] {
					t.Errorf("row %d: score %v, definition %v (bound %.3g)", j, z[j], def[j], tol[j])
				}
				if tc.want != nil && math.Abs(float64(z[j])-tc.want[j]) > tol[j] {
					t.Errorf("row %d: score %v, want %v (bound %.3g)", j, z[j], tc.want[j], tol[j])
				}
			}
			// The sum of the scores is the number of dimensions that vary.
			var sum, sumTol float64
			for j, v := range z {
				sum += float64(v)
				sumTol += tol[j]
			}
			varying := 0
			for i := range d {
				for _, row := range tc.rows {
					if row[i] != tc.rows[0][i] {
						varying++
						break
					}
				}
			}
			if math.Abs(sum-float64(varying)) > sumTol+1e-12 {
				t.Errorf("scores sum to %v, want %d (the varying dimensions, within %.3g)", sum, varying, sumTol)
			}
		})
	}
}

// TestDraw checks estimator.draw: the m largest scores first (largest
// first, ties to the lower offset), then random distinct offsets of the
// rest; m = 0 is the paper's draw (sample's partial Fisher–Yates with the
// same stream); s ≥ n takes every offset.
func TestDraw(t *testing.T) {
	e := &estimator{perm: make([]int, 8)}
	z := []float32{0.1, 0.5, 0.5, 0.9, 0.2, 0.0, 0.3, 0.5}
	paper := func(seed uint64, n, s int) []int {
		rg := rand.New(rand.NewPCG(seed, 1))
		perm := make([]int, n)
		for i := range perm {
			perm[i] = i
		}
		for i := range s {
			j := i + rg.IntN(n-i)
			perm[i], perm[j] = perm[j], perm[i]
		}
		return perm[:s]
	}
	for _, tc := range []struct {
		name   string
		n, s   int
		m      int
		prefix []int
	}{
		{"two of three by score", 8, 3, 2, []int{3, 1}},
		{"ties to the lower offset", 8, 5, 4, []int{3, 1, 2, 7}},
		{"m above s", 8, 3, 6, []int{3, 1, 2}},
		{"whole block", 8, 8, 2, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"more than the block", 5, 9, 2, []int{0, 1, 2, 3, 4}},
		{"none by score", 8, 4, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(20) {
				got := slices.Clone(e.draw(rand.New(rand.NewPCG(seed, 1)), tc.n, tc.s, tc.m, z[:tc.n]))
				checkDraw(t, got, 0, tc.n, min(tc.s, tc.n))
				if !slices.Equal(got[:len(tc.prefix)], tc.prefix) {
					t.Fatalf("seed %d: draw %v, want it to start %v", seed, got, tc.prefix)
				}
				if tc.m == 0 && !slices.Equal(got, paper(seed, tc.n, tc.s)) {
					t.Fatalf("seed %d: draw %v, the paper's draw %v", seed, got, paper(seed, tc.n, tc.s))
				}
			}
		})
	}
}

// TestOutlierDrawsLead checks, on every test shape, that each block's draw
// starts with its OutlierQ (queries) or OutlierK (keys) most outlying
// tokens under the definition (naiveOutlierScores), largest first, up to
// the float32 scores' rounding (leadsWithin), and that Antidiagonal and
// NoOutliers ignore the scores.
func TestOutlierDrawsLead(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		pr := s.Problem(t, r, 1.5, 1)
		dense, err := plan.Dense(pr.Tiling)
		if err != nil {
			t.Fatal(err)
		}
		g := pr.Tiling.Geometry
		q, k := to64(pr.Q), to64(pr.K)
		// top returns the m most outlying tokens in order, "" when got
		// (offsets in the tensor) leads with them up to rounding.
		top := func(got []int, x f64, b, h, lo, hi, m int) ([]int, string) {
			rows := make([][]float64, hi-lo)
			for j := range rows {
				rows[j] = x.row(b, h, lo+j)
			}
			z, tol := naiveOutlierScores(rows), outlierScoreTol(rows)
			idx := descending(z)
			for j := range idx[:m] {
				idx[j] += lo
			}
			return idx[:m], leadsWithin(got, z, tol, lo, m)
		}
		for _, pl := range []Planner{{}, {SampleQ: 9, SampleK: 3}, {SampleQ: 5, SampleK: 6, OutlierQ: 5, OutlierK: 2}} {
			c, err := pl.config(pr.Tiling)
			if err != nil {
				t.Fatal(err)
			}
			est := newEstimator(dense, c, pr.Q, pr.K)
			for b := range g.B {
				for h := range g.Hq {
					est.head(b, h)
					for kb := range dense.KBlocks() {
						lo, hi := dense.KeyRange(kb)
						if c.sampleK >= hi-lo {
							continue
						}
						got := est.colTok[est.colStart[kb] : est.colStart[kb]+c.outK]
						if want, why := top(got, k, b, g.KVHead(h), lo, hi, c.outK); why != "" {
							t.Fatalf("%s %+v b%d kv%d kb%d: draw starts %v, the most outlying keys are %v: %s", s.Name, pl, b, g.KVHead(h), kb, got, want, why)
						}
					}
					for qb := range dense.QBlocks() {
						blocks, _ := dense.Entries(dense.Row(b, h, qb))
						est.row(qb, blocks, nil)
						lo, hi := dense.QueryRange(qb)
						if c.sampleQ >= hi-lo {
							continue
						}
						if want, why := top(est.qTok[:c.outQ], q, b, h, lo, hi, c.outQ); why != "" {
							t.Fatalf("%s %+v b%d h%d qb%d: draw starts %v, the most outlying queries are %v: %s", s.Name, pl, b, h, qb, est.qTok[:c.outQ], want, why)
						}
					}
				}
			}
		}
		// NoOutliers and Antidiagonal draw as before: no scores read.
		for _, pl := range []Planner{{OutlierQ: NoOutliers, OutlierK: NoOutliers}, {Estimator: Antidiagonal, OutlierQ: 3}} {
			c, err := pl.config(pr.Tiling)
			if err != nil {
				t.Fatal(err)
			}
			if c.outQ != 0 && c.estimator == Sampling || c.outK != 0 && c.estimator == Sampling {
				t.Fatalf("%+v: %d and %d outlier draws, want none", pl, c.outQ, c.outK)
			}
		}
	}
}

// leadsWithin returns "" when got (offsets from lo) is m distinct tokens of
// the block, each scoring, by the exact scores z, no less than every later
// candidate's less the two scores' rounding bounds tol (outlierScoreTol):
// the exact order up to float32 near-ties. Otherwise it says why not.
func leadsWithin(got []int, z, tol []float64, lo, m int) string {
	if len(got) != m {
		return fmt.Sprintf("%d tokens, want %d", len(got), m)
	}
	taken := make([]bool, len(z))
	for i, t := range got {
		p := t - lo
		if p < 0 || p >= len(z) || taken[p] {
			return fmt.Sprintf("token %d out of the block or repeated", t)
		}
		taken[p] = true
		for k := range z {
			if !taken[k] && z[k] > z[p]+tol[k]+tol[p] {
				return fmt.Sprintf("pick %d (token %d, score %v) ranks below token %d (score %v) beyond rounding", i, t, z[p], lo+k, z[k])
			}
		}
	}
	return ""
}

// needleProblem is a test-only input with a planted needle at query qi
// and key kj of head 0 (B 1, 2 query heads over 1 KV head, D 64, causal):
// keys vary within a block mostly along four smooth directions, plus
// noise of 0.3 per dimension, as neighbouring keys of real heads are
// alike; the first four keys are attention sinks that every query, N(0, 1)
// otherwise, meets with a logit of 8 (most of each row's mass, as real
// heads' sinks take). The needle key adds 3·u, the needle query 48·u, for
// a unit u orthogonal to every direction the other keys use (their noise
// included), so the
// needle's logit is 18 above the row's typical and 10 above the sinks':
// dense attention puts nearly all the needle query's mass on the needle
// key.
func needleProblem(t *testing.T, r *rand.Rand, n, qi, kj int) plantest.Problem {
	t.Helper()
	const d = 64
	dirs := make([][]float64, 7) // c, four smooth directions, the sink's, then u
	for i := range dirs {
		dirs[i] = make([]float64, d)
		for x := range dirs[i] {
			dirs[i][x] = r.NormFloat64()
		}
		for _, p := range dirs[:i] { // Gram–Schmidt: u ⟂ the others
			dp, pp := dot64(dirs[i], p), dot64(p, p)
			for x := range dirs[i] {
				dirs[i][x] -= dp / pp * p[x]
			}
		}
	}
	for _, v := range dirs {
		vn := math.Sqrt(dot64(v, v))
		for x := range v {
			v[x] /= vn
		}
	}
	u := dirs[6]
	phase := [4]float64{r.Float64() * 6, r.Float64() * 6, r.Float64() * 6, r.Float64() * 6}
	ks := tensor.Shape{B: 1, H: 1, N: n, D: d}
	qs := tensor.Shape{B: 1, H: 2, N: n, D: d}
	kd, qd := make([]float32, n*d), make([]float32, 2*n*d)
	xi := make([]float64, d)
	for j := range n {
		for x := range xi {
			xi[x] = 0.3 * r.NormFloat64()
		}
		a := dot64(xi, u) // only the needle has a u component
		for x := range xi {
			xi[x] -= a * u[x]
		}
		for x := range d {
			v := 2*dirs[0][x] + xi[x]
			for s := range 4 {
				v += 1.5 * math.Sin(float64(j)/float64(40+20*s)+phase[s]) * dirs[1+s][x]
			}
			if j < 4 {
				v += 8 * dirs[5][x]
			}
			if j == kj {
				v += 3 * u[x]
			}
			kd[j*d+x] = float32(v)
		}
	}
	for h := range 2 {
		for i := range n {
			for x := range d {
				v := r.NormFloat64() + 8*dirs[5][x]
				if h == 0 && i == qi {
					v += 48 * u[x]
				}
				qd[(h*n+i)*d+x] = float32(v)
			}
		}
	}
	k, err := tensor.FromFloat32(tensor.BHND, ks, kd)
	if err != nil {
		t.Fatal(err)
	}
	q, err := tensor.FromFloat32(tensor.BHND, qs, qd)
	if err != nil {
		t.Fatal(err)
	}
	g, err := tensor.Validate(q, k, k)
	if err != nil {
		t.Fatal(err)
	}
	return plantest.Problem{Tiling: plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64}, Q: q, K: k, V: k}
}

// TestKeepsNeedleAnywhere: at its default, the planner reads the needle's
// block exactly (level 1) for the needle query's block wherever the
// needle sits, on a test-only input (needleProblem) with the needle at 24
// random positions, none in the diagonal block; the paper's draw
// (NoOutliers) is logged for contrast. The needle pair is also checked to
// be what dense attention retrieves.
func TestKeepsNeedleAnywhere(t *testing.T) {
	r := testutil.Rand(t)
	const n = 1000
	paper := 0
	for range 24 {
		kj := 64 + r.IntN(n-300)
		qi := (kj/64+2)*64 + r.IntN(n-(kj/64+2)*64)
		pr := needleProblem(t, r, n, qi, kj)
		// Dense: the needle key's softmax weight in the needle query's row.
		qrow, krow := make([]float32, 64), make([]float32, 64)
		pr.Q.ReadRow(0, 0, qi, qrow)
		logits := make([]float64, qi+1)
		for j := range logits {
			pr.K.ReadRow(0, 0, j, krow)
			var s float64
			for x := range qrow {
				s += float64(qrow[x]) * float64(krow[x])
			}
			logits[j] = s / 8
		}
		m := slices.Max(logits)
		var sum float64
		for _, l := range logits {
			sum += math.Exp(l - m)
		}
		if w := math.Exp(logits[kj]-m) / sum; w < 0.9 {
			t.Fatalf("needle at q%d k%d: dense weight %.3f, want ≥ 0.9 (the input does not plant a needle)", qi, kj, w)
		}
		level := func(pl Planner) plan.Level {
			p, err := pl.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
			if err != nil {
				t.Fatal(err)
			}
			blocks, levels := p.Entries(p.Row(0, 0, qi/64))
			if i := slices.Index(blocks, int32(kj/64)); i >= 0 {
				return levels[i]
			}
			return plan.Skip
		}
		if lv := level(Planner{}); lv != plan.Full {
			t.Errorf("needle at q%d k%d: its block at level %d, want 1", qi, kj, lv)
		}
		if level(Planner{OutlierQ: NoOutliers, OutlierK: NoOutliers}) == plan.Full {
			paper++
		}
	}
	t.Logf("the paper's draw read the needle's block exactly at %d of 24 positions", paper)
}

// TestOutlierOffsets checks the export the device test compares with: the
// m largest scores' offsets, largest first, ties (equal rows) to the lower
// offset.
func TestOutlierOffsets(t *testing.T) {
	const n, d = 6, 2
	x := []float32{0, 0, 5, 5, 0, 0, 5, 5, 0, 0, -9, 1}
	// Rows 1 and 3 are equal (equal scores), so are rows 0, 2 and 4; row 5
	// lies farthest out.
	got, err := OutlierOffsets(x, n, d, 3)
	if err != nil {
		t.Fatal(err)
	}
	mean, inv, z := make([]float32, d), make([]float32, d), make([]float32, n)
	outlierScores(x, n, d, mean, inv, z)
	if z[1] != z[3] || z[5] <= z[1] || z[1] <= z[0] {
		t.Fatalf("scores %v: want z5 > z1 = z3 > z0", z)
	}
	if want := []int{5, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("OutlierOffsets = %v, want %v (scores %v)", got, want, z)
	}
	for _, c := range []struct {
		name    string
		x       []float32
		n, d, m int
	}{
		{"m = n", x, n, d, n},
		{"m = 0", x, n, d, 0},
		{"one row", x[:d], 1, d, 1},
		{"d = 0", x, n, 0, 1},
		{"x short of n·d", x[:n*d-1], n, d, 1},
	} {
		if _, err := OutlierOffsets(c.x, c.n, c.d, c.m); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%s: error %v, want plan.ErrInvalid", c.name, err)
		}
	}
}
