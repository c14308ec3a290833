package selftest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// PlannerCase is one device-planner check: a planner, a problem and where
// its inputs come from.
type PlannerCase struct {
	Name    string
	Planner plan.Planner
	Case    cuda.Case // the shape, type and layout; Density and Lambda are ignored
	// Workload, when set, draws the inputs from that synthetic workload
	// (its N, heads and D must match Case) instead of N(0, 1) noise.
	Workload workload.Kind
	// Repeat, when positive, makes row n of q and of k a copy of row
	// n mod Repeat (per batch and head), so that scores tie often (S2O's
	// stable ranking).
	Repeat int
}

// PlannerCheck is the outcome of one PlannerCase.
type PlannerCheck struct {
	PlannerCase
	// RowsDiffer is the number of plan rows whose KV blocks differ between
	// the device planner and the CPU planner (0 when they agree).
	RowsDiffer int
	// RowsTied is the number of rows that differ at a documented
	// tie-break of the planner (the oracle's TopCdf boundary under float32
	// rounding); they are not counted in RowsDiffer.
	RowsTied int
	Rows     int
	// OrdersDiffer is the number of token orders (a head's query order, a
	// key order), Init plans and stop rules that differ between the device
	// plan and the CPU's (S2O; 0 for plans without them).
	OrdersDiffer int
	GPU, CPU     plan.Stats // counters of the device run and the CPU run of the CPU plan
	Errors       metrics.Errors
	PlanMS       float64
	Err          error // nil when the case passed
}

// RunPlanners runs each case's planner on the device (cuda.Runner) and on
// the CPU, and requires identical plans, identical work counters and
// outputs within the 16-bit tolerance of the attention self-test.
func RunPlanners(ctx context.Context, e *cuda.Engine, r *rand.Rand, cases []PlannerCase, report func(PlannerCheck)) (failed int, err error) {
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return failed, err
		}
		chk := runPlannerCase(ctx, e, r, c)
		if chk.Err != nil {
			failed++
		}
		report(chk)
	}
	return failed, nil
}

// inputs draws the case's q, k and v.
func (c PlannerCase) inputs(ctx context.Context, r *rand.Rand) (q, k, v *tensor.Tensor, err error) {
	if c.Workload == "" {
		if q, k, v, err = cuda.RandomInputs(r, c.Case, 1); err == nil && c.Repeat > 0 {
			repeatRows(q, c.Repeat)
			repeatRows(k, c.Repeat)
		}
		return q, k, v, err
	}
	w, err := workload.Generate(ctx, workload.Config{Kind: c.Workload, Seed: r.Uint64(), B: c.Case.B, Hq: c.Case.Hq, Hkv: c.Case.Hkv,
		N: c.Case.Nq, D: c.Case.D, DType: c.Case.DType, Layout: c.Case.Layout})
	if err != nil {
		return nil, nil, nil, err
	}
	return w.Q, w.K, w.V, nil
}

// sameCount reports whether two work counters agree. Counts of whole
// blocks are equal exactly; a pooled entry counts the fraction
// ⌈n/2^(h-1)⌉/n of a block, which the CPU executor adds entry by entry and
// the device multiplies by its per-level entry counts, so with ragged
// last blocks the two sums of the same fractions may differ in their last
// bits: a relative 1e-12 (thousands of ulps of float64, and far below one
// pooled entry) allows that and nothing else.
func sameCount(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*max(math.Abs(a), math.Abs(b))
}

// sameLevels reports whether two rows' levels agree, nil meaning Full
// for each of the row's n entries.
func sameLevels(a, b []plan.Level, n int) bool {
	at := func(l []plan.Level, i int) plan.Level {
		if l == nil {
			return plan.Full
		}
		return l[i]
	}
	if (a != nil && len(a) != n) || (b != nil && len(b) != n) {
		return false
	}
	for i := range n {
		if at(a, i) != at(b, i) {
			return false
		}
	}
	return true
}

func runPlannerCase(ctx context.Context, e *cuda.Engine, r *rand.Rand, c PlannerCase) (chk PlannerCheck) {
	chk = PlannerCheck{PlannerCase: c}
	q, k, v, err := c.inputs(ctx, r)
	if err != nil {
		chk.Err = err
		return chk
	}
	t := plan.Tiling{Geometry: c.Case.Geometry(), Causal: c.Case.Causal, BlockQ: c.Case.BlockQ, BlockK: c.Case.BlockK}
	want, err := c.Planner.Plan(ctx, t, q, k, v)
	if err != nil {
		chk.Err = fmt.Errorf("cpu planner: %w", err)
		return chk
	}
	run, err := e.NewRunner(ctx, t, q.DType(), c.Planner)
	if err != nil {
		chk.Err = fmt.Errorf("device runner: %w", err)
		return chk
	}
	defer run.Close()
	var dev [3]*cuda.Tensor
	for i, h := range []*tensor.Tensor{q, k, v} {
		if dev[i], err = e.Upload(ctx, h); err != nil {
			chk.Err = err
			return chk
		}
		defer dev[i].Free()
	}
	out, rep, err := run.Run(ctx, dev[0], dev[1], dev[2], nil)
	if err != nil {
		chk.Err = fmt.Errorf("device run: %w", err)
		return chk
	}
	defer out.Free()
	chk.PlanMS, chk.GPU = rep.PlanMS, rep.Stats
	got, err := run.DownloadPlan(ctx)
	if err != nil {
		chk.Err = err
		return chk
	}
	// A dense runner may run wider blocks than asked (the default 128-key
	// tiles, Tactics.DenseNarrowTiles); its plan is then the CPU planner's
	// at those blocks, and its counters are restated in the asked ones.
	rowsWant := want
	if kt := run.KernelTiling(); kt != t {
		if rowsWant, err = c.Planner.Plan(ctx, kt, q, k, v); err != nil {
			chk.Err = fmt.Errorf("cpu planner at the kernel's tiling: %w", err)
			return chk
		}
	}
	chk.Rows = rowsWant.Rows()
	judge := tieBreakFor(c.Planner, t, q, k)
	lj := levelTieBreakFor(c.Planner, t, q, k)
	if aj := autoTieBreak(c.Planner, t, q, k, want); aj != nil {
		lj = aj
	}
	for row := range chk.Rows {
		a, la := rowsWant.Entries(row)
		b, lb := got.Entries(row)
		if slices.Equal(a, b) && sameLevels(la, lb, len(a)) {
			continue
		}
		if lj != nil {
			if lb == nil {
				lb = make([]plan.Level, len(b))
				for i := range lb {
					lb[i] = plan.Full
				}
			}
			if err := lj(ctx, row, b, lb); err != nil {
				chk.Err = fmt.Errorf("plan row %d differs from the CPU planner's beyond the documented tie-break: %w", row, err)
				return chk
			}
			chk.RowsTied++
			continue
		}
		if judge == nil {
			chk.RowsDiffer++
			continue
		}
		if err := judge(ctx, row, a, b); err != nil {
			chk.Err = fmt.Errorf("plan row %d differs from the CPU planner's beyond the documented tie-break: %w", row, err)
			return chk
		}
		chk.RowsTied++
	}
	chk.OrdersDiffer = ordersDiffer(want, got)
	if chk.RowsTied > 0 {
		// The rows differ only at the tie-break: the CPU executor runs the
		// device's plan, so counters and output still check the executor.
		want = got
	}
	// The CPU runs on the inputs the GPU saw: float32 ones rounded to bf16.
	cq, ck, cv := q, k, v
	if c.Case.DType == tensor.Float32 {
		for _, x := range []**tensor.Tensor{&cq, &ck, &cv} {
			if *x, err = (*x).Convert(tensor.BFloat16, (*x).Layout()); err != nil {
				chk.Err = err
				return chk
			}
		}
	}
	ref, cs, err := cpu.Executor{}.Run(ctx, want, cq, ck, cv, nil)
	if err != nil {
		chk.Err = fmt.Errorf("cpu run: %w", err)
		return chk
	}
	chk.CPU = cs
	host, err := out.Download(ctx)
	if err != nil {
		chk.Err = err
		return chk
	}
	if chk.Errors, err = metrics.CompareTensors(ref, host); err != nil {
		chk.Err = err
		return chk
	}
	tol := cuda.TolBF16
	if c.Case.DType == tensor.Float16 {
		tol = cuda.TolF16
	}
	switch {
	case chk.RowsDiffer > 0:
		chk.Err = fmt.Errorf("%d of %d plan rows differ from the CPU planner's", chk.RowsDiffer, chk.Rows)
	case chk.OrdersDiffer > 0:
		chk.Err = fmt.Errorf("%d token orders, Init plans or stop rules differ from the CPU planner's", chk.OrdersDiffer)
	case !sameCount(chk.GPU.QKBlocks, chk.CPU.QKBlocks) || !sameCount(chk.GPU.PVBlocks, chk.CPU.PVBlocks) || chk.GPU.DenseBlocks != chk.CPU.DenseBlocks:
		chk.Err = fmt.Errorf("counters: GPU QK %v PV %v of %v, CPU QK %v PV %v of %v", chk.GPU.QKBlocks, chk.GPU.PVBlocks, chk.GPU.DenseBlocks, chk.CPU.QKBlocks, chk.CPU.PVBlocks, chk.CPU.DenseBlocks)
	case !(chk.Errors.RelL1 <= tol):
		chk.Err = fmt.Errorf("rel L1 %.3g above %.3g", chk.Errors.RelL1, tol)
	}
	return chk
}
