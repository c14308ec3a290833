package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

const e2eSummary = "end to end on the GPU: plan and run with tensors resident, every method"

// e2eRow is one line of `sparseattn e2e` output (JSON).
type e2eRow struct {
	Method   string  `json:"method"`
	Knob     string  `json:"knob,omitempty"` // "default" or "name=value"
	N        int     `json:"n"`
	BlockQ   int     `json:"block_q"`
	BlockK   int     `json:"block_k"`
	Causal   bool    `json:"causal"`
	PlanMS   float64 `json:"plan_ms"`
	RunMS    float64 `json:"run_ms"`
	TotalMS  float64 `json:"total_ms"`
	Sparsity float64 `json:"sparsity"`
	RelL1    float64 `json:"rel_l1"`
	Cosine   float64 `json:"cosine"`
	// PlanShare is PlanMS over the dense kernel's time at the same N.
	PlanShare float64 `json:"plan_share"`
	// DenseMS is our dense kernel's end-to-end time at the same N.
	DenseMS float64 `json:"dense_ms"`
	// TileDenseMS is our dense kernel's time at the plans' own blocks,
	// where the dense pass of DenseMS ran at wider ones (the default
	// 128-key tiles for 64-key blocks): what a block-sparse plan's
	// machinery is measured against.
	TileDenseMS float64 `json:"tile_dense_ms,omitempty"`
	Kernel      string  `json:"kernel,omitempty"`
	Device      string  `json:"device"`
	FlushedL2   bool    `json:"flushed_l2"`
	Workload    string  `json:"workload"`
	Skipped     string  `json:"skipped,omitempty"` // why a method did not run on the device
	// Timed is false for a sweep setting measured by one untimed call
	// (--target): its sparsity and error hold, its times do not.
	Timed bool `json:"timed"`
}

// runE2E times every selected method end to end on the device: the inputs
// (a synthetic workload) are uploaded once per length, and each call plans
// on the device and runs the plan there. Errors are measured on the host
// against our dense output of the same inputs.
func runE2E(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("e2e", e2eSummary, stderr)
	ns := fs.String("n", "8192,16384,32768,65536,131072", "comma-separated sequence lengths")
	hq := fs.Int("hq", 32, "query heads")
	hkv := fs.Int("hkv", 8, "key/value heads")
	d := fs.Int("d", 128, "head dim")
	bq := fs.Int("block-q", 128, "query block size")
	bk := fs.Int("block-k", 0, "key block size; 0: each method's device default (e2eBlockK: 128 for block masks, dense and s2o, 64 for psa)")
	causal := fs.String("causal", "both", "true, false or both")
	kind := fs.String("workload", "llm", "input generator: "+fmt.Sprint(workload.Kinds()))
	reps := fs.Int("repeat", 5, "timed calls; the median is reported")
	warmup := fs.Int("warmup", 2, "untimed calls first")
	sweep := fs.Bool("sweep", true, "also run each method's knob sweep (compare's values)")
	target := fs.Float64("target", 0, "with --sweep: run each sweep setting once for its error and sparsity, and time only the default and the sparsest setting with rel-L1 <= target (the least error where none is); 0 times every setting")
	seed := fs.Uint64("seed", 1, "workload seed")
	engine := addEngineFlags(fs)
	var mf methodFlags
	mf.register(fs, "dense,sparge,unisparse,xattn,flexprefill,minference,window,psa,s2o")
	if err := parse(fs, args); err != nil {
		return err
	}
	lengths, err := parseInts(*ns)
	if err != nil {
		return fmt.Errorf("%w: --n: %v", errUsage, err)
	}
	causals, err := parseCausal(*causal)
	if err != nil {
		return err
	}
	wk, err := workload.ParseKind(*kind)
	if err != nil {
		return fmt.Errorf("%w: --workload: %v", errUsage, err)
	}
	methods, err := mf.selected()
	if err != nil {
		return err
	}
	cfg, err := engine.config()
	if err != nil {
		return err
	}
	e, err := cuda.Open(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	tiles := &e2eTileDense{cfg: cfg}
	defer tiles.close()
	enc := json.NewEncoder(stdout)
	for _, n := range lengths {
		w, err := workload.Generate(ctx, workload.Config{Kind: wk, Seed: *seed, B: 1, Hq: *hq, Hkv: *hkv, N: n, D: *d, DType: tensor.BFloat16, Layout: tensor.BHND})
		if err != nil {
			return err
		}
		var dev [3]*cuda.Tensor
		for i, h := range []*tensor.Tensor{w.Q, w.K, w.V} {
			if dev[i], err = e.Upload(ctx, h); err != nil {
				return err
			}
			defer dev[i].Free()
		}
		g := tensor.Geometry{B: 1, Hq: *hq, Hkv: *hkv, Nq: n, Nk: n, D: *d, Dv: *d}
		for _, c := range causals {
			s := e2eSession{e: e, q: dev[0], k: dev[1], v: dev[2], warmup: *warmup, reps: *reps,
				t: plan.Tiling{Geometry: g, Causal: c, BlockQ: *bq, BlockK: cmp.Or(*bk, 64)}, base: e2eRow{N: n, Causal: c, Device: e.Info().Name, Workload: string(wk)}}
			dense, err := s.run(ctx, nil, *warmup, *reps)
			if err != nil {
				return fmt.Errorf("dense N=%d causal=%v: %w", n, c, err)
			}
			s.dense, s.denseMS = dense.out, dense.row.TotalMS
			if dense.widened {
				if s.tileDenseMS, err = tiles.time(ctx, s, w.Q, w.K, w.V, enc); err != nil {
					return fmt.Errorf("dense at the plans' tiles, N=%d causal=%v: %w", n, c, err)
				}
			}
			for _, m := range methods {
				configs, err := e2eConfigs(m, *sweep)
				if err != nil {
					return err
				}
				ms := s
				ms.t.BlockK = e2eBlockK(m.name, *bk)
				if ms.t.BlockK != s.t.BlockK && s.tileDenseMS > 0 {
					// The reference dense ran 128-key tiles: this
					// method's own.
					ms.tileDenseMS = s.denseMS
				}
				if err := ms.method(ctx, enc, m.name, configs, *target); err != nil {
					return fmt.Errorf("N=%d causal=%v: %w", n, c, err)
				}
			}
		}
	}
	return nil
}

// e2eBlockK is the key block size method name runs at: flag where set,
// else its device default. Block masks (and dense) run at 128-key blocks:
// on the H200 at 32K causal each of them was faster end to end at 128 than
// at 64 for about the same error, the warp-specialized kernel computing
// 128-key tiles (BENCHMARKS.md, "Session 34"). So does S2O, whose
// gathering kernel computes 128-key tiles for 128-key blocks: at 32K and
// 64K causal it was faster at 128 than at 64 for less error (BENCHMARKS.md,
// "Session 35"). PSA stays at 64: its levels pack into 128-slot tiles
// whatever its blocks.
func e2eBlockK(name string, flag int) int {
	switch {
	case flag > 0:
		return flag
	case name == "psa":
		return 64
	}
	return 128
}

// method writes the rows of one method's configurations. With target > 0
// and a sweep, every setting first runs once, untimed, for its error and
// sparsity; then only the default and the sparsest setting within target
// (the least error when none is) are timed.
func (s *e2eSession) method(ctx context.Context, enc *json.Encoder, name string, configs []e2eConfig, target float64) error {
	// runAll writes a row for each of cfs, untimed or timed, and reports
	// whether the method stopped (not supported on the device).
	runAll := func(cfs []e2eConfig, timed bool) (rows []e2eRow, stop bool, err error) {
		for _, cf := range cfs {
			row, stop, err := s.row(ctx, name, cf, timed)
			if err != nil {
				return nil, true, err
			}
			enc.Encode(row)
			if stop {
				return nil, true, nil
			}
			rows = append(rows, row)
		}
		return rows, false, nil
	}
	timed := configs
	if target > 0 && len(configs) > 1 {
		rows, stop, err := runAll(configs, false)
		if stop || err != nil {
			return err
		}
		best := e2eChoice(rows, target)
		timed = []e2eConfig{configs[0]}
		if best > 0 {
			timed = append(timed, configs[best])
		}
	}
	_, _, err := runAll(timed, true)
	return err
}

// e2eChoice returns the index of the sparsest row with rel-L1 ≤ target,
// or of the row with the least error when none is; the first on ties.
func e2eChoice(rows []e2eRow, target float64) int {
	best := 0
	for i, r := range rows[1:] {
		b, within, bestWithin := rows[best], r.RelL1 <= target, rows[best].RelL1 <= target
		if within && (!bestWithin || r.Sparsity > b.Sparsity) || !within && !bestWithin && r.RelL1 < b.RelL1 {
			best = i + 1
		}
	}
	return best
}

// row runs one configuration, timed or once. stop reports a method the
// device does not support; its row says why.
func (s *e2eSession) row(ctx context.Context, name string, cf e2eConfig, timed bool) (row e2eRow, stop bool, err error) {
	if err := ctx.Err(); err != nil {
		return row, false, err
	}
	warmup, reps := s.warmup, s.reps
	if !timed {
		warmup, reps = 0, 1
	}
	res, err := s.run(ctx, cf.planner, warmup, reps)
	row = res.row
	row.Method, row.Knob, row.Timed = name, cf.knob, timed
	if errors.Is(err, cuda.ErrUnsupported) {
		row.Skipped = err.Error()
		return row, true, nil
	}
	if err != nil {
		return row, true, fmt.Errorf("%s %s: %w", name, cf.knob, err)
	}
	return row, false, nil
}

// parseCausal parses --causal.
func parseCausal(s string) ([]bool, error) {
	switch s {
	case "true":
		return []bool{true}, nil
	case "false":
		return []bool{false}, nil
	case "both":
		return []bool{false, true}, nil
	}
	return nil, fmt.Errorf("%w: --causal must be true, false or both", errUsage)
}

// e2eConfig is one planner configuration of a method.
type e2eConfig struct {
	knob    string
	planner plan.Planner
}

// e2eConfigs returns m's default configuration and, with sweep, its knob
// values.
func e2eConfigs(m *method, sweep bool) ([]e2eConfig, error) {
	p, err := m.planner()
	if err != nil {
		return nil, err
	}
	out := []e2eConfig{{knob: "default", planner: p}}
	if !sweep || m.knob == nil {
		return out, nil
	}
	for _, x := range m.knob.values {
		kp, err := m.knob.planner(x)
		if err != nil {
			return nil, err
		}
		out = append(out, e2eConfig{knob: fmt.Sprintf("%s=%g", m.knob.name, x), planner: kp})
	}
	return out, nil
}

// e2eSession holds one problem's device inputs and dense reference.
type e2eSession struct {
	e            *cuda.Engine
	q, k, v      *cuda.Tensor
	t            plan.Tiling
	warmup, reps int
	base         e2eRow
	dense        *tensor.Tensor
	denseMS      float64
	tileDenseMS  float64
}

type e2eResult struct {
	row e2eRow
	out *tensor.Tensor
	// widened: the dense pass ran at wider blocks than the tiling's
	widened bool
}

// run times planner p (nil: dense) end to end and measures its error
// against the dense output.
func (s *e2eSession) run(ctx context.Context, p plan.Planner, warmup, reps int) (e2eResult, error) {
	res := e2eResult{row: s.base}
	r, err := s.e.NewRunner(ctx, s.t, s.q.DType(), p)
	if err != nil {
		return res, err
	}
	defer r.Close()
	g := s.t.Geometry
	out, err := s.e.Alloc(ctx, s.q.DType(), tensor.BHND, tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.Dv})
	if err != nil {
		return res, err
	}
	defer out.Free()
	tm, err := r.Benchmark(ctx, s.q, s.k, s.v, out, warmup, reps)
	if err != nil {
		return res, err
	}
	res.widened = r.KernelTiling() != r.Tiling()
	row := &res.row
	row.BlockQ, row.BlockK = s.t.BlockQ, s.t.BlockK
	row.PlanMS, row.RunMS, row.TotalMS = tm.PlanMS, tm.RunMS, tm.TotalMS
	row.Sparsity, row.Kernel, row.FlushedL2 = tm.Last.Stats.Sparsity(), string(tm.Last.Kernel), tm.FlushedL2
	if res.out, err = out.Download(ctx); err != nil {
		return res, err
	}
	if s.dense != nil {
		m, err := metrics.CompareTensors(s.dense, res.out)
		if err != nil {
			return res, err
		}
		row.RelL1, row.Cosine = m.RelL1, m.Cosine
		row.DenseMS, row.TileDenseMS = s.denseMS, s.tileDenseMS
		if s.denseMS > 0 {
			row.PlanShare = row.PlanMS / s.denseMS
		}
	} else {
		row.Method, row.Knob, row.Cosine, row.DenseMS = "dense", "default", 1, row.TotalMS
	}
	return res, nil
}

// e2eTileDense times our dense pass at the plans' own blocks on a second
// engine, one with Tactics.DenseNarrowTiles, opened on first use. The
// inputs are uploaded to it again; its row is the dense method's, knob
// "plan-tiles".
type e2eTileDense struct {
	cfg cuda.Config
	e   *cuda.Engine
}

func (d *e2eTileDense) time(ctx context.Context, s e2eSession, q, k, v *tensor.Tensor, enc *json.Encoder) (float64, error) {
	if d.e == nil {
		cfg := d.cfg
		cfg.Tactics.DenseNarrowTiles = true
		e, err := cuda.Open(cfg)
		if err != nil {
			return 0, err
		}
		d.e = e
	}
	var dev [3]*cuda.Tensor
	for i, h := range []*tensor.Tensor{q, k, v} {
		t, err := d.e.Upload(ctx, h)
		if err != nil {
			return 0, err
		}
		defer t.Free()
		dev[i] = t
	}
	ns := s
	ns.e, ns.q, ns.k, ns.v, ns.dense = d.e, dev[0], dev[1], dev[2], nil
	res, err := ns.run(ctx, nil, s.warmup, s.reps)
	if err != nil {
		return 0, err
	}
	m, err := metrics.CompareTensors(s.dense, res.out)
	if err != nil {
		return 0, err
	}
	row := res.row
	row.Knob, row.Timed, row.RelL1, row.Cosine = "plan-tiles", true, m.RelL1, m.Cosine
	row.DenseMS, row.TileDenseMS = s.denseMS, row.TotalMS
	row.PlanShare = row.PlanMS / s.denseMS
	return row.TotalMS, enc.Encode(row)
}

func (d *e2eTileDense) close() {
	if d.e != nil {
		d.e.Close()
	}
}
