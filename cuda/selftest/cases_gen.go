package selftest

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// GenCase is a self-test case for the gathering kernel: a shape and a
// plan with pooled levels (PSA), token orders, a stop rule or an Init
// plan (S2O), built from the case's inputs.
type GenCase struct {
	cuda.Case
	// Build returns the plan for tiling t and the case's inputs.
	Build func(r *rand.Rand, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error)
	// WantStop requires the CPU to stop some row early: a case that never
	// stops cannot tell a broken stop rule from a working one.
	WantStop bool
}

// RunGen runs each case as Run does: GPU against the CPU executor on
// fresh random inputs, outputs within the 16-bit tolerance and counters
// equal (rows stopped early included).
func RunGen(ctx context.Context, e *cuda.Engine, r *rand.Rand, cases []GenCase, report func(Check)) (failed int, err error) {
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return failed, err
		}
		build := func(t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) { return c.Build(r, t, q, k, v) }
		chk := runPlan(ctx, e, r, c.Case, build, true)
		if chk.Err == nil && c.WantStop && chk.CPU.Stopped == 0 {
			chk.Err = fmt.Errorf("no row stopped early: the case does not test the stop rule")
		}
		if chk.Err != nil {
			failed++
		}
		report(chk)
	}
	return failed, nil
}

// GenCases is the gathering kernel's suite: PSA plans from the planner
// (both estimators, both rules, the similarity cap, up to 8 levels) and
// random level mixes with skipped blocks; S2O plans (two-pass with Q_perm,
// the fused single pass, no stop (s2o.NoStop), a stop after the first
// ranked block) and
// random token orders that move every token; ragged N, GQA, causal and
// not, D 64 and 128, BlockK 64 to 256 (the Hopper kernel's 128-key tiles
// at 128 and 256), bf16 and f16. The cases marked
// "ws:" cover the warp-specialized Hopper kernel's paths (128-row blocks)
// that the others leave out: two passes, stops (one as early as the
// first entry), gathers on a block shorter than one tile, and tiles
// packed with pooled and full slots.
func GenCases() []GenCase {
	bf, f16 := tensor.BFloat16, tensor.Float16
	bhnd, bnhd := tensor.BHND, tensor.BNHD
	shape := func(name string, hq, hkv, n, d int, dt tensor.DType, l tensor.Layout, causal bool, bq, bk int) cuda.Case {
		return cuda.Case{Name: name, B: 1, Hq: hq, Hkv: hkv, Nq: n, Nk: n, D: d, Dv: d, DType: dt, Layout: l, Causal: causal, BlockQ: bq, BlockK: bk, Density: 1}
	}
	// many is shape with B batches: enough rows (over 132, an H100's
	// multiprocessors) that the persistent kernel's CTAs take several.
	many := func(name string, b, hq, hkv, n, d int, dt tensor.DType, causal bool, bk int) cuda.Case {
		c := shape(name, hq, hkv, n, d, dt, bhnd, causal, 128, bk)
		c.B = b
		return c
	}
	byPSA := func(p psa.Planner) func(*rand.Rand, plan.Tiling, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) (*plan.Plan, error) {
		return func(_ *rand.Rand, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
			return p.Plan(context.Background(), t, q, k, v)
		}
	}
	byS2O := func(p s2o.Planner) func(*rand.Rand, plan.Tiling, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) (*plan.Plan, error) {
		return func(_ *rand.Rand, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
			return p.Plan(context.Background(), t, q, k, v)
		}
	}
	eight := []float64{0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98}
	return []GenCase{
		{Case: shape("psa sampling GQA causal N=1000", 4, 2, 1000, 128, bf, bhnd, true, 128, 64), Build: byPSA(psa.Planner{Scale: 1})},
		{Case: shape("psa antidiag quantile sim f16 D64", 2, 2, 777, 64, f16, bhnd, false, 64, 64),
			Build: byPSA(psa.Planner{Estimator: psa.Antidiagonal, Rule: psa.Quantile, Similarity: []float64{0.1, 0.2, 0.3}, Scale: 1})},
		{Case: shape("psa 8 levels BlockK 128 causal", 2, 1, 1500, 128, bf, bnhd, true, 128, 128), Build: byPSA(psa.Planner{Thresholds: eight, Scale: 1})},
		{Case: shape("levels random 1..8 + skip, causal", 2, 2, 1000, 128, bf, bhnd, true, 64, 64), Build: randomLevels(8, 0.2)},
		{Case: shape("levels random BlockK 192 non-causal D64", 3, 1, 1000, 64, bf, bhnd, false, 128, 192), Build: randomLevels(5, 0.1)},
		{Case: shape("levels all pooled or skipped, f16", 2, 2, 640, 128, f16, bhnd, false, 64, 64), Build: randomLevels(-4, 0.3)},
		{Case: shape("s2o two-pass GQA causal N=1000", 4, 2, 1000, 128, bf, bhnd, true, 64, 64), Build: byS2O(s2o.Planner{Segment: 256, Tau: 0.005, Window: 64, QueryPerm: true})},
		{Case: shape("s2o fused non-causal D64", 2, 1, 700, 64, bf, bhnd, false, 64, 64), Build: byS2O(s2o.Planner{Segment: 128, Tau: 0.02})},
		{Case: shape("s2o no stop exact, BlockK 128", 2, 2, 1024, 64, f16, bnhd, true, 128, 128), Build: byS2O(s2o.Planner{Segment: 256, Tau: s2o.NoStop, QueryPerm: true})},
		{Case: shape("s2o stop after the first block", 2, 2, 1024, 128, bf, bhnd, true, 64, 64), Build: byS2O(s2o.Planner{Segment: 512, Tau: 0.9, QueryPerm: true}), WantStop: true},
		{Case: shape("orders moving every token", 2, 1, 900, 128, bf, bhnd, false, 128, 64), Build: randomOrders(0, 0, 0)},
		{Case: shape("orders causal with stop, D64", 4, 2, 777, 64, bf, bhnd, true, 64, 64), Build: randomOrders(0.8, 1, 0), WantStop: true},
		// 128-row blocks: on Hopper the warp-specialized kernel's paths.
		{Case: shape("ws: s2o two-pass GQA causal", 4, 2, 1000, 128, bf, bhnd, true, 128, 64), Build: byS2O(s2o.Planner{Segment: 256, Tau: 0.005, Window: 64, QueryPerm: true})},
		{Case: shape("ws: s2o stop after the first block", 2, 2, 1024, 128, bf, bhnd, true, 128, 64), Build: byS2O(s2o.Planner{Segment: 512, Tau: 0.9, QueryPerm: true}), WantStop: true},
		{Case: shape("ws: s2o fused non-causal D64 BNHD", 2, 1, 700, 64, bf, bnhd, false, 128, 64), Build: byS2O(s2o.Planner{Segment: 128, Tau: 0.02})},
		{Case: shape("ws: orders causal stop at once, f16 D64", 4, 2, 777, 64, f16, bnhd, true, 128, 64), Build: randomOrders(0.8, 0, 0), WantStop: true},
		{Case: shape("ws: orders causal BlockK 128, N below a block", 2, 2, 100, 128, bf, bhnd, true, 128, 128), Build: randomOrders(0, 0, 0)},
		// Two tiles an entry: the stop vote comes every other tile, and the
		// tile after a stopped entry is the first of the next one.
		{Case: shape("ws: s2o stops, BlockK 128", 2, 2, 2048, 128, bf, bhnd, true, 128, 128), Build: byS2O(s2o.Planner{Segment: 512, Tau: 0.3, QueryPerm: true}), WantStop: true},
		{Case: shape("ws: levels mixed in tiles, f16 D64 causal", 2, 1, 1000, 64, f16, bhnd, true, 128, 128), Build: randomLevels(8, 0.2)},
		{Case: shape("ws: levels pooled only, BlockK 64", 3, 3, 900, 128, bf, bhnd, false, 128, 64), Build: randomLevels(-3, 0.1)},
		// Several rows a CTA: the persistent grid's hand-over between rows
		// (stops drained, rows without tiles after a stop, two passes'
		// tickets, level set-ups run ahead).
		{Case: many("ws: rows a CTA, stops and empty rows, D64", 4, 8, 2, 1500, 64, bf, true, 64), Build: randomOrders(0.8, 1, 4), WantStop: true},
		{Case: many("ws: rows a CTA, orders BlockK 128, f16", 3, 8, 4, 1200, 128, f16, false, 128), Build: randomOrders(0, 0, 5)},
		{Case: many("ws: rows a CTA, stops BlockK 128, D64", 3, 8, 2, 1500, 64, bf, true, 128), Build: randomOrders(0.5, 1, 4), WantStop: true},
		{Case: many("ws: rows a CTA, s2o two-pass", 2, 8, 2, 2000, 128, bf, true, 64), Build: byS2O(s2o.Planner{Segment: 256, Tau: 0.005, Window: 64, QueryPerm: true})},
		// 128-key tiles two to an entry (BlockK 256): the vote every other
		// wide tile, ragged N, GQA.
		{Case: many("ws: rows a CTA, stops BlockK 256", 2, 8, 2, 2100, 128, bf, true, 256), Build: randomOrders(0.5, 1, 4), WantStop: true},
		{Case: shape("ws: s2o fused, BlockK 128 non-causal D64", 2, 1, 1700, 64, bf, bnhd, false, 128, 128), Build: byS2O(s2o.Planner{Segment: 256, Tau: 0.05})},
		{Case: many("ws: rows a CTA, levels mixed", 4, 4, 1, 2100, 128, bf, true, 64), Build: randomLevels(6, 0.3)},
	}
}

// randomLevels plans each visible block at a random level: Full on
// blocks that need causal masking, else Skip with probability skip and
// otherwise a level in 1..|top| (2..|top| when top < 0: nothing Full off
// the diagonal).
func randomLevels(top int, skip float64) func(*rand.Rand, plan.Tiling, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) (*plan.Plan, error) {
	return func(r *rand.Rand, t plan.Tiling, _, _, _ *tensor.Tensor) (*plan.Plan, error) {
		lo, hi := 1, top
		if top < 0 {
			lo, hi = 2, -top
		}
		b, err := plan.NewBuilder(t)
		if err != nil {
			return nil, err
		}
		probe := plan.Plan{Tiling: t}
		g := t.Geometry
		for bi := range g.B {
			for h := range g.Hq {
				for qb := range probe.QBlocks() {
					row := probe.Row(bi, h, qb)
					for _, kb := range r.Perm(probe.KBlocks()) { // any visiting order
						vis, partial := probe.BlockVisibility(qb, kb)
						switch {
						case !vis:
						case partial:
							b.Add(row, kb, plan.Full)
						case r.Float64() < skip:
							b.Add(row, kb, plan.Skip)
						default:
							b.Add(row, kb, plan.Level(lo+r.IntN(hi-lo+1)))
						}
					}
				}
			}
		}
		return b.Build()
	}
}

// randomOrders plans with random token orders: per head a query order
// and a key order that are single cycles (no token stays in place; the
// key order leaves out 37 tokens, so its last block is short), a third of
// the rows on natural keys, and each row a random half of its order's
// blocks in random order; with empty > 0, every empty-th row none. tau >
// 0 adds a stop rule after the first `after` entries.
func randomOrders(tau float32, after, empty int) func(*rand.Rand, plan.Tiling, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) (*plan.Plan, error) {
	return func(r *rand.Rand, t plan.Tiling, _, _, _ *tensor.Tensor) (*plan.Plan, error) {
		g := t.Geometry
		probe := plan.Plan{Tiling: t}
		heads := g.B * g.Hq
		o := &plan.TokenOrder{Query: make([]int32, 0, heads*g.Nq), KVStart: []int{0}, RowKV: make([]int32, probe.Rows())}
		klen := g.Nk - 37
		for range heads {
			o.Query = append(o.Query, cycle(r, g.Nq)...)
			o.KV = append(o.KV, cycle(r, g.Nk)[:klen]...)
			o.KVStart = append(o.KVStart, len(o.KV))
		}
		b, err := plan.NewBuilder(t)
		if err != nil {
			return nil, err
		}
		for i := range heads {
			for qb := range probe.QBlocks() {
				row := i*probe.QBlocks() + qb
				n := (klen + t.BlockK - 1) / t.BlockK
				o.RowKV[row] = int32(i)
				if qb%3 == 1 {
					o.RowKV[row], n = -1, probe.KBlocks()
				}
				perm := r.Perm(n)
				if empty > 0 && row%empty == empty-1 {
					perm = nil
				}
				for _, kb := range perm[:min(len(perm), max(1, n/2))] {
					b.Add(row, kb, plan.Full)
				}
			}
		}
		b.SetOrder(o)
		if tau > 0 {
			b.SetStop(&plan.StopRule{Tau: tau, After: after})
		}
		return b.Build()
	}
}

// cycle returns a random permutation of 0..n-1 that is a single n-cycle:
// π(σ(i)) = σ(i+1 mod n) for a random σ, so that no token stays in place.
func cycle(r *rand.Rand, n int) []int32 {
	sigma := r.Perm(n)
	pi := make([]int32, n)
	for i := range n {
		pi[sigma[i]] = int32(sigma[(i+1)%n])
	}
	return pi
}
