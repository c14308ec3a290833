package evaluate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
)

// closeOrBothNaN reports whether a and b agree to 1e-9 relative, or are
// both NaN.
func closeOrBothNaN(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-9*math.Abs(b)
}

// logLinear is the interpolation formula At documents, evaluated from the
// two bracketing points.
func logLinear(s0, e0, s1, e1, x float64) float64 {
	t := (x - s0) / (s1 - s0)
	return math.Exp(math.Log(e0) + t*(math.Log(e1)-math.Log(e0)))
}

// inverseLogLinear is SparsityAt's documented formula on one segment.
func inverseLogLinear(s0, e0, s1, e1, target float64) float64 {
	return s0 + (s1-s0)*math.Log(target/e0)/math.Log(e1/e0)
}

// TestCurveReading reads constructed curves at sparsities and at target
// errors; every expected value is computed from the interpolation formula
// on the segment the case names, not written down. Tolerance 1e-9
// relative: both sides evaluate the same formula in float64.
func TestCurveReading(t *testing.T) {
	type point struct{ s, e float64 }
	for _, tc := range []struct {
		name  string
		pts   []point // in any order
		seg   int     // the segment [seg, seg+1] of the sorted points holding the answer
		x     float64 // a sparsity inside the segment, read with At
		frac  float64 // where in (0, 1) between the segment's errors, in log, the target lies
		match TargetMatch
	}{
		{"two points", []point{{0.2, 1e-3}, {0.6, 1e-1}}, 0, 0.4, 0.5, Crossed},
		{"unsorted", []point{{0.9, 0.3}, {0.1, 1e-4}, {0.5, 1e-2}}, 1, 0.77, 0.25, Crossed},
		{"steep start", []point{{0, 1e-6}, {0.01, 1e-3}, {0.5, 2e-2}, {0.8, 0.2}}, 0, 0.004, 0.9, Crossed},
		{"last segment", []point{{0.3, 1e-3}, {0.5, 2e-3}, {0.95, 0.5}}, 1, 0.9, 0.7, Crossed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, e := make([]float64, len(tc.pts)), make([]float64, len(tc.pts))
			for i, p := range tc.pts {
				s[i], e[i] = p.s, p.e
			}
			c := NewErrorCurve(s, e)
			sorted := slices.Clone(tc.pts)
			slices.SortFunc(sorted, func(a, b point) int { return cmp.Compare(a.s, b.s) })
			lo, hi := sorted[tc.seg], sorted[tc.seg+1]

			got, where := c.At(tc.x)
			if want := logLinear(lo.s, lo.e, hi.s, hi.e, tc.x); where != InRange || !closeOrBothNaN(got, want) {
				t.Errorf("At(%v) = %v %v, want %v in range", tc.x, got, where, want)
			}
			target := lo.e * math.Pow(hi.e/lo.e, tc.frac)
			x, m := c.SparsityAt(target)
			if want := inverseLogLinear(lo.s, lo.e, hi.s, hi.e, target); m != tc.match || !closeOrBothNaN(x, want) {
				t.Errorf("SparsityAt(%v) = %v %s, want %v %s", target, x, m, want, tc.match)
			}
			// Below every error: none; above every error: the last point.
			if x, m := c.SparsityAt(sorted[0].e / 2); m != NoMatch || !math.IsNaN(x) {
				t.Errorf("target below the curve: %v %s", x, m)
			}
			if x, m := c.SparsityAt(2 * slices.MaxFunc(sorted, func(a, b point) int { return cmp.Compare(a.e, b.e) }).e); m != AtLeast || x != sorted[len(sorted)-1].s {
				t.Errorf("target above the curve: %v %s", x, m)
			}
			if _, where := c.At(sorted[0].s - 1e-9); where != BelowRange {
				t.Errorf("below the range: %v", where)
			}
			if _, where := c.At(sorted[len(sorted)-1].s + 1e-9); where != AboveRange {
				t.Errorf("above the range: %v", where)
			}
		})
	}
}

// naiveAt is the interpolation written the slow way: scan every pair of
// consecutive points for one that brackets x.
func naiveAt(s, e []float64, x float64) float64 {
	for i := 0; i+1 < len(s); i++ {
		if s[i] <= x && x <= s[i+1] {
			t := (x - s[i]) / (s[i+1] - s[i])
			return math.Exp((1-t)*math.Log(e[i]) + t*math.Log(e[i+1]))
		}
	}
	if len(s) == 1 && x == s[0] {
		return e[0]
	}
	return math.NaN()
}

// TestErrorCurveMatchesNaive draws random increasing curves, hands them to
// NewErrorCurve shuffled, and compares At with naiveAt inside, at the ends
// of and outside the range. Tolerance 1e-12 relative: the two evaluate the
// same formula, differently arranged.
func TestErrorCurveMatchesNaive(t *testing.T) {
	r := testutil.Rand(t)
	for trial := range 200 {
		n := 1 + r.IntN(8)
		s, e := make([]float64, n), make([]float64, n)
		x, y := r.Float64()*0.5, math.Pow(10, -5+3*r.Float64())
		for i := range n {
			s[i], e[i] = x, y
			x += 1e-3 + 0.2*r.Float64()
			y *= 1 + 10*r.Float64()
		}
		perm := r.Perm(n)
		ss, es := make([]float64, n), make([]float64, n)
		for i, j := range perm {
			ss[i], es[i] = s[j], e[j]
		}
		c := NewErrorCurve(ss, es)
		queries := []float64{s[0], s[n-1], s[0] - 1e-9, s[n-1] + 1e-9}
		for range 20 {
			queries = append(queries, s[0]+(s[n-1]-s[0])*r.Float64())
		}
		for _, q := range queries {
			got, where := c.At(q)
			want := naiveAt(s, e, q)
			switch {
			case q < s[0] && where != BelowRange, q > s[n-1] && where != AboveRange:
				t.Fatalf("trial %d: At(%v) outside [%v, %v] says %v", trial, q, s[0], s[n-1], where)
			case !closeOrBothNaN(got, want) && math.Abs(got-want) > 1e-12*want:
				t.Fatalf("trial %d: At(%v) = %v (%v), naive %v; curve %v %v", trial, q, got, where, want, s, e)
			}
		}
	}
}

// TestErrorCurveTiesAndZeros: equal sparsities merge (geometric mean),
// non-finite points are dropped, and a zero error makes the segment
// interpolate linearly instead of in log.
func TestErrorCurveTiesAndZeros(t *testing.T) {
	c := NewErrorCurve([]float64{0.5, 0, 0.5, math.NaN()}, []float64{1e-2, 0, 1e-4, 1})
	s, e := c.Points()
	if !slices.Equal(s, []float64{0, 0.5}) || e[0] != 0 || math.Abs(e[1]-math.Sqrt(1e-2*1e-4)) > 1e-15 {
		t.Fatalf("curve %v %v, want [0 0.5] [0 √(1e-2·1e-4)]", s, e)
	}
	if got, where := c.At(0.25); where != InRange || math.Abs(got-e[1]/2) > 1e-15 {
		t.Errorf("At(0.25) = %v %v, want %v (linear)", got, where, e[1]/2)
	}
	if _, where := (&ErrorCurve{}).At(0.5); where != NoCurve {
		t.Errorf("empty curve: %v", where)
	}
}

// TestSparsityAt checks the sparsity read off a curve at a target error
// at the edges (a zero error, a curve that dips back below the target,
// no points) and as the inverse of At on fresh random increasing curves.
func TestSparsityAt(t *testing.T) {
	for _, tc := range []struct {
		s, e   []float64
		target float64
		want   float64 // NaN: none
		match  TargetMatch
	}{
		// Zero lower error: linear, t = target/e1.
		{[]float64{0, 0.5}, []float64{0, 1e-2}, 5e-3, 0 + 0.5*(5e-3/1e-2), Crossed},
		// The first crossing counts, not the dip after it.
		{[]float64{0.1, 0.2, 0.3}, []float64{0.01, 0.1, 0.02}, 0.05, inverseLogLinear(0.1, 0.01, 0.2, 0.1, 0.05), Crossed},
		{nil, nil, 0.05, math.NaN(), NoMatch},
	} {
		got, m := NewErrorCurve(tc.s, tc.e).SparsityAt(tc.target)
		if m != tc.match || !closeOrBothNaN(got, tc.want) {
			t.Errorf("%v %v at %v: %v %s, want %v %s", tc.s, tc.e, tc.target, got, m, tc.want, tc.match)
		}
	}
	r := testutil.Rand(t)
	for trial := range 200 {
		n := 2 + r.IntN(7)
		s, e := make([]float64, n), make([]float64, n)
		x, y := r.Float64()*0.5, math.Pow(10, -5+3*r.Float64())
		for i := range n {
			s[i], e[i] = x, y
			x += 1e-3 + 0.2*r.Float64()
			y *= 1.01 + 10*r.Float64()
		}
		c := NewErrorCurve(s, e)
		target := e[0] * math.Pow(e[n-1]/e[0], r.Float64())
		x, m := c.SparsityAt(target)
		back, where := c.At(x)
		if m != Crossed || where != InRange || math.Abs(back-target) > 1e-9*target {
			t.Fatalf("trial %d: SparsityAt(%v) = %v %s; At(%v) = %v %v", trial, target, x, m, x, back, where)
		}
	}
}

func TestRangeString(t *testing.T) {
	for r, want := range map[Range]string{InRange: "in_range", BelowRange: "below_range", AboveRange: "above_range", NoCurve: "no_oracle", Range(9): "unknown"} {
		if got := fmt.Sprint(r); got != want {
			t.Errorf("Range(%d) = %q, want %q", int(r), got, want)
		}
	}
}
