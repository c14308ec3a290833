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
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// tuneAutoArgs are the tune flags that "tune --method auto" reads.
type tuneAutoArgs struct {
	fs             *flag.FlagSet
	in             inputFlags
	budget         float64
	margin         float64 // used when --margin is set, else auto.DefaultMargin
	headCap        float64
	calib          int
	layer, out     string
	blockQ, blockK int
	workers        int
	asJSON         bool
	// exec runs the tuner's single-head passes (nil: the CPU executor);
	// gpu is the same executor when it is the GPU session, for its
	// device time.
	exec plan.Executor
	gpu  *gpuSession
}

// tuneAutoReport is what "tune --method auto" prints.
type tuneAutoReport struct {
	Layer    string          `json:"layer"`
	Source   string          `json:"source"`
	Geometry tensor.Geometry `json:"geometry"`
	Causal   bool            `json:"causal"`
	Budget   float64         `json:"budget"`
	Margin   float64         `json:"margin"`
	HeadCap  float64         `json:"head_cap"`
	L1       float64         `json:"layer_l1"`
	Inputs   int             `json:"calibration_inputs"`
	Seconds  float64         `json:"seconds"`
	Evals    int             `json:"single_head_runs"`
	Heads    []auto.Head     `json:"heads"`
	Mean     float64         `json:"mean_sparsity"`
	Device   string          `json:"device,omitempty"`    // "cuda" when the passes ran on the GPU
	DeviceMS float64         `json:"device_ms,omitempty"` // device-event time of the GPU passes
}

// runTuneAuto tunes auto's per-head method and knob on the calibration
// inputs and writes (or updates, by layer name) an auto profile.
func runTuneAuto(ctx context.Context, a tuneAutoArgs, stdout, stderr io.Writer) error {
	n := a.calib
	set := map[string]bool{}
	a.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if a.in.input != "" {
		n = len(strings.Split(a.in.input, ","))
	} else if a.in.kind == lmKind {
		if err := checkLMWindows(a.in, n); err != nil {
			return err
		}
	}
	var inputs []auto.Input
	var first *problem
	for i := range n {
		c := a.in
		switch {
		case a.in.input != "":
			c.input = strings.Split(a.in.input, ",")[i]
		case a.in.kind == lmKind:
			c.lmOffset = i * a.in.n // input i: the text's i-th window of --n bytes
		default:
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
	margin := auto.DefaultMargin
	if set["margin"] {
		margin = a.margin
	}
	// sparge's tuner defaults to the paper's 128×64 blocks; auto's
	// profiles run at eval's tiling, so they are tuned at it.
	if !set["block-q"] {
		a.blockQ = auto.DefaultBlockQ
	}
	if !set["block-k"] {
		a.blockK = auto.DefaultBlockK
	}
	cfg := auto.Config{Budget: a.budget, Margin: margin, HeadCap: a.headCap, Causal: first.Causal, BlockQ: a.blockQ, BlockK: a.blockK, Workers: a.workers, Executor: a.exec}
	prof, err := auto.NewProfile(cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if a.out != "" {
		switch p, err := auto.LoadFile(a.out); {
		case err == nil:
			if p.BlockQ != prof.BlockQ || p.BlockK != prof.BlockK || p.Budget != prof.Budget || p.Causal != prof.Causal ||
				p.Margin != prof.Margin || p.HeadCap != prof.HeadCap {
				return fmt.Errorf("%w: %s was tuned with blocks %d×%d, causal=%v, budget %v, margin %v, head cap %v; use the same or another --out",
					errUsage, a.out, p.BlockQ, p.BlockK, p.Causal, p.Budget, p.Margin, p.HeadCap)
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
		Margin: prof.Margin, HeadCap: prof.HeadCap, L1: layer.L1, Mean: layer.Sparsity,
		Inputs: len(inputs), Seconds: time.Since(start).Seconds(), Evals: evals, Heads: layer.Heads}
	if a.gpu != nil {
		r.Device, r.DeviceMS = "cuda", a.gpu.deviceMS
	}
	if a.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(stdout, "auto profile, layer %q: %s\nB=%d Hq=%d Hkv=%d N=%d D=%d causal=%v, layer rel L1 ≤ %.3g·(1−%.3g) and each head's ≤ %.3g on each of %d inputs; %d single-head runs in %.1f s\n\n",
		r.Layer, r.Source, g.B, g.Hq, g.Hkv, g.Nq, g.D, r.Causal, r.Budget, r.Margin, r.HeadCap, r.Inputs, r.Evals, r.Seconds)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "head\tmethod\tknob\trel L1\tsparsity\t")
	for h, hd := range layer.Heads {
		fmt.Fprintf(w, "%d\t%s\t%g\t%.4f\t%.3f\t\n", h, hd.Method, hd.Knob, hd.L1, hd.Sparsity)
	}
	w.Flush()
	fmt.Fprintf(stdout, "\nmean sparsity %.3f, layer rel L1 %.4f", r.Mean, r.L1)
	if r.Device != "" {
		fmt.Fprintf(stdout, "; passes on the GPU, %.1f ms of device time", r.DeviceMS)
	}
	if a.out != "" {
		fmt.Fprintf(stdout, "; written to %s (run it: eval/compare --auto-profile %s)", a.out, a.out)
	}
	fmt.Fprintln(stdout)
	return nil
}
