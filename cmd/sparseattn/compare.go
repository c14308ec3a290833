package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/evaluate"
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
	denseRow, dense, err := measure(ctx, rf, bar, prob, sparseattn.Options{Causal: prob.Causal, Planner: plan.DensePlanner{}, Scale: float32(*scale)}, "dense (reference)", nil)
	if err != nil {
		return err
	}
	report.DenseMS = denseRow.TotalMS
	sweeper := evaluate.Sweeper{Run: rf.runner(bar, prob), Problem: prob.evaluated(), Reference: referenceOf(denseRow, dense),
		Options: opts, Refine: *refine, Target: *target}
	curves, err := sweeper.Sweep(ctx, evalSweeps(sws))
	if err != nil {
		return err
	}
	bar.Finish()
	for _, c := range curves {
		report.Curves = append(report.Curves, curveOf(c, prob.hasNeedle()))
	}
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

// evalSweeps is the sweeps as package evaluate takes them; a knob's
// planner builder lets it refine the oracle.
func evalSweeps(sws []sweep) []evaluate.Sweep {
	out := make([]evaluate.Sweep, len(sws))
	for i, sw := range sws {
		out[i] = evaluate.Sweep{Method: sw.meth.name, Values: sw.values, Planners: sw.planners}
		if sw.values != nil {
			out[i].Knob, out[i].At = sw.meth.knob.name, sw.meth.knob.planner
		}
	}
	return out
}

// curveOf is the report's view of a measured curve; needle says whether
// its rows report the needle's recall.
func curveOf(c evaluate.Curve, needle bool) sweepCurve {
	out := sweepCurve{Method: c.Method, Knob: c.Knob, RatioGeoMean: jsonFloat(c.RatioGeoMean), Matched: c.Matched,
		SparsityAtTarget: jsonFloat(c.SparsityAtTarget), TargetMatch: string(c.TargetMatch)}
	for _, p := range c.Points {
		sp := sweepPoint{evalRow: rowOf(p.Measurement, needle), OracleRelL1: jsonFloat(p.OracleRelL1), OracleRatio: jsonFloat(p.OracleRatio),
			Match: p.Match.String(), Refined: p.Refined}
		if c.Knob != "" {
			v := p.Value
			sp.Value = &v
		}
		out.Points = append(out.Points, sp)
	}
	return out
}
