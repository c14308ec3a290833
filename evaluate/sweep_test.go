package evaluate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestSweepAgainstReference sweeps the oracle and a sliding window on a
// tiny random GQA problem (ragged N: 100 tokens in 32-token blocks)
// against the float64 reference. A recording Runner keeps every run's
// output, so each point's rel L1 is recomputed here in float64 from the
// reference's rows; the sweep compares with the reference rounded to
// float32, which moves each element by ≤ 2⁻²⁴ relative and so rel L1 by
// at most about 6e-8: tolerance 1e-7 absolute. The oracle at CDF 1 keeps
// every block, so its error is the executor's float32 rounding alone
// (≤ 1e-5 at N=100, D=32).
func TestSweepAgainstReference(t *testing.T) {
	ctx := context.Background()
	r := testutil.Rand(t)
	for _, causal := range []bool{true, false} {
		q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 100, D: 32}, 2)
		k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 100, D: 32}, 1)
		v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 100, D: 32}, 1)
		ref64, err := reference.Attention(ctx, q, k, v, causal, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		outs := map[string]*tensor.Tensor{}
		run := func(ctx context.Context, label string, o sparseattn.Options) (Timing, error) {
			o.BlockQ, o.BlockK = 32, 32
			tm, err := Time(ctx, q, k, v, o, 0, 1, nil)
			if err == nil {
				mu.Lock()
				outs[label] = tm.Last.Out
				mu.Unlock()
			}
			return tm, err
		}
		oracleAt := func(x float64) (plan.Planner, error) { return oracle.Planner{CDF: x}, nil }
		cdfs := []float64{1, 0.99, 0.9, 0.7}
		var oraclePlanners []plan.Planner
		for _, x := range cdfs {
			oraclePlanners = append(oraclePlanners, oracle.Planner{CDF: x})
		}
		sweeps := []Sweep{
			{Method: OracleName, Knob: "cdf", Values: cdfs, Planners: oraclePlanners, At: oracleAt},
			{Method: "window", Knob: "size", Values: []float64{64, 32}, Planners: []plan.Planner{window.Planner{Window: 64}, window.Planner{Window: 32}}},
		}
		s := Sweeper{Run: run, Problem: Problem{Q: q, K: k, V: v, Causal: causal}, Reference: &Reference{Out: ref64.Float32(), TotalMS: 1}, Refine: 2, Target: 0.05}
		curves, err := s.Sweep(ctx, sweeps)
		if err != nil {
			t.Fatal(err)
		}
		if len(curves) != 2 || curves[0].Method != OracleName || curves[1].Method != "window" || len(curves[1].Points) != 2 {
			t.Fatalf("causal=%v: curves %+v", causal, curves)
		}
		for _, c := range curves {
			for _, p := range c.Points {
				label := fmt.Sprintf("%s %s=%g", c.Method, c.Knob, p.Value)
				if p.Refined {
					label += " (refining)"
				}
				out, ok := outs[label]
				if !ok {
					t.Fatalf("causal=%v: no run labelled %q (runs: %v)", causal, label, keys(outs))
				}
				if want := relL1(ref64, out); math.Abs(p.RelL1-want) > 1e-7 {
					t.Errorf("causal=%v %s: rel L1 %v, float64 reference gives %v", causal, label, p.RelL1, want)
				}
				if s := 1 - (p.QKBlocks+p.PVBlocks)/(2*p.DenseBlocks); math.Abs(s-p.Sparsity) > 1e-12 || p.Method != c.Method {
					t.Errorf("causal=%v %s: sparsity %v, counters give %v; method %q", causal, label, p.Sparsity, s, p.Method)
				}
				if c.Method == OracleName && p.Value == 1 && (p.Sparsity != 0 || p.RelL1 > 1e-5) {
					t.Errorf("causal=%v: oracle at CDF 1 skips %v with rel L1 %v; want 0 and float32 rounding", causal, p.Sparsity, p.RelL1)
				}
				if c.Method == OracleName && p.Match != InRange {
					t.Errorf("causal=%v %s: an oracle point outside the oracle's range (%v)", causal, label, p.Match)
				}
				if c.Method == OracleName && p.RelL1 > 0 && math.Abs(p.OracleRatio-1) > 1e-9 {
					t.Errorf("causal=%v %s: ×oracle %v on the oracle's own curve, want 1", causal, label, p.OracleRatio)
				}
			}
			want, m := curveOf(c).SparsityAt(0.05)
			if m != c.TargetMatch || !closeOrBothNaN(c.SparsityAtTarget, want) {
				t.Errorf("causal=%v %s: sparsity at target %v %s, its points read %v %s", causal, c.Method, c.SparsityAtTarget, c.TargetMatch, want, m)
			}
		}
		oc := curves[0].Points
		for i := 1; i < len(oc); i++ {
			if oc[i].Sparsity < oc[i-1].Sparsity {
				t.Errorf("causal=%v: oracle points not sorted by sparsity", causal)
			}
		}
	}
}

func keys(m map[string]*tensor.Tensor) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// relL1 is Σ|O−O'|/Σ|O| with O the float64 reference, summed directly.
func relL1(ref *reference.Output, got *tensor.Tensor) float64 {
	s := ref.Shape()
	row := make([]float32, s.D)
	var num, den float64
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				got.ReadRow(b, h, n, row)
				for d, want := range ref.Row(b, h, n) {
					num += math.Abs(want - float64(row[d]))
					den += math.Abs(want)
				}
			}
		}
	}
	return num / den
}

// TestMeasure: a run with no reference is the reference (zero error,
// speedup 1); the needle function sees the output; a runner error or a
// missing result is an error.
func TestMeasure(t *testing.T) {
	ctx := context.Background()
	r := testutil.Rand(t)
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 40, D: 16}, 1)
	run := func(ctx context.Context, _ string, o sparseattn.Options) (Timing, error) {
		return Time(ctx, q, q, q, o, 1, 2, nil)
	}
	calls := 0
	p := Problem{Q: q, K: q, V: q, Needle: func(out *tensor.Tensor) (float64, error) { calls++; return 0.5, nil }}
	m, res, err := Measure(ctx, run, p, sparseattn.Options{}, "dense", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.RelL1 != 0 || math.Abs(m.Cosine-1) > 1e-12 || m.Speedup != 1 || m.Sparsity != 0 || m.NeedleRecall != 0.5 || calls != 1 || res == nil || m.Method != "dense" {
		t.Errorf("dense measured against itself: %+v", m)
	}
	p.Needle = nil
	if m, _, err := Measure(ctx, run, p, sparseattn.Options{}, "dense", nil); err != nil || !math.IsNaN(m.NeedleRecall) {
		t.Errorf("no needle: recall %v, %v; want NaN", m.NeedleRecall, err)
	}
	boom := errors.New("boom")
	for _, bad := range []Runner{
		func(context.Context, string, sparseattn.Options) (Timing, error) { return Timing{}, boom },
		func(context.Context, string, sparseattn.Options) (Timing, error) { return Timing{}, nil },
	} {
		if _, _, err := Measure(ctx, bad, p, sparseattn.Options{}, "x", nil); err == nil {
			t.Error("a failing runner measured")
		}
	}
	if _, err := Time(ctx, q, q, q, sparseattn.Options{}, 0, 0, nil); !errors.Is(err, sparseattn.ErrOptions) {
		t.Errorf("no timed runs: %v, want ErrOptions", err)
	}
}

// TestSweeperErrors: a Sweeper without a runner or reference, or a sweep
// whose planners do not match its values, fails with ErrSweep before
// running anything.
func TestSweeperErrors(t *testing.T) {
	ran := false
	run := func(context.Context, string, sparseattn.Options) (Timing, error) { ran = true; return Timing{}, nil }
	ref := &Reference{}
	for _, tc := range []struct {
		name string
		s    Sweeper
		sw   []Sweep
	}{
		{"no runner", Sweeper{Reference: ref}, nil},
		{"no reference", Sweeper{Run: run}, nil},
		{"planners short of values", Sweeper{Run: run, Reference: ref}, []Sweep{{Method: "m", Knob: "k", Values: []float64{1, 2}, Planners: []plan.Planner{plan.DensePlanner{}}}}},
		{"no planner", Sweeper{Run: run, Reference: ref}, []Sweep{{Method: "m"}}},
	} {
		if _, err := tc.s.Sweep(context.Background(), tc.sw); !errors.Is(err, ErrSweep) || ran {
			t.Errorf("%s: %v (ran %v), want ErrSweep before any run", tc.name, err, ran)
		}
	}
}

// TestMatchOracleByHand checks the ratio on a curve small enough to do by
// hand: the oracle's error goes from 1e-3 at sparsity 0.2 to 1e-1 at 0.6,
// so log-linear interpolation gives 1e-2 at 0.4.
func TestMatchOracleByHand(t *testing.T) {
	pt := func(s, e float64) Point { return Point{Measurement: Measurement{Sparsity: s, RelL1: e}} }
	curves := []Curve{
		{Method: OracleName, Points: []Point{pt(0.6, 1e-1), pt(0.2, 1e-3)}}, // unsorted on purpose
		{Method: "m", Points: []Point{pt(0.1, 1e-3), pt(0.4, 3e-2), pt(0.6, 0.2), pt(0.7, 0.5)}},
	}
	MatchOracle(curves)
	m := curves[1]
	for i, want := range []struct {
		match         Range
		oracle, ratio float64 // NaN: none
	}{
		{BelowRange, math.NaN(), math.NaN()},
		{InRange, logLinear(0.2, 1e-3, 0.6, 1e-1, 0.4), 3e-2 / logLinear(0.2, 1e-3, 0.6, 1e-1, 0.4)},
		{InRange, 1e-1, 2},
		{AboveRange, math.NaN(), math.NaN()},
	} {
		p := m.Points[i]
		if p.Match != want.match || !closeOrBothNaN(p.OracleRelL1, want.oracle) || !closeOrBothNaN(p.OracleRatio, want.ratio) {
			t.Errorf("point %d: match %s oracle %v ratio %v; want %s %v %v", i, p.Match, p.OracleRelL1, p.OracleRatio, want.match, want.oracle, want.ratio)
		}
	}
	if m.Matched != 2 || math.Abs(m.RatioGeoMean-math.Sqrt(6)) > 1e-9 {
		t.Errorf("geomean %v over %d points, want √6 over 2", m.RatioGeoMean, m.Matched)
	}
	// Without an oracle curve nothing is matched.
	alone := []Curve{{Method: "m", Points: []Point{pt(0.4, 0.1)}}}
	MatchOracle(alone)
	if p := alone[0].Points[0]; p.Match != NoCurve || !math.IsNaN(p.OracleRatio) || !math.IsNaN(alone[0].RatioGeoMean) {
		t.Errorf("no oracle: %+v", alone[0])
	}
}

// TestRefineOracle bisects a synthetic oracle whose sparsity rises
// steeply as its knob leaves 1, as TopCdf's does: with enough points
// every gap holding another method's point ends narrower than MinGap, each
// new knob value is shortBetween two neighbouring points, and with n = 0
// nothing runs.
func TestRefineOracle(t *testing.T) {
	r := testutil.Rand(t)
	sparsity := func(x float64) float64 { return math.Pow(1-x, 0.25) }
	mk := func(x float64, refined bool) Point {
		// Error 1e-4 at 0.999 and 1e-2 at 0.99: two decades, the widest span.
		e := 1 - x
		if x > 0.995 {
			e /= 10
		}
		return Point{Measurement: Measurement{Method: OracleName, Sparsity: sparsity(x), RelL1: e}, Value: x, Refined: refined}
	}
	for _, n := range []int{0, 1, 3, 64} {
		oc := Curve{Method: OracleName, Knob: "cdf"}
		for _, x := range []float64{0.999, 0.99, 0.9, 0.5} {
			oc.Points = append(oc.Points, mk(x, false))
		}
		other := Curve{Method: "m"}
		// One point in the first gap, the others anywhere in range.
		other.Points = append(other.Points, Point{Measurement: Measurement{Sparsity: (sparsity(0.999) + sparsity(0.99)) / 2}})
		for range 5 {
			other.Points = append(other.Points, Point{Measurement: Measurement{Sparsity: sparsity(0.999) + r.Float64()*(sparsity(0.5)-sparsity(0.999))}})
		}
		curves := []Curve{oc, other}
		runs := 0
		err := RefineOracle(n, MinGap, curves, func(x float64) (Point, error) {
			runs++
			pts := curves[0].Points // sorted by sparsity before each run
			if !slices.ContainsFunc(pts[1:], func(p Point) bool {
				i := slices.IndexFunc(pts, func(q Point) bool { return q.Value == p.Value })
				m, ok := shortBetween(pts[i-1].Value, p.Value)
				return ok && x == m
			}) {
				t.Errorf("n=%d: ran cdf %v, not shortBetween two neighbouring points", n, x)
			}
			return mk(x, true), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pts := curves[0].Points
		if runs > n || len(pts) != 4+runs {
			t.Fatalf("n=%d: %d runs, %d points", n, runs, len(pts))
		}
		for i := 1; i < len(pts); i++ {
			lo, hi := pts[i-1], pts[i]
			if hi.Sparsity < lo.Sparsity {
				t.Fatalf("n=%d: points not sorted by sparsity", n)
			}
			if n == 64 && hi.Sparsity-lo.Sparsity > MinGap {
				for _, p := range other.Points {
					if p.Sparsity > lo.Sparsity && p.Sparsity < hi.Sparsity {
						t.Errorf("n=%d: point at %v left in gap %v..%v", n, p.Sparsity, lo.Sparsity, hi.Sparsity)
					}
				}
			}
		}
		if n == 1 && (runs != 1 || !slices.ContainsFunc(pts, func(p Point) bool { return p.Refined && p.Value == 0.994 })) {
			t.Errorf("n=1: the first split is not between 0.999 and 0.99 (two decades apart): %d runs", runs)
		}
		if n == 3 && runs != 3 {
			t.Errorf("n=3: %d runs; the gaps are wide enough for all three", runs)
		}
	}
	// An oracle curve without a knob is not refined.
	if err := RefineOracle(5, MinGap, []Curve{{Method: OracleName, Points: []Point{mk(0.999, false), mk(0.5, false)}}, {Method: "m", Points: []Point{{Measurement: Measurement{Sparsity: 0.5}}}}},
		func(float64) (Point, error) { t.Error("refined a curve without a knob"); return Point{}, nil }); err != nil {
		t.Fatal(err)
	}
}

// TestShortBetween checks on fresh random pairs that the result lies
// strictly between them, within half a unit of its last decimal of the
// midpoint, and that no number with fewer decimals does both.
func TestShortBetween(t *testing.T) {
	for _, tc := range []struct{ a, b, want float64 }{
		{0.999, 0.99, 0.994} /* 0.9945 is stored as 0.99449999... */, {0.8, 0.6, 0.7}, {0.9, 0.8, 0.85}, {1, 3, 2}, {4096, 2048, 3072},
	} {
		if got, ok := shortBetween(tc.a, tc.b); !ok || got != tc.want {
			t.Errorf("shortBetween(%v, %v) = %v, %v; want %v", tc.a, tc.b, got, ok, tc.want)
		}
	}
	if _, ok := shortBetween(1, math.Nextafter(1, 2)); ok {
		t.Error("found a float64 between adjacent floats")
	}
	r := testutil.Rand(t)
	for range 1000 {
		a := r.Float64()
		b := a + math.Pow(10, -1-8*r.Float64())
		m, ok := shortBetween(b, a)
		if !ok || !(m > a && m < b) {
			t.Fatalf("shortBetween(%v, %v) = %v, %v: not strictly between", b, a, m, ok)
		}
		// Its decimals d: the fewest with 10^d·m an integer (to rounding).
		d := 0
		for ; d < 17 && math.Abs(m*math.Pow(10, float64(d))-math.Round(m*math.Pow(10, float64(d)))) > 1e-6; d++ {
		}
		if d > 0 {
			p := math.Pow(10, float64(d-1))
			if c := math.Round((a+(b-a)/2)*p) / p; c > a && c < b {
				t.Fatalf("shortBetween(%v, %v) = %v, but %v has fewer decimals", b, a, m, c)
			}
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := slices.Clone(c.xs)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median reordered its input: %v, was %v", c.xs, in)
		}
	}
}
