package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/tensor"
)

// tuneAutoArgs are the tune flags that "tune --method auto" reads.
type tuneAutoArgs struct {
	fs             *flag.FlagSet
	in             inputFlags
	budget         float64
	calib          int
	layer, out     string
	blockQ, blockK int
	workers        int
	asJSON         bool
}

// tuneAutoReport is what "tune --method auto" prints.
type tuneAutoReport struct {
	Layer    string          `json:"layer"`
	Source   string          `json:"source"`
	Geometry tensor.Geometry `json:"geometry"`
	Causal   bool            `json:"causal"`
	Budget   float64         `json:"budget"`
	Inputs   int             `json:"calibration_inputs"`
	Seconds  float64         `json:"seconds"`
	Evals    int             `json:"single_head_runs"`
	Heads    []auto.Head     `json:"heads"`
	Mean     float64         `json:"mean_sparsity"`
}

// runTuneAuto tunes auto's per-head method and knob on the calibration
// inputs and writes (or updates, by layer name) an auto profile.
func runTuneAuto(ctx context.Context, a tuneAutoArgs, stdout, stderr io.Writer) error {
	n := a.calib
	set := map[string]bool{}
	a.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if a.in.input != "" {
		n = len(strings.Split(a.in.input, ","))
	} else if a.in.kind == lmKind && !set["calib"] {
		n = 1 // the lm workload reads one text: more seeds add nothing
	}
	var inputs []auto.Input
	var first *problem
	for i := range n {
		c := a.in
		if a.in.input != "" {
			c.input = strings.Split(a.in.input, ",")[i]
		} else {
			c.seed = a.in.seed + uint64(i)
		}
		p, err := c.load(ctx, a.fs)
		if err != nil {
			return err
		}
		if first == nil {
			first = p
		}
		inputs = append(inputs, auto.Input{Q: p.q, K: p.k, V: p.v})
	}
	g, err := tensor.Validate(first.q, first.k, first.v)
	if err != nil {
		return err
	}
	cfg := auto.Config{Budget: a.budget, Causal: first.Causal, BlockQ: a.blockQ, BlockK: a.blockK, Workers: a.workers}
	prof, err := auto.NewProfile(cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if a.out != "" {
		switch p, err := auto.LoadFile(a.out); {
		case err == nil:
			if p.BlockQ != prof.BlockQ || p.BlockK != prof.BlockK || p.Budget != prof.Budget || p.Causal != prof.Causal {
				return fmt.Errorf("%w: %s was tuned with blocks %d×%d, causal=%v, budget %v; use the same or another --out",
					errUsage, a.out, p.BlockQ, p.BlockK, p.Causal, p.Budget)
			}
			prof = p
		case errors.Is(err, os.ErrNotExist):
		default:
			return err
		}
	}
	bar := progress.New(stderr, g.Hq)
	defer bar.Finish()
	bar.Label(fmt.Sprintf("auto: tuning %d heads on %d inputs", g.Hq, len(inputs)))
	evals := 0
	cfg.Progress = func(done, heads, e int) {
		evals = e
		bar.Step(fmt.Sprintf("head %d/%d done", done, heads))
	}
	start := time.Now()
	layer, err := auto.Tune(ctx, cfg, a.layer, inputs)
	if err != nil {
		return err
	}
	bar.Finish()
	prof.Set(*layer)
	if a.out != "" {
		if err := auto.SaveFile(a.out, prof); err != nil {
			return err
		}
	}
	r := tuneAutoReport{Layer: a.layer, Source: first.Source, Geometry: g, Causal: cfg.Causal, Budget: a.budget,
		Inputs: len(inputs), Seconds: time.Since(start).Seconds(), Evals: evals, Heads: layer.Heads}
	for _, h := range layer.Heads {
		r.Mean += h.Sparsity / float64(len(layer.Heads))
	}
	if a.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(stdout, "auto profile, layer %q: %s\nB=%d Hq=%d Hkv=%d N=%d D=%d causal=%v, budget rel L1 ≤ %v on each of %d inputs; %d single-head runs in %.1f s\n\n",
		r.Layer, r.Source, g.B, g.Hq, g.Hkv, g.Nq, g.D, r.Causal, r.Budget, r.Inputs, r.Evals, r.Seconds)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "head\tmethod\tknob\trel L1\tsparsity\t")
	for h, hd := range layer.Heads {
		fmt.Fprintf(w, "%d\t%s\t%g\t%.4f\t%.3f\t\n", h, hd.Method, hd.Knob, hd.L1, hd.Sparsity)
	}
	w.Flush()
	fmt.Fprintf(stdout, "\nmean sparsity %.3f", r.Mean)
	if a.out != "" {
		fmt.Fprintf(stdout, "; written to %s (run it: eval/compare --auto-profile %s)", a.out, a.out)
	}
	fmt.Fprintln(stdout)
	return nil
}
