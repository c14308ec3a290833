package evaluate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/plan"
)

// OracleName is the method name of the block oracle's curve, the
// yardstick MatchOracle and RefineOracle look for.
const OracleName = "oracle"

// MinGap is the sparsity gap between consecutive oracle points below
// which RefineOracle stops bisecting: interpolation over 0.01 is close
// enough.
const MinGap = 0.01

// ErrSweep reports a malformed Sweep or Sweeper.
var ErrSweep = errors.New("evaluate: bad sweep")

// Sweep is one method to measure along its main knob.
type Sweep struct {
	Method string
	// Knob names the knob; empty for a method without one, measured once.
	Knob string
	// Values are the knob's values, in the order to measure them; nil
	// without a knob.
	Values []float64
	// Planners holds the planner at each value (one without a knob), built
	// before any work so that a bad value fails fast.
	Planners []plan.Planner
	// At builds the planner at any knob value; RefineOracle needs it for
	// the oracle. It may be nil otherwise.
	At func(x float64) (plan.Planner, error)
}

// Point is one knob setting of one method, measured.
type Point struct {
	Measurement
	// Value is the knob's value (zero for a curve without a knob).
	Value float64
	// OracleRelL1 is the oracle's relative L1 interpolated at this point's
	// sparsity, and OracleRatio this point's RelL1 divided by it; both
	// NaN when the sparsity is outside the oracle's range (Match says
	// which side) or the oracle's error there is zero.
	OracleRelL1, OracleRatio float64
	Match                    Range
	// Refined marks an oracle point added by RefineOracle.
	Refined bool
}

// Curve is one method's sweep, in the order of its knob values; the
// oracle's, with any refined points, in order of sparsity.
type Curve struct {
	Method string
	Knob   string // empty without a knob
	Points []Point
	// RatioGeoMean is the geometric mean of OracleRatio over the points
	// with one, and Matched their number; NaN when none has.
	RatioGeoMean float64
	Matched      int
	// SparsityAtTarget is ErrorCurve.SparsityAt of the curve's points at
	// the sweep's target error, and TargetMatch how it was found.
	SparsityAtTarget float64
	TargetMatch      TargetMatch
}

// Sweeper measures methods along their knobs against one dense reference.
type Sweeper struct {
	Run       Runner
	Problem   Problem
	Reference *Reference
	// Options returns the options a planner runs with (causal masking,
	// scale, token order, INT8 Q/K); nil runs it with the problem's
	// causal masking and nothing else.
	Options func(plan.Planner) sparseattn.Options
	// Refine is the number of extra oracle points RefineOracle may add.
	Refine int
	// Target is the relative L1 at which each curve's sparsity is read.
	Target float64
}

// Sweep measures each sweep's planners in order, one Curve per sweep;
// when the first sweep is the oracle's, with a knob and its At, refines
// the oracle's curve where other methods' points fall in its gaps; then
// matches every point to the oracle (MatchOracle) and reads every curve
// at the target error (AtTarget).
func (s *Sweeper) Sweep(ctx context.Context, sweeps []Sweep) ([]Curve, error) {
	if s.Run == nil || s.Reference == nil {
		return nil, fmt.Errorf("%w: a Sweeper needs a Runner and a Reference", ErrSweep)
	}
	for _, sw := range sweeps {
		want := 1
		if sw.Knob != "" {
			want = len(sw.Values)
		}
		if len(sw.Planners) != want || want == 0 {
			return nil, fmt.Errorf("%w: %s has %d planners for %d knob values", ErrSweep, sw.Method, len(sw.Planners), len(sw.Values))
		}
	}
	var curves []Curve
	for _, sw := range sweeps {
		c := Curve{Method: sw.Method, Knob: sw.Knob}
		for i, pl := range sw.Planners {
			label := sw.Method
			var value float64
			if sw.Knob != "" {
				value = sw.Values[i]
				label = fmt.Sprintf("%s %s=%g", sw.Method, sw.Knob, value)
			}
			p, err := s.measure(ctx, sw.Method, label, pl)
			if err != nil {
				return nil, err
			}
			p.Value = value
			c.Points = append(c.Points, p)
		}
		curves = append(curves, c)
	}
	if len(sweeps) > 0 && sweeps[0].Method == OracleName && sweeps[0].Knob != "" && sweeps[0].At != nil {
		o := sweeps[0]
		err := RefineOracle(s.Refine, MinGap, curves, func(x float64) (Point, error) {
			label := fmt.Sprintf("%s %s=%g (refining)", o.Method, o.Knob, x)
			pl, err := o.At(x)
			if err != nil {
				return Point{}, err
			}
			p, err := s.measure(ctx, o.Method, label, pl)
			if err != nil {
				return Point{}, err
			}
			p.Value, p.Refined = x, true
			return p, nil
		})
		if err != nil {
			return nil, err
		}
	}
	MatchOracle(curves)
	AtTarget(curves, s.Target)
	return curves, nil
}

// measure measures one planner as a point of method's curve.
func (s *Sweeper) measure(ctx context.Context, method, label string, pl plan.Planner) (Point, error) {
	opts := sparseattn.Options{Causal: s.Problem.Causal, Planner: pl}
	if s.Options != nil {
		opts = s.Options(pl)
	}
	m, _, err := Measure(ctx, s.Run, s.Problem, opts, label, s.Reference)
	if err != nil {
		return Point{}, fmt.Errorf("%s: %w", label, err)
	}
	m.Method = method
	return Point{Measurement: m}, nil
}

// RefineOracle adds up to n points to the oracle's curve (the curve named
// OracleName, whose points are sorted by sparsity as it goes). Each goes
// at a short number near the midpoint of the knob values of two
// consecutive points that are more than minGap apart in sparsity and
// bracket a point of another method; of those pairs, the one whose errors
// differ most (in decades) is split first. Log-linear interpolation is
// only as good as the oracle's sampling, and the oracle's error climbs
// decades within its first percent of sparsity. run measures the oracle
// at a knob value. A curve without a knob is left alone.
func RefineOracle(n int, minGap float64, curves []Curve, run func(x float64) (Point, error)) error {
	oi := slices.IndexFunc(curves, func(c Curve) bool { return c.Method == OracleName })
	if oi < 0 || curves[oi].Knob == "" {
		return nil
	}
	oc := &curves[oi]
	bySparsity := func(a, b Point) int { return cmp.Compare(a.Sparsity, b.Sparsity) }
	var targets []float64
	for _, c := range curves {
		if c.Method != OracleName {
			for _, p := range c.Points {
				targets = append(targets, p.Sparsity)
			}
		}
	}
	for range n {
		slices.SortStableFunc(oc.Points, bySparsity)
		best, bestSpan := -1, 0.0
		for i := 1; i < len(oc.Points); i++ {
			lo, hi := oc.Points[i-1], oc.Points[i]
			if lo.Value == hi.Value {
				continue
			}
			if _, ok := shortBetween(lo.Value, hi.Value); !ok {
				continue
			}
			if hi.Sparsity-lo.Sparsity <= minGap || !slices.ContainsFunc(targets, func(s float64) bool { return s > lo.Sparsity && s < hi.Sparsity }) {
				continue
			}
			if span := errorSpan(lo.RelL1, hi.RelL1); best < 0 || span > bestSpan {
				best, bestSpan = i, span
			}
		}
		if best < 0 {
			break
		}
		x, _ := shortBetween(oc.Points[best-1].Value, oc.Points[best].Value)
		p, err := run(x)
		if err != nil {
			return err
		}
		oc.Points = append(oc.Points, p)
	}
	slices.SortStableFunc(oc.Points, bySparsity)
	return nil
}

// shortBetween returns the number with the fewest decimals that rounds
// the midpoint of a and b and lies strictly between them (0.994 between
// 0.99 and 0.999, not 0.9945), so refined knob values read well; false
// when no float64 lies between them.
func shortBetween(a, b float64) (float64, bool) {
	lo, hi := min(a, b), max(a, b)
	mid := lo + (hi-lo)/2
	for d := 0; d <= 17; d++ {
		p := math.Pow(10, float64(d))
		if m := math.Round(mid*p) / p; m > lo && m < hi {
			return m, true
		}
	}
	if mid > lo && mid < hi {
		return mid, true
	}
	return 0, false
}

// errorSpan is how far apart two errors are in decades; +Inf when one is
// zero and the other not, so such a segment is split first.
func errorSpan(a, b float64) float64 {
	switch {
	case a > 0 && b > 0:
		return math.Abs(math.Log10(b / a))
	case a == b:
		return 0
	}
	return math.Inf(1)
}

// curveOf is the ErrorCurve through c's points.
func curveOf(c Curve) *ErrorCurve {
	s, e := make([]float64, len(c.Points)), make([]float64, len(c.Points))
	for i, p := range c.Points {
		s[i], e[i] = p.Sparsity, p.RelL1
	}
	return NewErrorCurve(s, e)
}

// MatchOracle fills each point's oracle fields, and each curve's
// RatioGeoMean and Matched, from the oracle's curve (ErrorCurve.At, the
// matched-sparsity view). Without an oracle curve every point's Match is
// NoCurve.
func MatchOracle(curves []Curve) {
	var ref *ErrorCurve
	for _, c := range curves {
		if c.Method == OracleName {
			ref = curveOf(c)
		}
	}
	for ci := range curves {
		c := &curves[ci]
		var logSum float64
		c.Matched = 0
		for pi := range c.Points {
			p := &c.Points[pi]
			p.OracleRelL1, p.OracleRatio, p.Match = math.NaN(), math.NaN(), NoCurve
			if ref == nil {
				continue
			}
			e, where := ref.At(p.Sparsity)
			p.Match = where
			if where != InRange {
				continue
			}
			p.OracleRelL1 = e
			if r := p.RelL1 / e; e > 0 && r > 0 && finite(r) {
				p.OracleRatio = r
				logSum += math.Log(r)
				c.Matched++
			}
		}
		c.RatioGeoMean = math.NaN()
		if c.Matched > 0 {
			c.RatioGeoMean = math.Exp(logSum / float64(c.Matched))
		}
	}
}

// AtTarget fills each curve's sparsity at the target error
// (ErrorCurve.SparsityAt, the matched-error view).
func AtTarget(curves []Curve, target float64) {
	for ci := range curves {
		c := &curves[ci]
		c.SparsityAtTarget, c.TargetMatch = curveOf(*c).SparsityAt(target)
	}
}
