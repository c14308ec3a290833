package selftest

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// oraclePlanners are the oracle configurations the device planner is
// checked with: the default CDF, a tight one and keep-everything.
func oraclePlanners() []plan.Planner {
	return []plan.Planner{oracle.Planner{CDF: 0.95}, oracle.Planner{CDF: 0.5}, oracle.Planner{CDF: 1}}
}

// rowJudge accepts a plan row in which the device and CPU planners differ
// by a documented tie-break, or says why the difference is a defect.
type rowJudge func(ctx context.Context, row int, cpuRow, gpuRow []int32) error

// tieBreakFor returns the judge of planners whose device plans may differ
// from the CPU's at a documented tie-break, or nil when plans must be
// identical. Each method's cases file supplies its own judge.
func tieBreakFor(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) rowJudge {
	for _, judge := range []func(plan.Planner, plan.Tiling, *tensor.Tensor, *tensor.Tensor) rowJudge{
		oracleTieBreak, xattnTieBreak, unisparseTieBreak, flexprefillTieBreak, minferenceTieBreak, spargeTieBreak,
	} {
		if j := judge(p, t, q, k); j != nil {
			return j
		}
	}
	return nil
}

// oracleTieBreak judges the oracle's rows: TopCdf sets under a perturbation
// of the exact masses.
func oracleTieBreak(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) rowJudge {
	o, ok := p.(oracle.Planner)
	if !ok {
		return nil
	}
	// The device sums the logits in another order (and splits float32
	// operands into two bf16 halves), so its masses differ from the CPU's by
	// about 1e-6 relative (1e-5 for float32 inputs): tol bounds that with
	// a margin of ten.
	tol := 1e-5
	if q.DType() == tensor.Float32 {
		tol = 1e-4
	}
	masses := map[int][][]float64{} // by b·Hq + h
	g := t.Geometry
	qBlocks := (g.Nq + t.BlockQ - 1) / t.BlockQ
	return func(ctx context.Context, row int, cpuRow, gpuRow []int32) error {
		bh, qb := row/qBlocks, row%qBlocks
		m, ok := masses[bh]
		if !ok {
			var err error
			if m, err = oracle.BlockMass(ctx, t, q, k, bh/g.Hq, bh%g.Hq); err != nil {
				return err
			}
			masses[bh] = m
		}
		return topCDFWithin(m[qb], gpuRow, o.CDF, tol)
	}
}

// topCDFWithin reports whether kept is a TopCdf set of mass under a
// perturbation of the masses by tol: it holds at least cdf − tol of the
// mass, it would fall below cdf + tol without its lightest block, and no
// block left out outweighs a kept one by more than tol. That is what the
// device oracle's plan must satisfy when it differs from the CPU's.
func topCDFWithin(mass []float64, kept []int32, cdf, tol float64) error {
	if len(kept) == 0 {
		return fmt.Errorf("no block kept")
	}
	return thresholdWithin(mass, kept, nil, cdf, tol)
}

// thresholdWithin reports whether kept is what a cumulative-share
// selection keeps from mass — the forced blocks, then the heaviest others
// until the kept mass reaches thr — under a perturbation of the masses by
// tol: kept holds every forced block and at least thr − tol of the mass,
// it would fall below thr + tol without its lightest unforced block, and
// no unforced block left out outweighs an unforced kept one by more than
// tol. The oracle's TopCdf, XAttention's threshold and UniSparse's Top-P
// are such selections.
func thresholdWithin(mass []float64, kept, forced []int32, thr, tol float64) error {
	var sum float64
	lightest, heaviestOut := math.Inf(1), 0.0
	for _, kb := range forced {
		if !slices.Contains(kept, kb) {
			return fmt.Errorf("forced block %d not kept", kb)
		}
	}
	for _, kb := range kept {
		if int(kb) >= len(mass) || kb < 0 {
			return fmt.Errorf("block %d kept of %d visible", kb, len(mass))
		}
		sum += mass[kb]
		if !slices.Contains(forced, kb) {
			lightest = min(lightest, mass[kb])
		}
	}
	for kb, m := range mass {
		if !slices.Contains(kept, int32(kb)) {
			heaviestOut = max(heaviestOut, m)
		}
	}
	switch {
	case sum < thr-tol:
		return fmt.Errorf("kept mass %.9f below the threshold %.9f", sum, thr)
	case !math.IsInf(lightest, 1) && sum-lightest >= thr+tol:
		return fmt.Errorf("kept mass %.9f reaches the threshold %.9f without its lightest block (%.3g)", sum, thr, lightest)
	case heaviestOut > lightest+tol:
		return fmt.Errorf("a block of mass %.3g left out while one of %.3g is kept", heaviestOut, lightest)
	}
	return nil
}
