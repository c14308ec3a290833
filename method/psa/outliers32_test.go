package psa

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
)

// outlierScoreTol bounds, per row, how far outlierScores' float32 score
// may lie from the exact score of rows (naiveOutlierScores). With u = 2⁻²⁴
// and, per dimension i that varies, A_i the largest |x_ji| and s_i = √v_i:
// the mean's n − 1 rounded sums and its division put it off by at most
// δ_i = (n+1)·u·A_i, the same shift e for every row; Σ_j (y_j + e)² =
// v_i + n·e² since Σ_j y_j = 0, so with ρ_i = δ_i/s_i a term y_j²/v_i
// (≤ 1, as |y_j| ≤ s_i) moves by at most 2ρ_i + (n+1)·ρ_i² for the shift,
// and relatively by (n+6)·u for the rounding of the difference, the
// square, v's n sums, 1/v and the product; the score's d sums add
// (d+1)·u of its value. The dimensions where every row is equal are left
// out: the tests' such dimensions hold values whose float32 mean is exact,
// so that they add exactly 0. The bound is doubled for what the first-
// order terms leave out.
func outlierScoreTol(rows [][]float64) []float64 {
	const u = 0x1p-24
	n, d := len(rows), len(rows[0])
	z := naiveOutlierScores(rows)
	var shift float64 // Σ_i 2ρ_i + (n+1)ρ_i², the same for every row
	for i := range d {
		var mu, a float64
		for _, r := range rows {
			mu += r[i]
			a = max(a, math.Abs(r[i]))
		}
		mu /= float64(n)
		var v float64
		for _, r := range rows {
			v += (r[i] - mu) * (r[i] - mu)
		}
		if v == 0 {
			continue
		}
		rho := float64(n+1) * u * a / math.Sqrt(v)
		shift += 2*rho + float64(n+1)*rho*rho
	}
	tol := make([]float64, n)
	for j := range tol {
		tol[j] = 2 * (shift*(1+float64(n+6)*u) + float64(n+d+7)*u*(z[j]+shift))
	}
	return tol
}

// TestOutlierScoresFloat32 checks outlierScores' float32 scores against
// the float64 definition (naiveOutlierScores) within outlierScoreTol on
// random rows of awkward sizes (n 1, 3, 128 and 129 rows: one row, fewer
// than the four-row interleave, a multiple of it and one past; d 32 to
// 256), of unit spread about 0 and of small spread (0.3) about a large
// common offset (8, as attention sinks put in queries and keys), the
// latter rounded to bf16 as the device's inputs are. It also checks that
// the scores do not depend on the scratch's contents, and logs the largest
// error as a fraction of the bound.
func TestOutlierScoresFloat32(t *testing.T) {
	r := testutil.Rand(t)
	bf16 := func(v float64) float64 { // round to nearest even bf16
		b := math.Float32bits(float32(v))
		b += 0x7fff + (b>>16)&1
		return float64(math.Float32frombits(b &^ 0xffff))
	}
	inputs := []struct {
		name string
		gen  func(i int) float64
	}{
		{"N(0,1+i%3)", func(i int) float64 { return float64(float32(r.NormFloat64() * float64(1+i%3))) }},
		{"bf16 8+N(0,0.3)", func(i int) float64 { return bf16(8 + 0.3*r.NormFloat64()) }},
	}
	worst := 0.0
	for _, in := range inputs {
		for _, n := range []int{1, 3, 128, 129} {
			for _, d := range []int{32, 64, 128, 256} {
				rows := make([][]float64, n)
				x := make([]float32, n*d)
				for j := range rows {
					rows[j] = make([]float64, d)
					for i := range rows[j] {
						rows[j][i] = in.gen(i)
						x[j*d+i] = float32(rows[j][i])
					}
				}
				z := make([]float32, n)
				outlierScores(x, n, d, make([]float32, d), make([]float32, d), z)
				def, tol := naiveOutlierScores(rows), outlierScoreTol(rows)
				for j := range z {
					if e := math.Abs(float64(z[j]) - def[j]); e > tol[j] {
						t.Errorf("%s n %d d %d row %d: score %v, definition %v: off by %.3g, bound %.3g", in.name, n, d, j, z[j], def[j], e, tol[j])
					} else if tol[j] > 0 {
						worst = max(worst, e/tol[j])
					}
				}
				// Scratch full of NaNs (and a longer z) changes nothing.
				nan := float32(math.NaN())
				mean, inv, z2 := make([]float32, d+3), make([]float32, d+3), make([]float32, n+5)
				for _, s := range [][]float32{mean, inv, z2} {
					for i := range s {
						s[i] = nan
					}
				}
				outlierScores(x, n, d, mean, inv, z2)
				for j := range z {
					if math.Float32bits(z2[j]) != math.Float32bits(z[j]) {
						t.Fatalf("%s n %d d %d row %d: score %v with dirty scratch, %v with clean", in.name, n, d, j, z2[j], z[j])
					}
				}
			}
		}
	}
	t.Logf("largest error %.3g of the bound", worst)
}

// TestOutlierDrawOrder checks the draw's first m offsets (estimator.draw
// on outlierScores' scores) on random blocks of awkward sizes: the same
// for every stream of the random draws and every fresh estimator; the
// float32 scores' order, largest first and ties to the lower offset (a
// stable sort); and, against the float64 definition, an order in which
// each pick's exact score is within the two scores' outlierScoreTol of
// every later candidate's. Blocks with repeated rows check the ties.
func TestOutlierDrawOrder(t *testing.T) {
	r := testutil.Rand(t)
	for _, tc := range []struct {
		name    string
		n, d, m int
		repeat  bool // every row twice, so that every score ties
	}{
		{"n 3 m 1", 3, 32, 1, false},
		{"n 128 m 4", 128, 128, 4, false},
		{"n 129 m 16", 129, 64, 16, false},
		{"n 64 m 62", 64, 256, 62, false},
		{"ties n 128 m 8", 128, 128, 8, true},
		{"ties n 6 m 4", 6, 32, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, d, m := tc.n, tc.d, tc.m
			rows := make([][]float64, n)
			x := make([]float32, n*d)
			for j := range rows {
				rows[j] = make([]float64, d)
				for i := range rows[j] {
					v := float64(float32(r.NormFloat64()))
					if tc.repeat && j%2 == 1 {
						v = rows[j-1][i]
					}
					rows[j][i] = v
					x[j*d+i] = float32(v)
				}
			}
			z := make([]float32, n)
			outlierScores(x, n, d, make([]float32, d), make([]float32, d), z)
			want := descending(z)
			want = want[:m]
			s := m + 1 // one random draw after the m by score
			for seed := range uint64(8) {
				e := &estimator{perm: make([]int, n)}
				got := slices.Clone(e.draw(rand.New(rand.NewPCG(seed, 7)), n, s, m, z))
				checkDraw(t, got, 0, n, s)
				if !slices.Equal(got[:m], want) {
					t.Fatalf("seed %d: draw starts %v, the scores' order %v", seed, got[:m], want)
				}
			}
			def, tol := naiveOutlierScores(rows), outlierScoreTol(rows)
			rest := make(map[int]bool, n)
			for j := range n {
				rest[j] = true
			}
			for i, p := range want {
				delete(rest, p)
				for k := range rest {
					if def[k] > def[p]+tol[k]+tol[p] {
						t.Fatalf("pick %d is row %d (score %v), yet row %d scores %v, beyond the bound", i, p, def[p], k, def[k])
					}
				}
			}
			if tc.repeat {
				for i := 0; i+1 < m; i += 2 { // each pair's scores are equal: the lower offset first
					if want[i]/2 != want[i+1]/2 || want[i] > want[i+1] {
						t.Fatalf("draw starts %v: repeated rows not adjacent, lower offset first", want)
					}
				}
			}
		})
	}
}
