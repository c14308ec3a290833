package psa

import "github.com/sparseattn/sparseattn/plan"

// Budget is the compute budget a run really spent: the fraction of a dense
// causal-aware pass's QKᵀ and P̃V block products the executor computed,
// (QK + PV)/(2·Dense) = 1 − s.Sparsity(). The executor counts a level-h
// block as 1/2^(h-1) of a product, so this is PSA's FLOP-equivalent budget
// (§3.4, Eq. 9): the share of blocks an equal-cost binary mask would keep.
// The paper's reported "sparsity" is 1 − Budget. Zero stats give 0.
func Budget(s plan.Stats) float64 {
	if s.DenseBlocks == 0 {
		return 0
	}
	return (s.QKBlocks + s.PVBlocks) / (2 * s.DenseBlocks)
}

// PlanBudget is the budget PSA Eq. 9 assigns to a plan from its levels
// alone, without running it: the mean over causally visible (batch, head,
// query block, KV block) cells of ρ = 0 for a skipped block and the fraction
// of the block's keys its level scores otherwise — 1/2^(h-1) at level h for
// a full block, ⌈n/2^(h-1)⌉/n for a ragged last block of n keys, exactly as
// the cpu executor counts. For a plan the executor runs without a stop rule
// or λ filter it equals Budget of the run's Stats.
func PlanBudget(p *plan.Plan) float64 {
	dense := p.DenseBlocks()
	if dense == 0 {
		return 0
	}
	var work float64
	for i, kb := range p.KVBlock {
		lv := p.LevelAt(i)
		if lv == plan.Skip {
			continue
		}
		lo, hi := p.KeyRange(int(kb))
		n := hi - lo
		pool := lv.Pool()
		work += float64((n+pool-1)/pool) / float64(n)
	}
	return work / float64(dense)
}

// Coverage is the fraction of causally visible (batch, head, query block,
// KV block) cells a plan reads at any level: how much of the context each
// query sees. A binary mask's coverage equals its budget; PSA's exceeds it
// (the paper's Figure 1: 70% of KV blocks seen at a 20% budget).
func Coverage(p *plan.Plan) float64 {
	dense := p.DenseBlocks()
	if dense == 0 {
		return 0
	}
	var n int
	for i := range p.KVBlock {
		if p.LevelAt(i) != plan.Skip {
			n++
		}
	}
	return float64(n) / float64(dense)
}
