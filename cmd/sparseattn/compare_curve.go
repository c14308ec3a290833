package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sparseattn/sparseattn/internal/chart"
)

// The arithmetic of compare's curves: refining the oracle's curve where
// other methods fall between its points, matching each point to the
// oracle's error at the same sparsity, and reading each curve at the
// target error.

// minGap is the sparsity gap between consecutive oracle points below which
// --oracle-refine stops bisecting: interpolation over 0.01 is close enough.
const minGap = 0.01

// refineOracle adds up to n points to the oracle's curve (the curve named
// "oracle", whose points are sorted by sparsity as it goes). Each goes at
// a short number near the midpoint of the knob values of two consecutive
// points that are more than minGap apart in sparsity and bracket a point
// of another method;
// of those pairs, the one whose errors differ most (in decades) is split
// first. Log-linear interpolation is only as good as the oracle's sampling,
// and the oracle's error climbs decades within its first percent of
// sparsity. run measures the oracle at a knob value.
func refineOracle(n int, minGap float64, curves []sweepCurve, run func(x float64) (sweepPoint, error)) error {
	oi := slices.IndexFunc(curves, func(c sweepCurve) bool { return c.Method == "oracle" })
	if oi < 0 {
		return nil
	}
	oc := &curves[oi]
	bySparsity := func(a, b sweepPoint) int {
		switch {
		case a.Sparsity < b.Sparsity:
			return -1
		case a.Sparsity > b.Sparsity:
			return 1
		}
		return 0
	}
	var targets []float64
	for _, c := range curves {
		if c.Method != "oracle" {
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
			if lo.Value == nil || hi.Value == nil || *lo.Value == *hi.Value {
				continue
			}
			if _, ok := shortBetween(*lo.Value, *hi.Value); !ok {
				continue
			}
			if hi.Sparsity-lo.Sparsity <= minGap || !slices.ContainsFunc(targets, func(s float64) bool { return s > lo.Sparsity && s < hi.Sparsity }) {
				continue
			}
			if span := errorSpan(float64(lo.RelL1), float64(hi.RelL1)); best < 0 || span > bestSpan {
				best, bestSpan = i, span
			}
		}
		if best < 0 {
			break
		}
		x, _ := shortBetween(*oc.Points[best-1].Value, *oc.Points[best].Value)
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

// matchOracle fills each point's oracle fields from the oracle's curve.
func matchOracle(curves []sweepCurve) {
	var ref *errorCurve
	for _, c := range curves {
		if c.Method == "oracle" {
			s, e := make([]float64, len(c.Points)), make([]float64, len(c.Points))
			for i, p := range c.Points {
				s[i], e[i] = p.Sparsity, float64(p.RelL1)
			}
			ref = newErrorCurve(s, e)
		}
	}
	for ci := range curves {
		c := &curves[ci]
		var logSum float64
		c.Matched = 0
		for pi := range c.Points {
			p := &c.Points[pi]
			p.OracleRelL1, p.OracleRatio, p.Match = jsonFloat(math.NaN()), jsonFloat(math.NaN()), "no_oracle"
			if ref == nil {
				continue
			}
			e, where := ref.at(p.Sparsity)
			p.Match = where.String()
			if where != inRange {
				continue
			}
			p.OracleRelL1 = jsonFloat(e)
			if r := float64(p.RelL1) / e; e > 0 && r > 0 && finite(r) {
				p.OracleRatio = jsonFloat(r)
				logSum += math.Log(r)
				c.Matched++
			}
		}
		c.RatioGeoMean = jsonFloat(math.NaN())
		if c.Matched > 0 {
			c.RatioGeoMean = jsonFloat(math.Exp(logSum / float64(c.Matched)))
		}
	}
}

// atTarget fills each curve's sparsity at the target error.
func atTarget(curves []sweepCurve, target float64) {
	for ci := range curves {
		c := &curves[ci]
		s, e := make([]float64, len(c.Points)), make([]float64, len(c.Points))
		for i, p := range c.Points {
			s[i], e[i] = p.Sparsity, float64(p.RelL1)
		}
		x, m := newErrorCurve(s, e).sparsityAt(target)
		c.SparsityAtTarget, c.TargetMatch = jsonFloat(x), m
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// rangeMatch says where a sparsity falls against a curve's range.
type rangeMatch int

const (
	inRange rangeMatch = iota
	belowRange
	aboveRange
	emptyCurve
)

func (m rangeMatch) String() string {
	return [...]string{"in_range", "below_range", "above_range", "no_oracle"}[m]
}

// errorCurve is error as a function of sparsity, known at points sorted by
// sparsity with distinct sparsities.
type errorCurve struct {
	s, e []float64
}

// newErrorCurve sorts the points by sparsity and merges points of equal
// sparsity (knob values that change nothing) into one, their errors
// averaged geometrically when all are positive, else arithmetically.
// Points with a non-finite coordinate are dropped.
func newErrorCurve(s, e []float64) *errorCurve {
	idx := make([]int, 0, len(s))
	for i := range s {
		if finite(s[i]) && finite(e[i]) && e[i] >= 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case s[a] < s[b]:
			return -1
		case s[a] > s[b]:
			return 1
		}
		return 0
	})
	c := &errorCurve{}
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

// at returns the curve's error at sparsity x: log(error) interpolated
// linearly in sparsity between the two nearest points (plain linear when
// one of them is zero), and where x lies; NaN outside the range.
func (c *errorCurve) at(x float64) (float64, rangeMatch) {
	n := len(c.s)
	switch {
	case n == 0 || !finite(x):
		return math.NaN(), emptyCurve
	case x < c.s[0]:
		return math.NaN(), belowRange
	case x > c.s[n-1]:
		return math.NaN(), aboveRange
	}
	i, found := slices.BinarySearch(c.s, x)
	if found {
		return c.e[i], inRange
	}
	// c.s[i-1] < x < c.s[i]
	s0, s1, e0, e1 := c.s[i-1], c.s[i], c.e[i-1], c.e[i]
	t := (x - s0) / (s1 - s0)
	if e0 > 0 && e1 > 0 {
		return math.Exp(math.Log(e0) + t*(math.Log(e1)-math.Log(e0))), inRange
	}
	return e0 + t*(e1-e0), inRange
}

// sparsityAt returns the sparsity at which the curve's error first rises
// above target, walking up in sparsity: log(error) interpolated linearly in
// sparsity between the last point at or below target and the next (plain
// linear when the lower error is zero), the inverse of at. It returns the
// largest sparsity and "at_least" when no point exceeds target, and NaN
// and "none" when the first does.
func (c *errorCurve) sparsityAt(target float64) (float64, string) {
	n := len(c.s)
	if n == 0 || c.e[0] > target {
		return math.NaN(), "none"
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
		return s0 + t*(s1-s0), "crossed"
	}
	return c.s[n-1], "at_least"
}

func parseSize(s string) (w, h int, err error) {
	ws, hs, ok := strings.Cut(strings.ToLower(s), "x")
	if ok {
		w, err = strconv.Atoi(ws)
		if err == nil {
			h, err = strconv.Atoi(hs)
		}
	}
	if !ok || err != nil || w < 200 || h < 150 || w > chart.MaxSide || h > chart.MaxSide {
		return 0, 0, fmt.Errorf("%w: --png-size %q must be WIDTHxHEIGHT with width in 200..%d and height in 150..%d", errUsage, s, chart.MaxSide, chart.MaxSide)
	}
	return w, h, nil
}

// writeCurvesPNG draws relative L1 (log scale) against sparsity, one line
// per method.
func writeCurvesPNG(path string, r compareReport, width, height int) error {
	g := r.Geometry
	p := &chart.LinePlot{
		Title:  fmt.Sprintf("%s  B=%d Hq=%d Hkv=%d N=%d D=%d causal=%v: error vs sparsity", r.Source, g.B, g.Hq, g.Hkv, g.Nk, g.D, r.Causal),
		XLabel: "sparsity (skipped block products, executor counters)",
		YLabel: "relative L1 vs dense",
		LogY:   true,
	}
	for _, c := range r.Curves {
		s := chart.Series{Name: c.Method}
		for _, pt := range c.Points {
			s.X, s.Y = append(s.X, pt.Sparsity), append(s.Y, float64(pt.RelL1))
		}
		p.Series = append(p.Series, s)
	}
	img, err := p.Render(width, height)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := chart.WritePNG(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printCompare(w io.Writer, r compareReport) {
	g := r.Geometry
	fmt.Fprintf(w, "%s: B=%d Hq=%d Hkv=%d Nq=%d Nk=%d D=%d Dv=%d %s causal=%v blocks %dx%d; dense is the reference",
		r.Source, g.B, g.Hq, g.Hkv, g.Nq, g.Nk, g.D, g.Dv, r.DType, r.Causal, r.BlockQ, r.BlockK)
	if r.Timed {
		fmt.Fprintf(w, " (%.1f ms); times are medians of %d runs after %d warmup", r.DenseMS, r.Repeat, r.Warmup)
	}
	if r.Order != "" || r.Int8QK {
		fmt.Fprint(w, "\nevery method ran")
		if r.Order != "" {
			fmt.Fprintf(w, " in %s token order", r.Order)
		}
		if r.Int8QK {
			fmt.Fprint(w, " on INT8 Q and K")
		}
		fmt.Fprint(w, "; dense, the reference, in float and the input order")
	}
	fmt.Fprint(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "method\tknob\tsparsity\trel L1\tcosine\toracle L1\t×oracle\t"
	if r.Timed {
		head += "total ms\tspeedup\t"
	}
	fmt.Fprintln(tw, head)
	for _, c := range r.Curves {
		for _, p := range c.Points {
			knob := "-"
			if p.Value != nil {
				knob = fmt.Sprintf("%s=%g", c.Knob, *p.Value)
			}
			if p.Refined {
				knob += "*"
			}
			oracleL1, ratio := "", ""
			switch p.Match {
			case "in_range":
				oracleL1, ratio = fmt.Sprintf("%.2e", float64(p.OracleRelL1)), "n/a"
				if finite(float64(p.OracleRatio)) {
					ratio = fmt.Sprintf("%.2f", float64(p.OracleRatio))
				}
			case "below_range":
				oracleL1, ratio = "<", "-"
			case "above_range":
				oracleL1, ratio = ">", "-"
			default:
				oracleL1, ratio = "-", "-"
			}
			line := fmt.Sprintf("%s\t%s\t%.3f\t%.2e\t%.6f\t%s\t%s\t",
				c.Method, knob, p.Sparsity, float64(p.RelL1), p.Cosine, oracleL1, ratio)
			if r.Timed {
				line += fmt.Sprintf("%.1f\t%.2fx\t", p.TotalMS, p.Speedup)
			}
			fmt.Fprintln(tw, line)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nper method: sparsity where its rel L1 reaches %g, and the geometric mean of ×oracle over its points inside the oracle's range:\n", r.TargetRelL1)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "method\tsparsity at L1 %g\t×oracle (geo. mean)\t\n", r.TargetRelL1)
	for _, c := range r.Curves {
		at := "none"
		switch c.TargetMatch {
		case "crossed":
			at = fmt.Sprintf("%.3f", float64(c.SparsityAtTarget))
		case "at_least":
			at = fmt.Sprintf("≥ %.3f", float64(c.SparsityAtTarget))
		}
		gm := "-"
		if c.Method != "oracle" {
			gm = "n/a (none in range)"
			if c.Matched > 0 {
				gm = fmt.Sprintf("%.2f over %d of %d points", float64(c.RatioGeoMean), c.Matched, len(c.Points))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", c.Method, at, gm)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nsparsity: skipped fraction of the QK+PV block products a dense causal-aware pass needs, from the executor's counters.")
	fmt.Fprintln(w, "rel L1: Σ|O−O'|/Σ|O| against dense. oracle L1: the oracle's rel L1 at the same sparsity,", interpolationNote+";")
	fmt.Fprintln(w, "\"<\"/\">\": sparsity below/above every oracle point (widen it with --sweep oracle=...). ×oracle = rel L1 / oracle L1.")
	if slices.ContainsFunc(r.Curves, func(c sweepCurve) bool {
		return slices.ContainsFunc(c.Points, func(p sweepPoint) bool { return p.Refined })
	}) {
		fmt.Fprintln(w, "*: oracle point added by --oracle-refine where another method's points fell in a wide gap of the oracle's curve.")
	}
	if !r.Timed {
		fmt.Fprintln(w, "Times are left out: each point ran once, cold. Pass --warmup 1 --repeat 3 to time them (see also \"sparseattn bench\").")
	}
}

var _ flag.Value = sweepFlag{}
