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

// compare's PNG and table; the arithmetic of its curves is package
// evaluate's.

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

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
