package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/cpuinfo"
	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

const benchSummary = `Sweeps the sequence length and times each method on a generated workload
(median of --repeat runs after --warmup, planning included). Reports
dense-equivalent GFLOPS and the percentage of the machine's measured FMA
peak on all threads (see "sparseattn info").`

type benchRow struct {
	N        int     `json:"n"`
	Method   string  `json:"method"`
	MS       float64 `json:"ms"`
	GFLOPS   float64 `json:"dense_equivalent_gflops"`
	PeakPct  float64 `json:"percent_of_peak"`
	Sparsity float64 `json:"sparsity"`
}

type benchReport struct {
	CPU      string       `json:"cpu"`
	Peak     cpuinfo.Peak `json:"fma_peak_gflops"`
	Workload string       `json:"workload"`
	Heads    int          `json:"heads"`
	KVHeads  int          `json:"kv_heads"`
	D        int          `json:"d"`
	Causal   bool         `json:"causal"`
	Repeat   int          `json:"repeat"`
	Rows     []benchRow   `json:"rows"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", benchSummary, stderr)
	kind := fs.String("workload", "llm", "workload: llm, video, image or random")
	ns := fs.String("n", "1024,2048,4096,8192", "comma-separated sequence lengths")
	heads := fs.Int("heads", 8, "query heads")
	kvHeads := fs.Int("kv-heads", 8, "KV heads")
	d := fs.Int("d", 128, "head dim")
	causal := fs.String("causal", "auto", "true, false, or auto (the workload's own)")
	var mf methodFlags
	mf.register(fs, "dense")
	fs.Lookup("methods").Usage += " (bench times each; dense need not be among them)"
	var rf runFlags
	rf.register(fs, "point")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	var lengths []int
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: --n: %q is not a positive length", errUsage, s)
		}
		lengths = append(lengths, n)
	}
	if err := rf.check(); err != nil {
		return err
	}
	rf.logTo(stderr)
	if *causal != "auto" && *causal != "true" && *causal != "false" {
		return fmt.Errorf("%w: --causal must be true, false or auto, not %q", errUsage, *causal)
	}
	wk, err := workload.ParseKind(*kind)
	if err != nil {
		return fmt.Errorf("%w: --workload: %v", errUsage, err)
	}
	planners, err := mf.planners()
	if err != nil {
		return err
	}
	report := benchReport{CPU: cpuinfo.Model(), Workload: *kind, Heads: *heads, KVHeads: *kvHeads, D: *d, Repeat: rf.repeat}
	report.Peak = cpuinfo.MeasurePeak(ctx, 300*time.Millisecond)
	bar := progress.New(stderr, len(lengths)*len(planners)*(rf.repeat+rf.warmup))
	defer bar.Finish()
	for _, n := range lengths {
		cfg := workload.Default()
		cfg.Kind, cfg.N, cfg.Hq, cfg.Hkv, cfg.D = wk, n, *heads, *kvHeads, *d
		if wk == workload.Video || wk == workload.Image {
			cfg.N = 0 // the grid decides
			cfg.Frames, cfg.Height, cfg.Width = gridFor(wk, n)
		}
		bar.Label(fmt.Sprintf("generating N=%d", n))
		w, err := workload.Generate(ctx, cfg)
		if err != nil {
			return err
		}
		isCausal := w.Causal
		if *causal == "true" || *causal == "false" {
			isCausal = *causal == "true"
		}
		report.Causal = isCausal
		g, _ := tensor.Validate(w.Q, w.K, w.V)
		for _, pl := range planners {
			tm, err := timeMethod(ctx, rf, bar, fmt.Sprintf("N=%d %s", n, pl.Name()), w.Q, w.K, w.V,
				sparseattn.Options{Causal: isCausal, Planner: pl})
			if err != nil {
				return err
			}
			t, res := tm.totalMS, tm.last
			gf := metrics.TOPS(g, isCausal, t/1e3) * 1e3
			report.Rows = append(report.Rows, benchRow{N: w.Q.Shape().N, Method: pl.Name(), MS: t, GFLOPS: gf, PeakPct: 100 * gf / report.Peak.AllCores, Sparsity: res.Stats.Sparsity()})
		}
	}
	bar.Finish()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	fmt.Fprintf(stdout, "%s; FMA peak %.1f GFLOPS on %d threads (%s)\n", report.CPU, report.Peak.AllCores, report.Peak.Goroutines, report.Peak.Kind)
	fmt.Fprintf(stdout, "%s workload, Hq=%d Hkv=%d D=%d causal=%v; medians of %d runs\n\n", *kind, *heads, *kvHeads, *d, report.Causal, rf.repeat)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tmethod\tms\tGFLOPS\t% peak\tsparsity\t")
	for _, r := range report.Rows {
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%.1f\t%.3f\t\n", r.N, r.Method, r.MS, r.GFLOPS, r.PeakPct, r.Sparsity)
	}
	return tw.Flush()
}

// gridFor picks a token grid of about n tokens: 16×16 frames for video
// (n/256 frames), a square for images.
func gridFor(k workload.Kind, n int) (frames, height, width int) {
	if k == workload.Video {
		return max(1, n/256), 16, 16
	}
	side := 1
	for (side+1)*(side+1) <= n {
		side++
	}
	return 1, side, side
}
