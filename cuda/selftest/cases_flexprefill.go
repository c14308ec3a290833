package selftest

import (
	"context"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// flexprefillPlanners are the flexprefill configurations the device
// planner is checked with: the S2O paper's γ=0.9 τ=0.1, every head
// vertical-slash (flexprefill.NoQueryAware), every head query-aware (τ=1 exceeds the largest
// square-root JS divergence, √ln2), and bounded budgets.
func flexprefillPlanners() []plan.Planner {
	return []plan.Planner{
		flexprefill.Planner{Gamma: 0.9, Tau: 0.1},
		flexprefill.Planner{Gamma: 0.95, Tau: flexprefill.NoQueryAware},
		flexprefill.Planner{Gamma: 0.9, Tau: 1},
		flexprefill.Planner{Gamma: 0.8, Tau: 0.3, MinBudget: 2, MaxBudget: 8},
	}
}

// flexprefillTieBreak judges flexprefill rows. The device scores the probe
// lines on the tensor cores (off by at most probeTol relative); everything
// after is computed as on the CPU, so a row may differ only where that
// perturbation of the exact scores (flexprefill.Planner.Scores) can change
// a decision: the γ-cover line counts (hence the vertical and slash
// budgets), the kept vertical blocks and block diagonals at their top-k
// boundary, and the head's pattern when its JS divergence lies within the
// perturbation's bound of τ² (then either pattern passes). The query-aware
// blocks are computed from the exact inputs on both sides and must match.
func flexprefillTieBreak(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) rowJudge {
	f, ok := p.(flexprefill.Planner)
	if !ok {
		return nil
	}
	g := t.Geometry
	dense, err := plan.Dense(t)
	if err != nil {
		return func(context.Context, int, []int32, []int32) error { return err }
	}
	heads := map[int][]fpBounds{}
	return func(_ context.Context, row int, _, gpuRow []int32) error {
		bh, qb := row/dense.QBlocks(), row%dense.QBlocks()
		bds, ok := heads[bh]
		if !ok {
			b, h := bh/g.Hq, bh%g.Hq
			rel, abs := probeTol(t, q, k, b, h, t.BlockQ)
			bds = fpJudge{f.Resolve()}.bounds(dense, f.Scores(dense, q, k, b, h), rel, abs)
			heads[bh] = bds
		}
		visible, _ := dense.Entries(row)
		for _, bd := range bds {
			if between(bd.lower.Row(dense, qb, visible), gpuRow, bd.upper.Row(dense, qb, visible)) {
				return nil
			}
		}
		return fmt.Errorf("blocks %v outside the tie-break bounds of every pattern the head may take (%d)", gpuRow, len(bds))
	}
}

// fpBounds are one pattern's rows: the lower Head keeps what every
// perturbation keeps, the upper what some perturbation keeps.
type fpBounds struct{ lower, upper flexprefill.Head }

// bounds returns the bounds of each pattern the head may take when its
// line scores are off by rel (relative) and abs (absolute, per line).
func (f fpJudge) bounds(dense *plan.Plan, s flexprefill.Scores, rel, abs float64) []fpBounds {
	g := dense.Geometry
	bk, nkb := dense.BlockK, dense.KBlocks()
	clamp := func(n int) int {
		lo, hi := max(f.MinBudget, 1), nkb
		if f.MaxBudget > 0 {
			hi = min(hi, f.MaxBudget)
		}
		return min(max(n, lo), max(hi, lo))
	}
	// γ-cover counts of the lines (every line a candidate); 2⁻⁵⁰ covers the
	// fixed-point truncation of the exact counts.
	lines := func(x []float64) []scored {
		out := make([]scored, len(x))
		for i, v := range x {
			lo, hi := widen(v, rel, abs+0x1p-50)
			out[i] = scored{lo: lo, hi: hi, cand: sureCand}
		}
		return out
	}
	vSure, vMaybe := coverBounds(lines(s.Vertical), f.Gamma)
	sSure, sMaybe := coverBounds(lines(s.Slash), f.Gamma)
	type budget struct{ vLo, vHi, sLo, sHi int }
	vs := budget{clamp(count(vSure)/bk + 1), clamp(count(vMaybe)/bk + 1), clamp(count(sSure)/bk + 1), clamp(count(sMaybe)/bk + 1)}
	qa := budget{clamp(0), clamp(0), clamp(0), clamp(0)}

	// The pattern: the distance is compared with τ, the JS divergence with
	// τ² signed as τ (a negative τ, NoQueryAware, admits no distance);
	// jsTol bounds how far the JS divergence moves with the pooled verticals.
	js, tau2 := s.Distance*s.Distance, math.Copysign(f.Tau*f.Tau, f.Tau)
	tol := 1e-12 + jsTol(s.VB, rel, abs*float64(bk))
	var pats []budget
	var qaBlocks [][][]int
	if js-tol < tau2 {
		pats, qaBlocks = append(pats, qa), append(qaBlocks, s.QueryAware)
	}
	if js+tol >= tau2 {
		pats, qaBlocks = append(pats, vs), append(qaBlocks, nil)
	}

	// The pooled blocks and diagonals, block 0 and diagonal 0 forced.
	vb := make([]scored, nkb)
	for kb, x := range s.VB {
		lo, hi := widen(x, rel, abs*float64(bk))
		vb[kb] = scored{lo: lo, hi: hi, forced: kb == 0, cand: sureCand}
	}
	smin := floorDiv(-(g.Nk - 1), bk)
	sb := make([]scored, (g.Nk-1)/bk-smin+1)
	for i := range sb {
		d := smin + i
		lo, hi := widen(s.SB[d], rel, abs*float64(bk))
		it := scored{lo: lo, hi: hi, forced: d == 0, cand: maybeCand}
		// A diagonal is a candidate when one of its lines has mass: surely
		// when one's lower end is positive, never when all are masked.
		masked := true
		for o := max(d*bk, -(g.Nk - 1)); o <= min(d*bk+bk-1, g.Nk-1); o++ {
			if l, _ := widen(s.Slash[o+g.Nk-1], rel, abs); l > 0 {
				it.cand = sureCand
			}
			masked = masked && dense.Causal && o < 0
		}
		if d == 0 {
			it.cand = sureCand
		} else if masked {
			it.cand = notCand
		}
		sb[i] = it
	}
	var out []fpBounds
	for i, b := range pats {
		vS, vM := topKBounds(vb, b.vLo, b.vHi)
		sS, sM := topKBounds(sb, b.sLo, b.sHi)
		out = append(out, fpBounds{
			lower: flexprefill.Head{Vertical: pick(vS, 0), Slash: pick(sS, smin), Blocks: qaBlocks[i]},
			upper: flexprefill.Head{Vertical: pick(vM, 0), Slash: pick(sM, smin), Blocks: qaBlocks[i]},
		})
	}
	return out
}

// fpJudge is the planner whose rows flexprefillTieBreak judges.
type fpJudge struct{ flexprefill.Planner }

// jsTol bounds the change of the JS divergence when each q[i] (the
// probe's pooled verticals) moves by at most rel·q[i] + abs and the
// estimate p stays: ∂JS/∂q_i = ½·ln(2q_i/(p_i+q_i)) lies within ½(ln 2 +
// |ln q_i|) (p_i + q_i ≤ 2), so a term moves by at most δ·½(ln 2 + |ln
// q_min|) over an interval [q_min, q_min+2δ] with q_min > 0, and by at
// most ½δ'(ln 2 + 1 + |ln δ'|) over [0, δ'] (the integral of the same
// bound). The sum is doubled for margin.
func jsTol(q []float64, rel, abs float64) float64 {
	var t float64
	for _, x := range q {
		d := rel*x + abs
		if lo := x - d; lo > 0 {
			t += d * 0.5 * (math.Ln2 + math.Abs(math.Log(lo)))
		} else {
			w := x + d
			t += 0.5 * w * (math.Ln2 + 1 + math.Abs(math.Log(w)))
		}
	}
	return 2 * t
}

func floorDiv(a, b int) int {
	if a >= 0 {
		return a / b
	}
	return -((-a + b - 1) / b)
}
