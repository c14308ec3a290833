package evaluate

import (
	"cmp"
	"math"
	"slices"
)

// Range says where a sparsity falls against an ErrorCurve's points.
type Range int

// Ranges. Their String values are the JSON words "sparseattn compare"
// reports.
const (
	// InRange: between the curve's smallest and largest sparsity.
	InRange Range = iota
	// BelowRange: below the smallest.
	BelowRange
	// AboveRange: above the largest.
	AboveRange
	// NoCurve: the curve has no points (or the sparsity is not finite).
	NoCurve
)

// String returns "in_range", "below_range", "above_range" or "no_oracle".
func (r Range) String() string {
	if r < InRange || r > NoCurve {
		return "unknown"
	}
	return [...]string{"in_range", "below_range", "above_range", "no_oracle"}[r]
}

// TargetMatch says how ErrorCurve.SparsityAt found its answer.
type TargetMatch string

// Target matches.
const (
	// Crossed: the error rises through the target between two points.
	Crossed TargetMatch = "crossed"
	// AtLeast: no point exceeds the target; the answer is the largest
	// sparsity measured, a lower bound.
	AtLeast TargetMatch = "at_least"
	// NoMatch: even the densest point exceeds the target (answer NaN).
	NoMatch TargetMatch = "none"
)

// ErrorCurve is error as a function of sparsity, known at points sorted by
// sparsity with distinct sparsities. Build one with NewErrorCurve.
type ErrorCurve struct {
	s, e []float64
}

// NewErrorCurve returns the curve through the points (s[i], e[i]), in any
// order. Points of equal sparsity (knob values that change nothing) merge
// into one, their errors averaged geometrically when all are positive,
// else arithmetically. Points with a non-finite coordinate or a negative
// error are dropped.
func NewErrorCurve(s, e []float64) *ErrorCurve {
	n := min(len(s), len(e))
	idx := make([]int, 0, n)
	for i := range n {
		if finite(s[i]) && finite(e[i]) && e[i] >= 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(s[a], s[b]) })
	c := &ErrorCurve{}
	for i := 0; i < len(idx); {
		j := i
		var sum, logSum float64
		positive := true
		for ; j < len(idx) && s[idx[j]] == s[idx[i]]; j++ {
			x := e[idx[j]]
			sum += x
			positive = positive && x > 0
			if x > 0 {
				logSum += math.Log(x)
			}
		}
		n := float64(j - i)
		merged := sum / n
		if positive {
			merged = math.Exp(logSum / n)
		}
		c.s, c.e = append(c.s, s[idx[i]]), append(c.e, merged)
		i = j
	}
	return c
}

// Points returns copies of the curve's sparsities (increasing) and errors.
func (c *ErrorCurve) Points() (sparsity, err []float64) {
	return slices.Clone(c.s), slices.Clone(c.e)
}

// At returns the curve's error at sparsity x and where x lies. Between
// the two nearest points, at sparsities s0 < x < s1 with errors e0 and e1,
// it is log-linear:
//
//	e(x) = exp(log e0 + t·(log e1 − log e0)),  t = (x − s0)/(s1 − s0)
//
// and plain linear, e0 + t·(e1 − e0), when e0 or e1 is zero. Outside the
// points' range it returns NaN (no extrapolation).
func (c *ErrorCurve) At(x float64) (float64, Range) {
	n := len(c.s)
	switch {
	case n == 0 || !finite(x):
		return math.NaN(), NoCurve
	case x < c.s[0]:
		return math.NaN(), BelowRange
	case x > c.s[n-1]:
		return math.NaN(), AboveRange
	}
	i, found := slices.BinarySearch(c.s, x)
	if found {
		return c.e[i], InRange
	}
	// c.s[i-1] < x < c.s[i]
	s0, s1, e0, e1 := c.s[i-1], c.s[i], c.e[i-1], c.e[i]
	t := (x - s0) / (s1 - s0)
	if e0 > 0 && e1 > 0 {
		return math.Exp(math.Log(e0) + t*(math.Log(e1)-math.Log(e0))), InRange
	}
	return e0 + t*(e1-e0), InRange
}

// SparsityAt returns the sparsity at which the curve's error first rises
// above target, walking up in sparsity: the inverse of At on the segment
// from the last point at or below target to the next,
//
//	x = s0 + t·(s1 − s0),  t = log(target/e0) / log(e1/e0)
//
// (t = target/e1 when e0 is zero). It returns the largest sparsity and
// AtLeast when no point exceeds target, and NaN and NoMatch when the
// first point does.
func (c *ErrorCurve) SparsityAt(target float64) (float64, TargetMatch) {
	n := len(c.s)
	if n == 0 || c.e[0] > target {
		return math.NaN(), NoMatch
	}
	for i := 1; i < n; i++ {
		if c.e[i] <= target {
			continue
		}
		s0, s1, e0, e1 := c.s[i-1], c.s[i], c.e[i-1], c.e[i]
		var t float64
		if e0 > 0 {
			t = math.Log(target/e0) / math.Log(e1/e0)
		} else {
			t = target / e1
		}
		return s0 + t*(s1-s0), Crossed
	}
	return c.s[n-1], AtLeast
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
