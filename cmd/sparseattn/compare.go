package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/chart"
	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

const compareSummary = `Sweeps each method's main knob on one input and reports the error it reaches
against the sparsity it reaches, side by side: the trade-off curve of every
method on the same tensors. Dense attention runs once and is the reference.
Sparsity is the skipped fraction of block products from the executor's
counters; error is relative L1, Σ|O−O'|/Σ|O|.

The oracle (exact TopCdf on the true block mass) is always swept: each point's
"×oracle" is its error divided by the oracle's error at the same sparsity,
read off the oracle's curve by interpolating log(error) linearly in sparsity
between its two nearest points. Where another method's point falls in a gap
of the oracle's curve wider than 0.01 in sparsity, up to --oracle-refine extra
oracle points bisect the oracle's knob there (marked "*"). Points outside the
oracle's sparsity range get no ratio (shown as "<" or ">"); widen the oracle's
sweep to cover them, e.g. --sweep oracle=0.999,0.99,0.95,0.9,0.8,0.6,0.4.

Inputs are those of "sparseattn eval" (a generated --workload or --input files),
and so are --order and --int8-qk: every swept method, the oracle included,
then runs in that token order or on INT8 Q/K, against float dense.
--sweep method=v1,v2,... (repeatable) replaces a method's default knob values.
Below the table, each method's sparsity at rel L1 = --target-l1 is read off
its curve the same way (the matched-error view, next to ×oracle's
matched-sparsity one).
--png file.png draws the curves (log-scale error against sparsity).`

// sweepFlag collects --sweep method=v1,v2,... values, one method per use.
type sweepFlag map[string][]float64

func (s sweepFlag) String() string {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	slices.Sort(names)
	var parts []string
	for _, name := range names {
		vs := make([]string, len(s[name]))
		for i, v := range s[name] {
			vs[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		parts = append(parts, name+"="+strings.Join(vs, ","))
	}
	return strings.Join(parts, " ")
}

func (s sweepFlag) Set(arg string) error {
	name, list, ok := strings.Cut(arg, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.TrimSpace(list) == "" {
		return fmt.Errorf("want method=v1,v2,..., e.g. oracle=0.99,0.95,0.9")
	}
	if _, dup := s[name]; dup {
		return fmt.Errorf("%s swept twice; give all its values in one --sweep", name)
	}
	var vs []float64
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: %q is not a finite number", name, f)
		}
		vs = append(vs, v)
	}
	s[name] = vs
	return nil
}

// sweepPoint is one knob setting of one method, measured.
type sweepPoint struct {
	evalRow
	// Value is the knob's value; nil for a method without a knob.
	Value *float64 `json:"knob_value"`
	// OracleRelL1 is the oracle's relative L1 interpolated at this
	// point's sparsity, and OracleRatio this point's RelL1 divided by it;
	// both null when the sparsity is outside the oracle's range (Match
	// says which side) or the oracle's error there is zero.
	OracleRelL1 jsonFloat `json:"oracle_rel_l1"`
	OracleRatio jsonFloat `json:"oracle_ratio"`
	Match       string    `json:"oracle_match"` // "in_range", "below_range", "above_range" or "no_oracle"
	// Refined marks an oracle point added by --oracle-refine.
	Refined bool `json:"refined,omitempty"`
}

// sweepCurve is one method's sweep, in the order of its knob values; the
// oracle's, with any refined points, in order of sparsity.
type sweepCurve struct {
	Method string       `json:"method"`
	Knob   string       `json:"knob,omitempty"`
	Points []sweepPoint `json:"points"`
	// RatioGeoMean is the geometric mean of OracleRatio over the points
	// with one, and Matched their number; null when none has.
	RatioGeoMean jsonFloat `json:"oracle_ratio_geomean"`
	Matched      int       `json:"oracle_matched_points"`
	// SparsityAtTarget is the sparsity at which the curve's relative L1
	// first reaches the report's TargetRelL1 (log(error) interpolated
	// linearly in sparsity between the points around the crossing);
	// TargetMatch is "crossed", "at_least" when every point stays below
	// the target (the value is then the largest sparsity measured), or
	// "none" when even the densest point exceeds it (value null).
	SparsityAtTarget jsonFloat `json:"sparsity_at_target"`
	TargetMatch      string    `json:"target_match"`
}

type compareReport struct {
	Source   string          `json:"source"`
	Geometry tensor.Geometry `json:"geometry"`
	Causal   bool            `json:"causal"`
	DType    string          `json:"dtype"`
	BlockQ   int             `json:"block_q"`
	BlockK   int             `json:"block_k"`
	Repeat   int             `json:"repeat"`
	Warmup   int             `json:"warmup"`
	// Timed is set when --repeat or --warmup was given: the times are
	// then meant to be read; by default one cold run per point is taken
	// and the table leaves its times out.
	Timed   bool    `json:"timed"`
	DenseMS float64 `json:"dense_total_ms"`
	// Order and Int8QK name the variant every swept point ran under
	// (eval's --order and --int8-qk); the dense reference is plain float
	// attention in the input order.
	Order         string       `json:"order,omitempty"`
	Int8QK        bool         `json:"int8_qk,omitempty"`
	Interpolation string       `json:"oracle_interpolation"`
	TargetRelL1   float64      `json:"target_rel_l1"`
	Curves        []sweepCurve `json:"curves"`
}

const interpolationNote = "log(rel L1) linear in sparsity between the two nearest oracle points; no extrapolation outside the oracle's sparsity range"

// sweep is a method with the planners of its knob values, built before
// any work so that a bad value fails fast.
type sweep struct {
	meth     *method
	values   []float64 // nil for a method without a knob
	planners []plan.Planner
}

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", compareSummary, stderr)
	var in inputFlags
	in.register(fs)
	var mf methodFlags
	mf.register(fs, sparseMethodNames())
	fs.Lookup("methods").Usage += " (dense is the reference and always runs; the oracle is always swept)"
	sweeps := sweepFlag{}
	fs.Var(sweeps, "sweep", "method=v1,v2,...: knob values to sweep for one method instead of its defaults (repeatable)")
	var rf runFlags
	rf.registerWith(fs, "point", 1, 0)
	scale := registerScale(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pngPath := fs.String("png", "", "also draw the curves into this PNG file")
	pngSize := fs.String("png-size", "800x500", "PNG width x height in pixels")
	var vf variantFlags
	vf.register(fs)
	target := fs.Float64("target-l1", 0.05, "relative L1 at which each method's sparsity is read off its curve, in (0, 10]")
	refine := fs.Int("oracle-refine", 8, "extra oracle points, each bisecting the oracle's knob where the widest sparsity gap holding another method's point is, 0..64")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkRun(&rf, *scale, stderr); err != nil {
		return err
	}
	if vf.sim {
		return fmt.Errorf("%w: --sim applies to eval, not compare", errUsage)
	}
	if !(*target > 0 && *target <= 10) {
		return fmt.Errorf("%w: --target-l1 %v must be in (0, 10]", errUsage, *target)
	}
	if *refine < 0 || *refine > 64 {
		return fmt.Errorf("%w: --oracle-refine %d must be in 0..64", errUsage, *refine)
	}
	width, height, err := parseSize(*pngSize)
	if err != nil {
		return err
	}
	if *pngPath != "" {
		if err := checkOutputDir("png", *pngPath); err != nil {
			return err
		}
	}
	sws, err := buildSweeps(&mf, sweeps)
	if err != nil {
		return err
	}
	steps := 1 + (1+*refine)*(rf.warmup+rf.repeat)
	for _, sw := range sws {
		steps += len(sw.planners) * (rf.warmup + rf.repeat)
	}
	bar := progress.New(stderr, steps)
	defer bar.Finish()
	bar.Label("loading input")
	prob, g, err := in.loadValid(ctx, fs)
	if err != nil {
		return err
	}
	spec, err := vf.spec(prob, &in, fs)
	if err != nil {
		return err
	}
	// Every swept point runs under the variant (token order, INT8 Q/K);
	// the dense reference never does.
	opts := func(pl plan.Planner) sparseattn.Options {
		o := sparseattn.Options{Causal: prob.Causal, Planner: pl, Scale: float32(*scale)}
		if vf.active(spec) {
			o = vf.apply(o, spec)
		}
		return o
	}
	bar.Step("")
	report := compareReport{Source: prob.Source, Geometry: g, Causal: prob.Causal, DType: prob.q.DType().String(),
		BlockQ: rf.blockQ, BlockK: rf.blockK, Repeat: rf.repeat, Warmup: rf.warmup, Interpolation: interpolationNote, Int8QK: vf.int8QK, TargetRelL1: *target}
	if !spec.Identity() {
		report.Order = string(spec.Kind)
	}
	fs.Visit(func(f *flag.Flag) { report.Timed = report.Timed || f.Name == "repeat" || f.Name == "warmup" })
	denseRow, dense, err := measure(ctx, rf, bar, prob, g, sparseattn.Options{Causal: prob.Causal, Planner: plan.DensePlanner{}, Scale: float32(*scale)}, "dense (reference)", nil)
	if err != nil {
		return err
	}
	ref := &reference{out: dense.Out, totalMS: denseRow.TotalMS}
	report.DenseMS = denseRow.TotalMS
	for _, sw := range sws {
		c := sweepCurve{Method: sw.meth.name}
		if sw.values != nil {
			c.Knob = sw.meth.knob.name
		}
		for i, pl := range sw.planners {
			label := sw.meth.name
			var value *float64
			if sw.values != nil {
				value = &sw.values[i]
				label = fmt.Sprintf("%s %s=%g", sw.meth.name, c.Knob, *value)
			}
			row, _, err := measure(ctx, rf, bar, prob, g, opts(pl), label, ref)
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			row.Method = sw.meth.name
			c.Points = append(c.Points, sweepPoint{evalRow: row, Value: value})
		}
		report.Curves = append(report.Curves, c)
	}
	if sws[0].meth.name == "oracle" && sws[0].values != nil {
		k := sws[0].meth.knob
		err := refineOracle(*refine, minGap, report.Curves, func(x float64) (sweepPoint, error) {
			label := fmt.Sprintf("oracle %s=%g (refining)", k.name, x)
			pl, err := k.planner(x)
			if err != nil {
				return sweepPoint{}, err
			}
			row, _, err := measure(ctx, rf, bar, prob, g, opts(pl), label, ref)
			if err != nil {
				return sweepPoint{}, fmt.Errorf("%s: %w", label, err)
			}
			row.Method = "oracle"
			return sweepPoint{evalRow: row, Value: &x, Refined: true}, nil
		})
		if err != nil {
			return err
		}
	}
	bar.Finish()
	matchOracle(report.Curves)
	atTarget(report.Curves, *target)
	if *pngPath != "" {
		if err := writeCurvesPNG(*pngPath, report, width, height); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	printCompare(stdout, report)
	if *pngPath != "" {
		fmt.Fprintf(stdout, "\nwrote %s\n", *pngPath)
	}
	return nil
}

// buildSweeps resolves --methods and --sweep into planners: the oracle
// first (added when not named), then the named methods other than dense.
func buildSweeps(mf *methodFlags, sweeps sweepFlag) ([]sweep, error) {
	selected, err := mf.selected()
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(selected, func(m *method) bool { return m.name != "dense" }) {
		return nil, fmt.Errorf("%w: --methods names only dense, which is the reference; name a method to compare", errUsage)
	}
	var ms []*method
	for _, m := range mf.catalog {
		if m.name == "oracle" {
			ms = append(ms, m)
		}
	}
	for _, m := range selected {
		if m.name != "dense" && m.name != "oracle" {
			ms = append(ms, m)
		}
	}
	byName := map[string]*method{}
	for _, m := range ms {
		byName[m.name] = m
	}
	for name := range sweeps {
		m, ok := byName[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: --sweep %s: %s is not among the swept methods (%s)", errUsage, name, name, strings.Join(methodNames(ms), ", "))
		case m.knob == nil:
			return nil, fmt.Errorf("%w: --sweep %s: %s has no knob to sweep", errUsage, name, name)
		}
	}
	var out []sweep
	for _, m := range ms {
		sw := sweep{meth: m}
		if m.knob == nil {
			p, err := m.planner()
			if err != nil {
				return nil, err
			}
			sw.planners = []plan.Planner{p}
			out = append(out, sw)
			continue
		}
		sw.values = slices.Clone(m.knob.values)
		if vs, ok := sweeps[m.name]; ok {
			sw.values = vs
		}
		for _, x := range sw.values {
			p, err := m.knob.planner(x)
			if err != nil {
				return nil, fmt.Errorf("--sweep %s=%g: %w", m.name, x, err)
			}
			sw.planners = append(sw.planners, p)
		}
		out = append(out, sw)
	}
	return out, nil
}

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
