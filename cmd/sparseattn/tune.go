package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/tune"
)

const tuneSummary = `Tunes SpargeAttn per head for one attention layer (SpargeAttn §3.6): for each
query head, the (τ, θ) with the most sparsity whose rel L1 error stays below
--l1 on every calibration input, then the λ with the most sparsity below --l2.
Writes (or updates, by --layer name) a versioned JSON profile; in Go,
tune.LoadFile(path).Options(layer) gives the sparseattn.Options that run it.

Calibration inputs, one of:
  (nothing) or --workload lm   the real LM workload over the calib text (eval's
                               default reads the other held-out text): input
                               i is the text's i-th window of --n bytes
  --workload ... --calib N     N generated inputs, seeds --seed .. --seed+N-1
  --input a.safetensors,b.npz  one file per input (tensors by --q-name/...)
--holdout M checks the tuned profile on M further seeds (lm: windows) of the
workload.

--method auto tunes the best method and knob per head instead (package
method/auto): the layer's rel L1 (all heads, |O|-weighted) stays within
--budget·(1−--margin) on every calibration input and each head's within
--head-cap, at 64×64 blocks unless --block-q/--block-k are set; run the
profile with eval/compare --auto-profile.`

// tuneHead is one head's line of the report.
type tuneHead struct {
	Index int `json:"head"`
	tune.Head
	HoldoutL1     *float64 `json:"holdout_l1,omitempty"`      // worst over held-out inputs, λ on (bound l2)
	HoldoutMaskL1 *float64 `json:"holdout_mask_l1,omitempty"` // the same with M_g alone (bound l1)
}

type tuneReport struct {
	Layer          string          `json:"layer"`
	Source         string          `json:"source"`
	Geometry       tensor.Geometry `json:"geometry"`
	Causal         bool            `json:"causal"`
	L1             float64         `json:"l1"`
	L2             float64         `json:"l2"`
	Inputs         int             `json:"calibration_inputs"`
	Holdout        int             `json:"holdout_inputs"`
	Seconds        float64         `json:"seconds"`
	Evals          int             `json:"single_head_runs"`
	Device         string          `json:"device"`
	DeviceMS       float64         `json:"device_ms,omitempty"` // device-event time of the GPU passes
	Heads          []tuneHead      `json:"heads"`
	HoldoutMax     *float64        `json:"holdout_layer_l1,omitempty"`
	HoldoutMaskMax *float64        `json:"holdout_layer_mask_l1,omitempty"`
}

func runTune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tune", tuneSummary, stderr)
	var in inputFlags
	in.registerText(fs, "calib") // tune on one held-out text, evaluate on the other
	l1 := fs.Float64("l1", 0.05, "bound on rel L1 with the block mask M_g alone")
	l2 := fs.Float64("l2", 0.06, "bound on rel L1 with the λ filter too (≥ --l1)")
	margin := fs.Float64("margin", 0, "tune against l1·(1−margin) and l2·(1−margin) (auto: budget·(1−margin); unset, auto's default 0.1), headroom for unseen inputs; in [0,1)")
	calib := fs.Int("calib", 3, "generated calibration inputs (seeds --seed, --seed+1, ...)")
	holdout := fs.Int("holdout", 0, "generated held-out inputs checked after tuning (seeds after the calibration ones)")
	layerName := fs.String("layer", "layer0", "layer name in the profile")
	out := fs.String("out", "", "profile file to write; an existing one is updated (same tiling and bounds)")
	blockQ := fs.Int("block-q", sparge.PaperBlockQ, "query block size (--method auto: 64 unless set, eval's default)")
	blockK := fs.Int("block-k", sparge.PaperBlockK, "key block size (--method auto: 64 unless set)")
	rowGroup := fs.Int("row-group", 0, "query rows per λ decision, dividing --block-q (0: block-q/4)")
	sink := fs.Bool("sink", false, "always keep key block 0")
	workers := fs.Int("workers", 0, "CPU goroutines (0 = all CPUs)")
	device := fs.String("device", "cpu", "where the tuner's attention passes run: cpu, cuda (GPU; an error without one) or auto (GPU if usable, else CPU)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	tuneMethod := fs.String("method", "sparge", "what to tune: sparge (τ, θ, λ per head) or auto (the best method and knob per head, at --budget)")
	budget := fs.Float64("budget", 0.05, "--method auto: bound on the layer's rel L1 against dense (all its heads, |O|-weighted) on every calibration input")
	headCap := fs.Float64("head-cap", 0, "--method auto: bound on each head's own rel L1 (0: 3·budget; = budget gives each head the budget on its own)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tuneMethod != "sparge" && *tuneMethod != "auto" {
		return fmt.Errorf("%w: --method must be sparge or auto, not %q", errUsage, *tuneMethod)
	}
	if *device != "cpu" && *device != string(sparseattn.DeviceCUDA) && *device != string(sparseattn.DeviceAuto) {
		return fmt.Errorf("%w: --device must be cpu, cuda or auto, not %q", errUsage, *device)
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	gpu, err := openGPUSession(*device, logf)
	if err != nil {
		return err
	}
	defer gpu.close()
	if *tuneMethod == "auto" {
		a := tuneAutoArgs{fs: fs, in: in, budget: *budget, margin: *margin, headCap: *headCap, calib: *calib, layer: *layerName, out: *out,
			blockQ: *blockQ, blockK: *blockK, workers: *workers, asJSON: *asJSON}
		if gpu != nil {
			a.exec, a.gpu = gpu, gpu
		}
		return runTuneAuto(ctx, a, stdout, stderr)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *calib < 1 || *holdout < 0 || *workers < 0 {
		return fmt.Errorf("%w: --calib must be ≥ 1, --holdout and --workers ≥ 0", errUsage)
	}
	if in.input != "" && (set["calib"] || set["holdout"]) {
		return fmt.Errorf("%w: --calib and --holdout count generated inputs; with --input, list one file per input", errUsage)
	}
	cfg := tune.Config{L1: *l1, L2: *l2, Margin: *margin, BlockQ: *blockQ, BlockK: *blockK, RowGroup: *rowGroup, Sink: *sink, Workers: *workers}
	if gpu != nil {
		// The per-head slices are uploaded once; each pass sends its plan
		// and brings its output back for the CPU to measure.
		cfg.Executor = gpu
	}
	if _, err := tune.NewProfile(cfg); err != nil { // check the bounds before loading anything
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	// Load the inputs: files, or seeds of the generated workload.
	load := func(i int) (*problem, error) {
		c := in
		switch {
		case in.input != "":
			c.input = strings.Split(in.input, ",")[i]
		case in.kind == lmKind:
			c.lmOffset = i * in.n // input i: the text's i-th window of --n bytes
		default:
			c.seed = in.seed + uint64(i)
		}
		return c.load(ctx, fs)
	}
	n, held := *calib, *holdout
	if in.input != "" {
		n = len(strings.Split(in.input, ","))
	}
	if in.kind == lmKind && in.input == "" {
		if err := checkLMWindows(in, n+held); err != nil {
			return err
		}
	}
	var calibration, heldOut []tune.Input
	var first *problem
	for i := range n + held {
		p, err := load(i)
		if err != nil {
			return err
		}
		if first == nil {
			first = p
		}
		x := tune.Input{Q: p.q, K: p.k, V: p.v}
		if i < n {
			calibration = append(calibration, x)
		} else {
			heldOut = append(heldOut, x)
		}
	}
	cfg.Causal = first.Causal
	g, err := tensor.Validate(first.q, first.k, first.v)
	if err != nil {
		return err
	}

	var prof *tune.Profile
	if *out != "" {
		switch p, err := tune.LoadFile(*out); {
		case err == nil:
			if p.BlockQ != cfg.BlockQ || p.BlockK != cfg.BlockK || p.L1 != cfg.L1 || p.L2 != cfg.L2 || p.Margin != cfg.Margin || p.Causal != cfg.Causal || p.RowGroup != cfg.RowGroup {
				return fmt.Errorf("%w: %s was tuned with blocks %d×%d, row group %d, causal=%v, l1=%v, l2=%v, margin=%v; use the same or another --out",
					errUsage, *out, p.BlockQ, p.BlockK, p.RowGroup, p.Causal, p.L1, p.L2, p.Margin)
			}
			prof = p
		case errors.Is(err, os.ErrNotExist):
		default:
			return err
		}
	}
	if prof == nil {
		if prof, err = tune.NewProfile(cfg); err != nil {
			return err
		}
	}

	bar := progress.New(stderr, g.Hq)
	defer bar.Finish()
	bar.Label(fmt.Sprintf("tuning %d heads on %d inputs", g.Hq, len(calibration)))
	evals := 0
	cfg.Progress = func(p tune.Progress) {
		evals = p.Evals
		bar.Step(fmt.Sprintf("head %d/%d done, ETA %s", p.Head, p.Heads, p.ETA.Round(time.Second)))
	}
	start := time.Now()
	layer, err := tune.TuneLayer(ctx, cfg, *layerName, calibration)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	prof.Set(*layer)
	if *out != "" {
		if err := tune.SaveFile(*out, prof); err != nil {
			return err
		}
	}
	report := tuneReport{Layer: *layerName, Source: first.Source, Geometry: g, Causal: cfg.Causal, L1: cfg.L1, L2: cfg.L2,
		Inputs: len(calibration), Holdout: len(heldOut), Seconds: elapsed.Seconds(), Evals: evals, Device: "cpu"}
	if gpu != nil {
		report.Device, report.DeviceMS = "cuda", gpu.deviceMS
	}
	for h, hd := range layer.Heads {
		report.Heads = append(report.Heads, tuneHead{Index: h, Head: hd})
	}
	if len(heldOut) > 0 {
		bar.Label("checking held-out inputs")
		opts, err := prof.Options(*layerName)
		if err != nil {
			return err
		}
		opts.Workers, opts.Executor = *workers, cfg.Executor
		tuned, err := prof.Planner(*layerName)
		if err != nil {
			return err
		}
		masks := tuned
		masks.Heads = nil
		for _, p := range tuned.Heads {
			p.Lambda = 0
			masks.Heads = append(masks.Heads, p)
		}
		maskOnly := opts
		maskOnly.Planner = masks
		worst, worstMask := 0.0, 0.0
		raise := func(dst **float64, e float64) {
			if *dst == nil || e > **dst {
				*dst = &e
			}
		}
		for _, x := range heldOut {
			perHead, layerL1, err := heldOutErrors(ctx, opts, prof.RowGroup, x)
			if err != nil {
				return err
			}
			perHeadMask, layerMaskL1, err := heldOutErrors(ctx, maskOnly, prof.RowGroup, x)
			if err != nil {
				return err
			}
			worst, worstMask = max(worst, layerL1), max(worstMask, layerMaskL1)
			for h := range perHead {
				raise(&report.Heads[h].HoldoutL1, perHead[h])
				raise(&report.Heads[h].HoldoutMaskL1, perHeadMask[h])
			}
		}
		report.HoldoutMax, report.HoldoutMaskMax = &worst, &worstMask
	}
	bar.Finish()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	printTune(stdout, report, *out)
	return nil
}

// heldOutErrors runs the tuned layer (opts, a sparge planner at the
// profile's tiling, on opts.Executor: nil is the CPU) and dense attention
// (τ = 1 at rowGroup, on the same executor and tiling) on one input, and
// returns the rel L1 of each query head and of the whole layer.
func heldOutErrors(ctx context.Context, opts sparseattn.Options, rowGroup int, x tune.Input) ([]float64, float64, error) {
	res, err := sparseattn.Attention(ctx, x.Q, x.K, x.V, opts)
	if err != nil {
		return nil, 0, err
	}
	dense := opts
	dense.Planner = sparge.Planner{Params: sparge.Params{CDF: 1}, RowGroup: rowGroup}
	ref, err := sparseattn.Attention(ctx, x.Q, x.K, x.V, dense)
	if err != nil {
		return nil, 0, err
	}
	s := ref.Out.Shape()
	a, b := make([]float32, s.D), make([]float32, s.D)
	perHead := make([]float64, s.H)
	var num, den float64
	for h := range s.H {
		var hn, hd float64
		for bb := range s.B {
			for n := range s.N {
				ref.Out.ReadRow(bb, h, n, a)
				res.Out.ReadRow(bb, h, n, b)
				for d := range a {
					hn += math.Abs(float64(a[d] - b[d]))
					hd += math.Abs(float64(a[d]))
				}
			}
		}
		if hd > 0 {
			perHead[h] = hn / hd
		}
		num, den = num+hn, den+hd
	}
	if den == 0 {
		return perHead, 0, nil
	}
	return perHead, num / den, nil
}

func printTune(w io.Writer, r tuneReport, out string) {
	g := r.Geometry
	fmt.Fprintf(w, "%s (%s): B=%d Hq=%d Hkv=%d Nq=%d Nk=%d D=%d causal=%v; l1=%v l2=%v; %d calibration inputs\n",
		r.Layer, r.Source, g.B, g.Hq, g.Hkv, g.Nq, g.Nk, g.D, r.Causal, r.L1, r.L2, r.Inputs)
	fmt.Fprintf(w, "tuned in %.1f s (%d single-head attention runs on the %s", r.Seconds, r.Evals, r.Device)
	if r.DeviceMS > 0 {
		fmt.Fprintf(w, ", %.1f ms of device time", r.DeviceMS)
	}
	fmt.Fprint(w, ")\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "head\tτ\tθ\tλ\tL1 mask\tL1\tsparsity mask\tsparsity\t"
	if r.Holdout > 0 {
		head += "held-out: L1 mask\tL1\t"
	}
	fmt.Fprintln(tw, head)
	var sp, spMask float64
	for _, h := range r.Heads {
		line := fmt.Sprintf("%d\t%g\t%g\t%g\t%.4f\t%.4f\t%.3f\t%.3f\t", h.Index, h.CDF, h.Theta, h.Lambda, h.L1Mask, h.L1, h.SparsityMask, h.Sparsity)
		if h.HoldoutL1 != nil {
			line += fmt.Sprintf("%.4f\t%.4f\t", *h.HoldoutMaskL1, *h.HoldoutL1)
		}
		fmt.Fprintln(tw, line)
		sp += h.Sparsity / float64(len(r.Heads))
		spMask += h.SparsityMask / float64(len(r.Heads))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmean sparsity %.3f with M_g alone, %.3f with λ too (executor counters, calibration inputs); θ < 0: no judge; λ 0: no filter.\n", spMask, sp)
	if r.HoldoutMax != nil {
		fmt.Fprintf(w, "held-out, worst layer rel L1 over %d inputs: %.4f with M_g alone (bound l1=%v), %.4f with λ too (bound l2=%v)\n",
			r.Holdout, *r.HoldoutMaskMax, r.L1, *r.HoldoutMax, r.L2)
	}
	if out != "" {
		fmt.Fprintf(w, "profile written to %s\n", out)
	}
}
