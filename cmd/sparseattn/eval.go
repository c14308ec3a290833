package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/evaluate"
	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

const evalSummary = `Runs each method on a generated workload or on Q/K/V files and compares its
output with dense attention computed by the same executor. Reports the
skipped fraction of block products (from the executor's counters), relative
L1 error, cosine similarity, time including planning and any reordering or
quantizing (median of --repeat runs after --warmup), speedup over dense, and
dense-equivalent GFLOPS.

Inputs, one of:
  (nothing)                   the default: --workload lm, real attention
  --workload lm [--n N] [--lm-text eval|calib|FILE]
                              the embedded byte-level LM (4 layers × 4 heads,
                              D=64) run over the first N bytes (default 4096)
                              of a held-out text; its 16 heads' Q/K/V are
                              the input, and every method is also scored by
                              the model's bits per byte with that method's
                              attention in every layer (column bpb)
  --workload llm|video|image|random [--n --heads --kv-heads --d --seed ...]
                              synthetic generators
  --input qkv.safetensors     or .npz; tensors named by --q-name/--k-name/--v-name
  --q q.npy --k k.npy --v v.npy

With --order (non-causal video/image workloads, or files with --grid T,H,W
[--text N]) every method runs on reordered visual tokens and its output is
put back; with --int8-qk every method runs on INT8 Q and K. Dense then runs
once more in float and the input order, and every error is against it.`

// evalRow is one method's line of the report.
type evalRow struct {
	Method       string    `json:"method"`
	Sparsity     float64   `json:"sparsity"`
	DenseBlocks  float64   `json:"dense_block_products"`
	QKBlocks     float64   `json:"qk_block_products"`
	PVBlocks     float64   `json:"pv_block_products"`
	RelL1        jsonFloat `json:"rel_l1"` // +Inf (JSON null) when dense is all zeros
	RelL2        jsonFloat `json:"rel_l2"`
	Cosine       float64   `json:"cosine"`
	MSE          float64   `json:"mse"`
	MAE          float64   `json:"mae"`
	MaxAbs       float64   `json:"max_abs"`
	PlanMS       float64   `json:"plan_ms"`
	RunMS        float64   `json:"run_ms"`
	TotalMS      float64   `json:"total_ms"`
	Speedup      float64   `json:"speedup"`
	GFLOPS       float64   `json:"dense_equivalent_gflops"`
	NeedleRecall *float64  `json:"needle_cosine,omitempty"` // nil without a planted needle
	// BitsPerByte is the lm workload's model score with this method's
	// attention in every layer (nil for other inputs).
	BitsPerByte *float64 `json:"bits_per_byte,omitempty"`
}

type evalReport struct {
	Source   string          `json:"source"`
	Geometry tensor.Geometry `json:"geometry"`
	Causal   bool            `json:"causal"`
	DType    string          `json:"dtype"`
	Repeat   int             `json:"repeat"`
	Order    string          `json:"order,omitempty"`
	Int8QK   bool            `json:"int8_qk,omitempty"`
	Sim      *similarity     `json:"similarity,omitempty"`
	Rows     []evalRow       `json:"methods"`
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("eval", evalSummary, stderr)
	var in inputFlags
	in.register(fs)
	var mf methodFlags
	mf.register(fs, "")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	var rf runFlags
	rf.register(fs, "method")
	scale := registerScale(fs)
	var vf variantFlags
	vf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkRun(&rf, *scale, stderr); err != nil {
		return err
	}
	planners, err := mf.planners()
	if err != nil {
		return err
	}
	planners = withDenseFirst(planners)
	runCount := len(planners)
	if vf.activeFlags() {
		runCount++ // float dense as the reference
	}
	steps := runCount*(rf.repeat+rf.warmup) + 1
	if in.kind == lmKind {
		steps += len(planners) // the lm workload: one model pass per method, for bits per byte
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
	bar.Step("")
	report := evalReport{Source: prob.Source, Geometry: g, Causal: prob.Causal, DType: prob.q.DType().String(), Repeat: rf.repeat, Int8QK: vf.int8QK}
	if !spec.Identity() {
		report.Order = string(spec.Kind)
	}
	if vf.sim || !spec.Identity() {
		bar.Label("block similarity")
		if report.Sim, err = measureSimilarity(ctx, prob.q, prob.k, spec, rf.blockQ, rf.blockK); err != nil {
			return err
		}
	}
	// Each run: a planner, under the variant or not. Under a variant,
	// plain float dense runs first as the reference for every error.
	type evalRun struct {
		planner plan.Planner
		variant bool
	}
	var runs []evalRun
	if vf.active(spec) {
		runs = append(runs, evalRun{planner: plan.DensePlanner{}})
	}
	for _, pl := range planners {
		runs = append(runs, evalRun{planner: pl, variant: vf.active(spec)})
	}
	var ref *evaluate.Reference
	for _, run := range runs {
		name := run.planner.Name()
		opts := sparseattn.Options{Causal: prob.Causal, Planner: run.planner, Scale: float32(*scale)}
		if run.variant {
			name += vf.suffix(spec)
			opts = vf.apply(opts, spec)
		}
		row, res, err := measure(ctx, rf, bar, prob, opts, name, ref)
		if err != nil {
			return err
		}
		row.Method = name
		if prob.lm != nil {
			bar.Label("bits per byte: " + name)
			bpb, err := prob.lm.bitsPerByte(ctx, rf, opts)
			if err != nil {
				return err
			}
			row.BitsPerByte = &bpb
			bar.Step("")
		}
		if ref == nil {
			ref = referenceOf(row, res)
		}
		report.Rows = append(report.Rows, row)
	}
	bar.Finish()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	printEval(stdout, report)
	return nil
}

// measure times opts.Planner on the problem as rf says and compares its
// output with ref (evaluate.Measure); with ref nil the run is the
// reference itself (dense) and its row has zero error. It returns the row
// and the result of the last run.
func measure(ctx context.Context, rf runFlags, bar *progress.Bar, prob *problem, opts sparseattn.Options, label string, ref *evaluate.Reference) (evalRow, *sparseattn.Result, error) {
	m, res, err := evaluate.Measure(ctx, rf.runner(bar, prob), prob.evaluated(), opts, label, ref)
	if err != nil {
		return evalRow{}, nil, err
	}
	return rowOf(m, prob.hasNeedle()), res, nil
}

// referenceOf is the dense reference a measured row and its result make.
func referenceOf(row evalRow, res *sparseattn.Result) *evaluate.Reference {
	return &evaluate.Reference{Out: res.Out, TotalMS: row.TotalMS}
}

// rowOf is the report's row of a measurement; needle says whether the
// input has a planted needle (the row then reports its recall).
func rowOf(m evaluate.Measurement, needle bool) evalRow {
	row := evalRow{Method: m.Method, Sparsity: m.Sparsity, DenseBlocks: m.DenseBlocks, QKBlocks: m.QKBlocks, PVBlocks: m.PVBlocks,
		RelL1: jsonFloat(m.RelL1), RelL2: jsonFloat(m.RelL2), Cosine: m.Cosine, MSE: m.MSE, MAE: m.MAE, MaxAbs: m.MaxAbs,
		PlanMS: m.PlanMS, RunMS: m.RunMS, TotalMS: m.TotalMS, Speedup: m.Speedup, GFLOPS: m.GFLOPS}
	if needle {
		recall := m.NeedleRecall
		row.NeedleRecall = &recall
	}
	return row
}

// hasNeedle reports whether the problem is a generated workload with a
// planted needle.
func (p *problem) hasNeedle() bool { return p.workload != nil && p.workload.Needle != nil }

// evaluated is the problem as package evaluate measures it.
func (p *problem) evaluated() evaluate.Problem {
	e := evaluate.Problem{Q: p.q, K: p.k, V: p.v, Causal: p.Causal}
	if p.hasNeedle() {
		e.Needle = p.workload.NeedleRecall
	}
	return e
}

// registerScale adds --scale, the softmax scale, to fs.
func registerScale(fs *flag.FlagSet) *float64 {
	return fs.Float64("scale", 0, "softmax scale on QKᵀ (0 = 1/sqrt(D))")
}

// checkScale rejects a --scale the executor cannot use.
// checkRun checks the run flags, logs the run settings to stderr, then
// checks --scale: the common prologue of the commands that run attention.
func checkRun(rf *runFlags, scale float64, stderr io.Writer) error {
	if err := rf.check(); err != nil {
		return err
	}
	rf.logTo(stderr)
	if err := checkScale(scale); err != nil {
		return err
	}
	var err error
	rf.gpu, err = openGPUSession(rf.device, rf.logf)
	return err
}

func checkScale(scale float64) error {
	if !(scale >= 0) || math.IsInf(scale, 0) || scale > math.MaxFloat32 {
		return fmt.Errorf("%w: --scale must be ≥ 0 and finite (0 = 1/sqrt(D))", errUsage)
	}
	return nil
}

func printEval(w io.Writer, r evalReport) {
	g := r.Geometry
	fmt.Fprintf(w, "%s: B=%d Hq=%d Hkv=%d Nq=%d Nk=%d D=%d Dv=%d %s causal=%v; times are medians of %d runs\n\n",
		r.Source, g.B, g.Hq, g.Hkv, g.Nq, g.Nk, g.D, g.Dv, r.DType, r.Causal, r.Repeat)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	needle := slices.ContainsFunc(r.Rows, func(x evalRow) bool { return x.NeedleRecall != nil })
	head := "method\tsparsity\trel L1\tcosine\tplan ms\ttotal ms\tspeedup\tGFLOPS\t"
	if needle {
		head += "needle\t"
	}
	bpb := len(r.Rows) > 0 && r.Rows[0].BitsPerByte != nil
	if bpb {
		head += "bpb\tΔbpb\t"
	}
	fmt.Fprintln(tw, head)
	for _, x := range r.Rows {
		line := fmt.Sprintf("%s\t%.3f\t%.2e\t%.6f\t%.1f\t%.1f\t%.2fx\t%.1f\t", x.Method, x.Sparsity, x.RelL1, x.Cosine, x.PlanMS, x.TotalMS, x.Speedup, x.GFLOPS)
		if needle {
			line += fmt.Sprintf("%.3f\t", *x.NeedleRecall)
		}
		if bpb && x.BitsPerByte != nil {
			line += fmt.Sprintf("%.4f\t%+.2f%%\t", *x.BitsPerByte, 100*(*x.BitsPerByte / *r.Rows[0].BitsPerByte - 1))
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	if r.Sim != nil {
		fmt.Fprintf(w, "\nblock self-similarity (CosSim: mean cosine over all token pairs of a block, %d-token Q blocks, %d-token K blocks): input order Sim-q %.3f Sim-k %.3f",
			r.Sim.BlockQ, r.Sim.BlockK, r.Sim.InputQ, r.Sim.InputK)
		if r.Sim.OrderedQ != nil {
			fmt.Fprintf(w, "; %s order Sim-q %.3f Sim-k %.3f", r.Sim.Order, *r.Sim.OrderedQ, *r.Sim.OrderedK)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  per head, input order: Sim-q %s; Sim-k %s\n", fmtList(r.Sim.InputQHeads), fmtList(r.Sim.InputKHeads))
		if r.Sim.OrderedQ != nil {
			fmt.Fprintf(w, "  per head, %s order: Sim-q %s; Sim-k %s\n", r.Sim.Order, fmtList(r.Sim.OrderedQHeads), fmtList(r.Sim.OrderedKHeads))
		}
	}
	if r.Order != "" || r.Int8QK {
		fmt.Fprintln(w, "+order / +int8: the method ran on reordered tokens / INT8 Q and K; errors are against float dense in the input order (first row).")
	}
	fmt.Fprintln(w, "\nsparsity: skipped fraction of the QK+PV block products a dense causal-aware pass needs, from the executor's counters.")
	fmt.Fprintln(w, "rel L1: Σ|O−O'|/Σ|O| against dense; GFLOPS: dense-equivalent, planning included.")
	if needle {
		fmt.Fprintln(w, "needle: cosine (-1..1) of the needle query's output with the needle's value; dense ≈ 1, near 0 means lost.")
	}
	if bpb {
		fmt.Fprintln(w, "bpb: the model's bits per byte over the text with the method's attention in every layer; Δbpb against the first row.")
	}
}

// fmtList prints values with three decimals, space-separated.
func fmtList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, " ")
}

// jsonFloat is a float64 that encodes NaN and ±Inf as JSON null, which
// encoding/json otherwise refuses, and decodes null as NaN.
type jsonFloat float64

// MarshalJSON writes the number, or null when it is not finite.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// UnmarshalJSON reads a number, or null as NaN.
func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = jsonFloat(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(f))
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
