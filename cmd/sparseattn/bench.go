package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/evaluate"
	"github.com/sparseattn/sparseattn/internal/cpuinfo"
	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

const benchSummary = `Sweeps the sequence length and times each method on a generated workload
(median of --repeat runs after --warmup, planning included). Reports
dense-equivalent GFLOPS and the percentage of the machine's measured FMA
peak on all threads (see "sparseattn info"), and what the default call's
NaN/Inf check of q, k and v costs on top ("check ms": the median
difference between calls with and without it, run back to back; "check %":
its share of check plus call; the timed runs themselves skip it). For the
dense plan on the CPU the check runs inside the executor's own reads.

--nq Q times chunked prefill: the last Q tokens of each length N query all
N keys (causal masking treats them as the last Q tokens). --decode is
--nq 1. With fewer queries than keys the table also gives the rate at which
K and V are read and its percentage of the machine's plain read bandwidth,
measured in the same run: decode reads K and V once.

--peer CMD runs a peer implementation on the same shapes in the same run,
before ours at each length: CMD is split on spaces and given --n N --nq Q
--heads H --kv-heads HKV --d D --causal true|false --repeat R --warmup W,
and must print JSON with "rows": [{"ms": median ms}] and any settings it
ran with (they go in the report). scripts/peer_torch_cpu.py is PyTorch's
CPU SDPA: --peer "python3 scripts/peer_torch_cpu.py".`

type benchRow struct {
	N        int     `json:"n"`
	Method   string  `json:"method"`
	MS       float64 `json:"ms"`
	GFLOPS   float64 `json:"dense_equivalent_gflops"`
	PeakPct  float64 `json:"percent_of_peak"`
	Sparsity float64 `json:"sparsity"`
	// NQ is the number of queries (N unless --nq or --decode).
	NQ int `json:"nq"`
	// CheckMS is what the default call's NaN/Inf check of q, k and v adds:
	// the median difference between calls with and without it, back to
	// back; CheckPct is its share of CheckMS + MS.
	CheckMS  float64 `json:"check_ms"`
	CheckPct float64 `json:"check_percent"`
	// PeerMS is the peer's median time (--peer), PeerRatio PeerMS / MS.
	PeerMS    float64 `json:"peer_ms,omitempty"`
	PeerRatio float64 `json:"speedup_vs_peer,omitempty"`
	// KVGBs is the K and V bytes over the time (Nq < N only), ReadPct its
	// percentage of the measured read bandwidth.
	KVGBs   float64 `json:"kv_gb_per_s,omitempty"`
	ReadPct float64 `json:"percent_of_read_bandwidth,omitempty"`
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
	// ReadGBs is the plain read bandwidth on all threads (Nq < N only).
	ReadGBs float64 `json:"read_gb_per_s,omitempty"`
	// Peer is the --peer command and what it reported of its settings.
	Peer     string         `json:"peer,omitempty"`
	PeerInfo map[string]any `json:"peer_info,omitempty"`
	Rows     []benchRow     `json:"rows"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", benchSummary, stderr)
	kind := fs.String("workload", "llm", "workload: llm, video, image or random")
	ns := fs.String("n", "1024,2048,4096,8192", "comma-separated sequence lengths")
	heads := fs.Int("heads", 8, "query heads")
	kvHeads := fs.Int("kv-heads", 8, "KV heads")
	d := fs.Int("d", 128, "head dim")
	causal := fs.String("causal", "auto", "true, false, or auto (the workload's own)")
	nq := fs.Int("nq", 0, "queries per problem: the last nq tokens query all N keys (chunked prefill); 0 = N")
	decode := fs.Bool("decode", false, "decode: one query token against N keys (--nq 1)")
	var mf methodFlags
	mf.register(fs, "dense")
	fs.Lookup("methods").Usage += " (bench times each; dense need not be among them)"
	var rf runFlags
	rf.register(fs, "point")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	peer := fs.String("peer", "", "peer command timed on the same shapes in the same run (see above)")
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
	if *nq < 0 {
		return fmt.Errorf("%w: --nq must be ≥ 0", errUsage)
	}
	if *decode {
		if *nq > 1 {
			return fmt.Errorf("%w: --decode is --nq 1; give one of them", errUsage)
		}
		*nq = 1
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
	if *nq > 0 {
		report.ReadGBs = measureReadBandwidth(ctx)
	}
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
		q := w.Q
		if *nq > 0 && *nq < q.Shape().N {
			if q, err = lastQueries(q, *nq); err != nil {
				return err
			}
		}
		g, err := tensor.Validate(q, w.K, w.V)
		if err != nil {
			return err
		}
		peerMS := 0.0
		if *peer != "" {
			bar.Label(fmt.Sprintf("N=%d peer", n))
			info, t, err := runPeer(ctx, *peer, g, isCausal, rf)
			if err != nil {
				return err
			}
			report.Peer, report.PeerInfo, peerMS = *peer, info, t
		}
		for _, pl := range planners {
			opts := sparseattn.Options{Causal: isCausal, Planner: pl}
			tm, err := timeMethod(ctx, rf, bar, fmt.Sprintf("N=%d %s", n, pl.Name()), q, w.K, w.V, opts)
			if err != nil {
				return err
			}
			checkMS, err := timeCheck(ctx, rf, q, w.K, w.V, opts)
			if err != nil {
				return err
			}
			t, res := tm.totalMS, tm.last
			gf := metrics.TOPS(g, isCausal, t/1e3) * 1e3
			row := benchRow{N: g.Nk, NQ: g.Nq, Method: pl.Name(), MS: t, GFLOPS: gf, PeakPct: 100 * gf / report.Peak.AllCores,
				Sparsity: res.Stats.Sparsity(), CheckMS: checkMS, CheckPct: checkShare(checkMS, t)}
			if peerMS > 0 {
				row.PeerMS, row.PeerRatio = peerMS, peerMS/t
			}
			if g.Nq < g.Nk {
				kv := float64(g.B*g.Hkv*g.Nk*(g.D*w.K.DType().Size()+g.Dv*w.V.DType().Size())) / 1e9
				row.KVGBs = kv / (t / 1e3)
				row.ReadPct = 100 * row.KVGBs / report.ReadGBs
			}
			report.Rows = append(report.Rows, row)
		}
	}
	bar.Finish()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	fmt.Fprintf(stdout, "%s; FMA peak %.1f GFLOPS on %d threads (%s)\n", report.CPU, report.Peak.AllCores, report.Peak.Goroutines, report.Peak.Kind)
	fmt.Fprintf(stdout, "%s workload, Hq=%d Hkv=%d D=%d causal=%v; medians of %d runs\n", *kind, *heads, *kvHeads, *d, report.Causal, rf.repeat)
	if *nq > 0 {
		fmt.Fprintf(stdout, "Nq=%d; plain reads %.1f GB/s on %d threads\n", *nq, report.ReadGBs, runtime.GOMAXPROCS(0))
	}
	if report.Peer != "" {
		info, _ := json.Marshal(report.PeerInfo)
		fmt.Fprintf(stdout, "peer: %s: %s\n", report.Peer, info)
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if *nq > 0 {
		fmt.Fprintln(tw, "N\tNq\tmethod\tms\tKV GB/s\t% read BW\tGFLOPS\tsparsity\tcheck ms\tcheck %\tpeer ms\tvs peer\t")
		for _, r := range report.Rows {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%.3f\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t%.1f\t%s\t\n", r.N, r.NQ, r.Method, r.MS, r.KVGBs, r.ReadPct, r.GFLOPS, r.Sparsity, r.CheckMS, r.CheckPct, peerCols(r))
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "N\tmethod\tms\tGFLOPS\t% peak\tsparsity\tcheck ms\tcheck %\tpeer ms\tvs peer\t")
	for _, r := range report.Rows {
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%.1f\t%.3f\t%.2f\t%.1f\t%s\t\n", r.N, r.Method, r.MS, r.GFLOPS, r.PeakPct, r.Sparsity, r.CheckMS, r.CheckPct, peerCols(r))
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

// lastQueries returns the last nq query tokens of q, for chunked prefill
// and decode.
func lastQueries(q *tensor.Tensor, nq int) (*tensor.Tensor, error) {
	s := q.Shape()
	out, err := tensor.New(q.DType(), q.Layout(), tensor.Shape{B: s.B, H: s.H, N: nq, D: s.D})
	if err != nil {
		return nil, err
	}
	row := make([]float32, s.D)
	for b := range s.B {
		for h := range s.H {
			for i := range nq {
				q.ReadRow(b, h, s.N-nq+i, row)
				out.WriteRow(b, h, i, row)
			}
		}
	}
	return out, nil
}

// checkShare is the check's percentage of a checked call, check + call;
// a negative check (noise) is given against the call alone, so that the
// share never reaches 100%.
func checkShare(check, call float64) float64 {
	if check > 0 {
		return 100 * check / (check + call)
	}
	return 100 * check / call
}

// timeCheck is what the NaN/Inf check of q, k and v costs a default
// Attention call with opts: the median, over --warmup then --repeat pairs,
// of a call with the check minus the same call without it, run back to
// back. Where the check runs inside the executor's own reads (the dense
// plan on the CPU) it cannot be timed apart, only by this difference.
func timeCheck(ctx context.Context, f runFlags, q, k, v *tensor.Tensor, opts sparseattn.Options) (float64, error) {
	opts.Workers, opts.BlockQ, opts.BlockK = f.workers, f.blockQ, f.blockK
	opts.Device, opts.Logf = sparseattn.Device(f.device), f.logf
	var diffs []float64
	for i := range f.warmup + f.repeat {
		var pair [2]float64
		for j, skip := range []bool{false, true} {
			opts.SkipFiniteCheck = skip
			start := time.Now()
			if _, err := sparseattn.Attention(ctx, q, k, v, opts); err != nil {
				return 0, err
			}
			pair[j] = ms(time.Since(start))
		}
		if i >= f.warmup {
			diffs = append(diffs, pair[0]-pair[1])
		}
	}
	return evaluate.Median(diffs), nil
}

// measureReadBandwidth is the plain read rate of this machine in GB/s:
// the median of 7 passes, after one untimed, over 256 MiB of non-zero
// float32 split over GOMAXPROCS goroutines that each take the maximum of
// their share with the vectorized kernel.
func measureReadBandwidth(ctx context.Context) float64 {
	x := make([]float32, 64<<20)
	for i := range x {
		x[i] = float32(i%1021) + 1
	}
	workers := runtime.GOMAXPROCS(0)
	var rates []float64
	for i := range 8 {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if kernel.Max(x[w*len(x)/workers:(w+1)*len(x)/workers]) <= 0 {
					panic("bench: read-bandwidth buffer lost its values")
				}
			}()
		}
		wg.Wait()
		if i > 0 {
			rates = append(rates, float64(len(x)*4)/time.Since(start).Seconds()/1e9)
		}
	}
	if len(rates) == 0 {
		return 0
	}
	return evaluate.Median(rates)
}
