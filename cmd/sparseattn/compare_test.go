package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/tensorfile"
)

// tiny is a workload small enough that a full sweep takes well under a second.
var tiny = []string{"--workload", "llm", "--n", "256", "--heads", "2", "--kv-heads", "1", "--d", "32", "--block-q", "32", "--block-k", "32"}

func countRefined(c sweepCurve) int {
	n := 0
	for _, p := range c.Points {
		if p.Refined {
			n++
		}
	}
	return n
}

func decodeCompare(t *testing.T, s string) compareReport {
	t.Helper()
	var r compareReport
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	return r
}

// TestCompareJSON sweeps every catalog method with a knob on a tiny
// workload: one curve per method, oracle first, one point per knob value,
// sparsity consistent with the counters, and, for the methods whose knob
// orders their plans (window's width, the oracle's threshold), sparsity
// non-decreasing along the knob. (Window's default widths are for long
// inputs: on 256 tokens only the last skips anything.)
func TestCompareJSON(t *testing.T) {
	var names []string
	knobs := map[string]*knob{}
	for _, m := range methodCatalog() {
		if m.name != "dense" {
			names = append(names, m.name)
			knobs[m.name] = m.knob
		}
	}
	args := append([]string{"compare", "--json", "--methods", strings.Join(names, ",")}, tiny...)
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeCompare(t, out)
	if r.Geometry.Nq != 256 || !r.Causal || r.BlockQ != 32 || r.DenseMS <= 0 || r.Interpolation == "" || r.Timed || r.TargetRelL1 != 0.05 {
		t.Errorf("header %+v", r)
	}
	var got []string
	for _, c := range r.Curves {
		got = append(got, c.Method)
	}
	if want := append([]string{"oracle"}, slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == "oracle" })...); !slices.Equal(got, want) {
		t.Fatalf("curves %v, want %v (oracle first, one per method)", got, want)
	}
	for _, c := range r.Curves {
		k := knobs[c.Method]
		wantPoints := 1
		if k != nil {
			wantPoints = len(k.values)
			if c.Knob != k.name {
				t.Errorf("%s: knob %q, want %q", c.Method, c.Knob, k.name)
			}
		}
		var values []float64
		for _, p := range c.Points {
			if !p.Refined && p.Value != nil {
				values = append(values, *p.Value)
			}
		}
		if len(c.Points)-countRefined(c) != wantPoints || (k != nil && !slices.Equal(values, k.values)) {
			t.Fatalf("%s: knob values %v (and %d refined), want %d points %v", c.Method, values, countRefined(c), wantPoints, k.values)
		}
		if !slices.Contains([]string{"crossed", "at_least", "none"}, c.TargetMatch) || (c.TargetMatch == "none") != math.IsNaN(float64(c.SparsityAtTarget)) {
			t.Errorf("%s: sparsity at target %v (%s)", c.Method, c.SparsityAtTarget, c.TargetMatch)
		}
		if c.Method != "oracle" && countRefined(c) > 0 {
			t.Errorf("%s: refined points outside the oracle", c.Method)
		}
		for i, p := range c.Points {
			if s := 1 - (p.QKBlocks+p.PVBlocks)/(2*p.DenseBlocks); math.Abs(s-p.Sparsity) > 1e-12 {
				t.Errorf("%s point %d: sparsity %v, counters give %v", c.Method, i, p.Sparsity, s)
			}
			if !(p.RelL1 >= 0) || p.Method != c.Method {
				t.Errorf("%s point %d: %+v", c.Method, i, p)
			}
			if !slices.Contains([]string{"in_range", "below_range", "above_range"}, p.Match) {
				t.Errorf("%s point %d: oracle_match %q", c.Method, i, p.Match)
			}
			// The oracle's own points lie on its curve: ratio 1 wherever
			// its error is positive.
			if c.Method == "oracle" && (p.Match != "in_range" || p.RelL1 > 0 && math.Abs(float64(p.OracleRatio)-1) > 1e-9) {
				t.Errorf("oracle point %d: %+v, want ratio 1 in range", i, p)
			}
		}
		switch c.Method {
		case "window": // in knob order: widest first
			for i := 1; i < len(c.Points); i++ {
				if c.Points[i].Sparsity < c.Points[i-1].Sparsity {
					t.Errorf("%s: sparsity %v at %s=%v falls below %v at %v", c.Method, c.Points[i].Sparsity, c.Knob, *c.Points[i].Value, c.Points[i-1].Sparsity, *c.Points[i-1].Value)
				}
			}
		case "oracle": // sorted by sparsity: the threshold must fall
			for i := 1; i < len(c.Points); i++ {
				if c.Points[i].Sparsity < c.Points[i-1].Sparsity || *c.Points[i].Value > *c.Points[i-1].Value {
					t.Errorf("oracle: point %d (cdf %v, sparsity %v) after (cdf %v, sparsity %v)", i, *c.Points[i].Value, c.Points[i].Sparsity, *c.Points[i-1].Value, c.Points[i-1].Sparsity)
				}
			}
		}
		if last := c.Points[len(c.Points)-1]; c.Method == "oracle" && last.Sparsity < 0.2 {
			t.Errorf("oracle: sparsest setting reaches only %v", last.Sparsity)
		}
	}
}

// TestCompareSweepTablePNG overrides the sweeps and checks the table (with
// times, as --repeat was given) and the PNG: decodable, of the requested size.
func TestCompareSweepTablePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "curves.png")
	args := append([]string{"compare", "--methods", "window", "--sweep", "oracle=0.99,0.9,0.5", "--sweep", "window=128,64",
		"--png", path, "--png-size", "640x400", "--repeat", "1", "--oracle-refine", "0"}, tiny...)
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"llm:", "dense is the reference", "medians of 1 runs", "speedup", "×oracle", "sparsity at L1 0.05", "cdf=0.5", "size=64", "geometric mean", "wrote " + path} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "cdf="); n != 3 {
		t.Errorf("%d oracle rows, want 3:\n%s", n, out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 400 {
		t.Errorf("PNG %v, want 640x400", b)
	}
}

func TestCompareCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{"compare"}, tiny...), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "context canceled") {
		t.Errorf("exit %d, %q; want 1 and context canceled", code, errb.String())
	}
}

// TestVizPNG draws the default methods for one head of a tiny GQA workload.
func TestVizPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "viz.png")
	args := append([]string{"viz", "--png", path, "--head-index", "1", "--panel-size", "64", "--methods", "window,oracle"}, tiny...)
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "wrote "+path) || !strings.Contains(out, "2 plan(s)") {
		t.Errorf("stdout %q", out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 3*64 || b.Dy() < 64 {
		t.Errorf("PNG %v too small for three 64-px panels", b)
	}
}

// TestPlanPanelLevels builds a plan with every kind of cell and checks
// the colours of head 1's level map.
func TestPlanPanelLevels(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 12, Nk: 12, D: 8, Dv: 8}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 4, BlockK: 4}
	b, err := plan.NewBuilder(tl)
	if err != nil {
		t.Fatal(err)
	}
	// Head 0 keeps everything; head 1: row 1 full (0), row 2 pooled ×2
	// (0) and full (2); block (1,1) and (2,1) skipped.
	for qb := range 3 {
		for kb := 0; kb <= qb; kb++ {
			b.Add(qb, kb, plan.Full)
		}
	}
	b.Add(3, 0, plan.Full)
	b.Add(4, 0, plan.Full)
	b.Add(5, 0, 2)
	b.Add(5, 2, plan.Full)
	p, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	panel := planPanel("t", p, 0, 1)
	want := [][]color.RGBA{
		{colorFull, colorInvisible, colorInvisible},
		{colorFull, colorSkip, colorInvisible},
		{levelColor(2), colorSkip, colorFull},
	}
	for i := range want {
		if !slices.Equal(panel.Cells[i], want[i]) {
			t.Errorf("row %d: %v, want %v", i, panel.Cells[i], want[i])
		}
	}
	var labels []string
	for _, k := range panel.Keys {
		labels = append(labels, k.Label)
	}
	if !slices.Equal(labels, []string{"skip", "full", "pooled x2", "not visible"}) {
		t.Errorf("keys %v", labels)
	}
}

// TestOrderedPanel: a plan whose queries and keys are visited in permuted
// orders is drawn in original positions. Queries reversed, keys reversed
// within each block: row 0 (query tokens 7..4, original block 1) visiting
// ordered block 0 (key tokens 3..0, original block 0) fills cell (1, 0).
func TestOrderedPanel(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 8, Nk: 8, D: 8, Dv: 8}
	for _, causal := range []bool{false, true} {
		t.Run(fmt.Sprint("causal=", causal), func(t *testing.T) {
			tl := plan.Tiling{Geometry: g, Causal: causal, BlockQ: 4, BlockK: 4}
			b, err := plan.NewBuilder(tl)
			if err != nil {
				t.Fatal(err)
			}
			b.SetOrder(&plan.TokenOrder{
				Query: []int32{7, 6, 5, 4, 3, 2, 1, 0},
				KV:    []int32{3, 2, 1, 0, 7, 6, 5, 4}, KVStart: []int{0, 8},
				RowKV: []int32{0, -1},
			})
			b.Add(0, 0, plan.Full)
			p, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			panel := orderedPanel("t", p, 0, 0, [][]color.RGBA{make([]color.RGBA, 2), make([]color.RGBA, 2)})
			full, none := panel.Scale.Color(1), panel.Scale.Color(0)
			want := [][]color.RGBA{{none, none}, {full, none}}
			if causal {
				want[0][1] = colorInvisible
			}
			for i := range want {
				if !slices.Equal(panel.Cells[i], want[i]) {
					t.Errorf("row %d: %v, want %v", i, panel.Cells[i], want[i])
				}
			}
		})
	}
}

func TestCompareVizUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"compare", "--sweep", "oracle"}, "method=v1,v2"},
		{[]string{"compare", "--sweep", "oracle=0.9,x"}, `"x" is not a finite number`},
		{[]string{"compare", "--sweep", "oracle=0.9", "--sweep", "oracle=0.8"}, "swept twice"},
		{[]string{"compare", "--methods", "window", "--sweep", "magic=1"}, "magic is not among the swept methods"},
		{[]string{"compare", "--methods", "dense"}, "names only dense"},
		{[]string{"compare", "--sweep", "oracle=2"}, "--oracle-cdf"},
		{[]string{"compare", "--png-size", "10x10"}, "--png-size"},
		{[]string{"compare", "--png", filepath.Join(dir, "no", "c.png")}, "does not exist"},
		{[]string{"compare", "--repeat", "0"}, "--repeat"},
		{[]string{"compare", "--oracle-refine", "-1"}, "--oracle-refine -1 must be in 0..64"},
		{[]string{"compare", "--sim"}, "--sim applies to eval"},
		{[]string{"compare", "--target-l1", "0"}, "--target-l1 0 must be in (0, 10]"},
		{[]string{"compare", "--order", "hilbert", "--workload", "llm", "--n", "64", "--heads", "1", "--kv-heads", "1"}, "needs a token grid"},
		{[]string{"compare", "--methods", "magic"}, "unknown method"},
		{[]string{"viz", "--head-index", "9", "--workload", "llm", "--n", "64", "--png", filepath.Join(dir, "v.png")}, "--head-index 9"},
		{[]string{"viz", "--decades", "0"}, "--decades"},
		{[]string{"viz", "--panel-size", "5"}, "--panel-size"},
		{[]string{"viz", "--repeat", "2"}, "flag provided but not defined"},
		{[]string{"viz", "--png", filepath.Join(dir, "no", "v.png")}, "does not exist"},
	} {
		code, out, errs := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(out+errs, tc.msg) {
			t.Errorf("%v: exit %d, output %q; want exit 2 mentioning %q", tc.args, code, out+errs, tc.msg)
		}
	}
}

func TestCompareVizHelp(t *testing.T) {
	for _, cmd := range []string{"compare", "viz"} {
		code, out, errs := runCLI(t, cmd, "--help")
		if code != 0 || !strings.Contains(out+errs, "Usage: sparseattn "+cmd) || !strings.Contains(out+errs, "-png") {
			t.Errorf("%s --help: exit %d, %q", cmd, code, out+errs)
		}
	}
	if code, out, _ := runCLI(t, "--help"); code != 0 || !strings.Contains(out, "compare") || !strings.Contains(out, "viz") {
		t.Errorf("--help lacks compare and viz: %q", out)
	}
}

// TestCompareUntimedTable: without --repeat or --warmup the table leaves
// out the times of its single cold runs and says how to get them.
func TestCompareUntimedTable(t *testing.T) {
	code, out, errs := runCLI(t, append([]string{"compare", "--methods", "oracle", "--sweep", "oracle=0.9"}, tiny...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "speedup") || !strings.Contains(out, "--warmup 1 --repeat 3") {
		t.Errorf("untimed table:\n%s", out)
	}
}

// TestMassPanelScale: the colour scale spans the visible masses, capped at
// the given decades below the largest; invisible blocks are grey.
func TestMassPanelScale(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 8, Nk: 8, D: 8, Dv: 8}
	dense, err := plan.Dense(plan.Tiling{Geometry: g, Causal: true, BlockQ: 4, BlockK: 4})
	if err != nil {
		t.Fatal(err)
	}
	mass := [][]float64{{1, 0}, {0.99, 1e-2}}
	for _, tc := range []struct{ decades, lo float64 }{{5, 1e-2}, {1, 0.1}} {
		p := massPanel(dense, mass, tc.decades)
		if p.Scale.Hi != 1 || math.Abs(p.Scale.Lo-tc.lo) > 1e-15 {
			t.Errorf("decades %v: scale %v..%v, want %v..1", tc.decades, p.Scale.Lo, p.Scale.Hi, tc.lo)
		}
		if p.Cells[0][1] != colorInvisible || p.Cells[0][0] != p.Scale.Color(1) || p.Cells[1][1] != p.Scale.Color(1e-2) {
			t.Errorf("decades %v: cells %v", tc.decades, p.Cells)
		}
	}
}

// TestBuildSweepsGeneric: compare knows methods only through the catalog's
// method and knob structs. A method without a knob is measured once at its
// flags' setting and cannot be swept; the oracle is added and put first.
func TestBuildSweepsGeneric(t *testing.T) {
	fixed := &method{name: "fixed", planner: func() (plan.Planner, error) { return plan.DensePlanner{}, nil }}
	var built []float64
	knobbed := &method{name: "knobbed", planner: func() (plan.Planner, error) { return plan.DensePlanner{}, nil },
		knob: &knob{name: "k", values: []float64{3, 2, 1}, planner: func(x float64) (plan.Planner, error) {
			built = append(built, x)
			return plan.DensePlanner{}, nil
		}}}
	mf := methodFlags{names: "knobbed,dense,fixed", catalog: []*method{denseMethod(), fixed, oracleMethod(), knobbed}}
	sws, err := buildSweeps(&mf, sweepFlag{"knobbed": {5, 4}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sw := range sws {
		names = append(names, sw.meth.name)
	}
	if !slices.Equal(names, []string{"oracle", "knobbed", "fixed"}) {
		t.Fatalf("sweeps %v, want oracle, knobbed, fixed", names)
	}
	if !slices.Equal(sws[1].values, []float64{5, 4}) || !slices.Equal(built, []float64{5, 4}) || len(sws[1].planners) != 2 {
		t.Errorf("knobbed: values %v, built %v", sws[1].values, built)
	}
	if sws[2].values != nil || len(sws[2].planners) != 1 {
		t.Errorf("fixed: values %v, %d planners; want one point, no knob", sws[2].values, len(sws[2].planners))
	}
	if _, err := buildSweeps(&mf, sweepFlag{"fixed": {1}}); err == nil || !strings.Contains(err.Error(), "fixed has no knob") {
		t.Errorf("sweeping a method without a knob: %v", err)
	}
}

// TestCompareInputFile: compare takes eval's --input flags.
func TestCompareInputFile(t *testing.T) {
	r := testutil.Rand(t)
	path := filepath.Join(t.TempDir(), "qkv.safetensors")
	arrays := map[string]*tensorfile.Array{}
	for name, h := range map[string]int{"q": 2, "k": 1, "v": 1} {
		arrays[name] = tensorfile.FromTensor(testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: h, N: 100, D: 32}, 1))
	}
	if err := tensorfile.Save(path, arrays); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "compare", "--input", path, "--causal", "true", "--methods", "window", "--window-sink", "0", "--sweep", "window=32,16",
		"--block-q", "16", "--block-k", "16", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rep := decodeCompare(t, out)
	if rep.Source != "qkv.safetensors" || rep.Geometry.Nq != 100 || rep.Geometry.Hkv != 1 || !rep.Causal || len(rep.Curves) != 2 {
		t.Errorf("report %+v", rep)
	}
	if w := rep.Curves[1]; w.Method != "window" || len(w.Points) != 2 || !(w.Points[1].Sparsity > w.Points[0].Sparsity) {
		t.Errorf("window curve %+v: want sparsity rising as the window narrows", w)
	}
}

// TestCompareOrderVariant: with --order every swept method runs in that
// token order against float dense in the input order, and says so.
func TestCompareOrderVariant(t *testing.T) {
	code, out, errs := runCLI(t, "compare", "--workload", "video", "--frames", "2", "--height", "8", "--width", "8",
		"--heads", "1", "--kv-heads", "1", "--d", "32", "--block-q", "16", "--block-k", "16",
		"--order", "hilbert", "--methods", "window", "--sweep", "window=32", "--sweep", "oracle=0.9", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeCompare(t, out)
	if r.Order != "hilbert" || r.Int8QK || len(r.Curves) != 2 {
		t.Fatalf("report %+v", r)
	}
	if p := r.Curves[0].Points[0]; !(p.Sparsity > 0) || !(p.RelL1 > 0) {
		t.Errorf("oracle in Hilbert order: %+v", p)
	}
	code, out, errs = runCLI(t, "compare", "--workload", "video", "--frames", "2", "--height", "8", "--width", "8",
		"--heads", "1", "--kv-heads", "1", "--d", "32", "--block-q", "16", "--block-k", "16",
		"--order", "hilbert", "--methods", "oracle", "--sweep", "oracle=0.9")
	if code != 0 || !strings.Contains(out, "every method ran in hilbert token order") {
		t.Errorf("exit %d, table %q, stderr %q", code, out, errs)
	}
}

func TestPlanTitle(t *testing.T) {
	row := evalRow{Sparsity: 0.456, RelL1: 0.0123}
	for _, tc := range []struct {
		p    *plan.Plan
		want string
	}{
		{&plan.Plan{}, "m  sparsity 0.46  L1 1.2e-02"},
		{&plan.Plan{Filter: &plan.Filter{Lambda: -5, RowGroup: 16}}, "m  sparsity 0.46  L1 1.2e-02  +lambda"},
		{&plan.Plan{Stop: &plan.StopRule{Tau: 0.005}}, "m  sparsity 0.46  L1 1.2e-02  +stop"},
	} {
		if got := planTitle("m", row, tc.p); got != tc.want {
			t.Errorf("planTitle = %q, want %q", got, tc.want)
		}
	}
}

// TestOrderedPanelWithInit: S2O's first pass (Plan.Init, natural order)
// counts toward the visited fraction with the main plan's permuted visits.
// Init visits cell (0, 0); the main plan, queries reversed, visits ordered
// key block 1 (natural keys 4..7) for query tokens 7..4: cell (1, 1).
func TestOrderedPanelWithInit(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 8, Nk: 8, D: 8, Dv: 8}
	tl := plan.Tiling{Geometry: g, BlockQ: 4, BlockK: 4}
	ib, err := plan.NewBuilder(tl)
	if err != nil {
		t.Fatal(err)
	}
	ib.Add(0, 0, plan.Full)
	init, err := ib.Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan.NewBuilder(tl)
	if err != nil {
		t.Fatal(err)
	}
	b.SetOrder(&plan.TokenOrder{Query: []int32{7, 6, 5, 4, 3, 2, 1, 0}})
	b.SetInit(init)
	b.Add(0, 1, plan.Full)
	p, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	panel := planPanel("t", p, 0, 0)
	full, none := panel.Scale.Color(1), panel.Scale.Color(0)
	want := [][]color.RGBA{{full, none}, {none, full}}
	for i := range want {
		if !slices.Equal(panel.Cells[i], want[i]) {
			t.Errorf("row %d: %v, want %v", i, panel.Cells[i], want[i])
		}
	}
}
