// Package plan defines the one sparse-attention plan format that every
// method produces and every executor consumes.
//
// A Plan tiles the attention matrix into BlockQ×BlockK blocks. For each
// (batch, query head, query block) it holds an ordered list of KV blocks to
// visit, each with a Level, stored CSR-style like flex_attention's
// kv_num_blocks/kv_indices:
//
//	row r = (b·Hq + h)·QBlocks + qb
//	entries RowStart[r] .. RowStart[r+1]-1 of KVBlock and Level
//
// Level 0 skips a block, level 1 computes it exactly, and level h > 1 reads
// the block's keys and values average-pooled by 2^(h-1) tokens (PSA's
// pyramid). Optional parts leave room for the other methods without a
// redesign: Filter (SpargeAttn's per-row-group λ skip of P̃V), Order (S2O's
// token index arrays) and Stop (S2O's early-stop rule).
//
// Plans say what to compute; executors decide how. A planner never needs to
// know whether the plan runs on the CPU or a GPU.
package plan

import (
	"errors"
)

// ErrInvalid is wrapped by every validation error of this package.
var ErrInvalid = errors.New("plan: invalid")

// Level says how one KV block is computed for one query block. A pooled key
// standing for c tokens gets the logit bias ln c, (h−1)·ln 2 for a full group
// (PSA §3, pyramid attention), so that it weighs as the c keys it replaces.
type Level uint8

const (
	// Skip leaves the block out.
	Skip Level = 0
	// Full computes the block exactly.
	Full Level = 1
	// MaxLevel is the coarsest pyramid level: KV pooled by 2^(MaxLevel-1).
	MaxLevel Level = 8
)

// Pool is the number of tokens one pooled KV entry stands for: 2^(l-1).
func (l Level) Pool() int {
	if l == Skip {
		return 0
	}
	return 1 << (l - 1)
}

// Filter is SpargeAttn's second-stage filter (SpargeAttn §3.4): inside a
// visited block, a group of RowGroup query rows skips its P̃V product when
// max over the group of (local row max − running row max) < λ, where λ is
// HeadLambda[h] for query head h when HeadLambda is set, else Lambda.
type Filter struct {
	Lambda   float32 // negative; e.g. -5 skips blocks whose weights are all below e^-5 of the running max
	RowGroup int     // rows per group, dividing BlockQ (a GPU warp's share, e.g. 16)
	// HeadLambda, when non-nil, holds one λ per query head (len Hq) and
	// overrides Lambda, as a per-head tuned profile needs. Entries are
	// negative; −Inf switches the filter off for that head.
	HeadLambda []float32
}

// LambdaFor is the λ that applies to query head h.
func (f *Filter) LambdaFor(h int) float32 {
	if f.HeadLambda != nil {
		return f.HeadLambda[h]
	}
	return f.Lambda
}

// TokenOrder lets a plan visit tokens in a permuted order without moving
// data (S2O §3.2, online permutation via index arrays). Block indices of a
// row then refer to blocks of positions in the permuted order, and causal
// masking uses the original token indices.
type TokenOrder struct {
	// Query maps permuted query positions to tokens: for head row
	// i = b·Hq + h, Query[i·Nq + p] is the token at position p. Nil means
	// the natural order. Each head row must be a permutation of 0..Nq-1.
	Query []int32
	// KV holds the key orders, concatenated; order o is
	// KV[KVStart[o]:KVStart[o+1]], a list of distinct key tokens.
	KV      []int32
	KVStart []int
	// RowKV selects, for each plan row, the key order its KV block indices
	// refer to, or -1 for the natural order. Nil means natural everywhere.
	RowKV []int32
}

// StopRule is S2O's monotone-gain early stop (S2O §3.2, Alg. 3): after the
// first After entries of a row, the row ends after the first KV block whose
// gain in the softmax normalizer, Δℓ, is below Tau·ℓ for every query of the
// block. That block, already computed, is kept and counted.
type StopRule struct {
	Tau   float32 // in (0, 1); S2O uses 0.005
	After int     // entries always computed before the rule applies
	// RowAfter, when not nil, gives each row its own After (one entry per
	// plan row), overriding After: S2O's dense pass-1 window covers a
	// different number of blocks in each query block (S2O Alg. 4).
	RowAfter []int32
}

// AfterRow is the number of entries of row r always computed before the
// rule applies.
func (s *StopRule) AfterRow(r int) int {
	if s.RowAfter != nil {
		return int(s.RowAfter[r])
	}
	return s.After
}

// Plan is a block-sparse attention plan. Build one with Dense or a method's
// planner, then pass it to an executor. A Plan is read-only once built and
// may be shared between goroutines.
type Plan struct {
	Tiling

	RowStart []int   // len Rows()+1; row r's entries are [RowStart[r], RowStart[r+1])
	KVBlock  []int32 // KV block index of each entry, in visiting order
	Level    []Level // level of each entry; nil means Full everywhere

	Filter *Filter     // optional λ filter
	Order  *TokenOrder // optional token orders
	Stop   *StopRule   // optional early stop

	// Init, when set, is a plan with the same tiling that executors run
	// first. Its rows leave each query token's online-softmax state
	// (m, ℓ, acc) behind, and this plan's rows resume those states instead
	// of starting empty: S2O's two-pass execution (S2O §3.3, Alg. 2–3),
	// where pass 1 runs in natural query order and pass 2 in permuted
	// order. Init must not have an Init of its own. A key must not be
	// visited by both plans for the same query, or it counts twice.
	Init *Plan
}

// QBlocks is the number of query blocks, ⌈Nq/BlockQ⌉ (0 for a zero Plan).
func (p *Plan) QBlocks() int { return ceilDiv(p.Geometry.Nq, p.BlockQ) }

// KBlocks is the number of KV blocks, ⌈Nk/BlockK⌉ (0 for a zero Plan).
func (p *Plan) KBlocks() int { return ceilDiv(p.Geometry.Nk, p.BlockK) }

// Rows is the number of CSR rows, B·Hq·QBlocks.
func (p *Plan) Rows() int { return p.Geometry.B * p.Geometry.Hq * p.QBlocks() }

// Row returns the index of the CSR row for (b, h, qb).
func (p *Plan) Row(b, h, qb int) int { return (b*p.Geometry.Hq+h)*p.QBlocks() + qb }

// Entries returns row r's KV block indices and levels (levels is nil when
// the plan has no Level slice). The slices alias the plan.
func (p *Plan) Entries(r int) (blocks []int32, levels []Level) {
	lo, hi := p.RowStart[r], p.RowStart[r+1]
	if p.Level != nil {
		levels = p.Level[lo:hi]
	}
	return p.KVBlock[lo:hi], levels
}

// LevelAt is the level of entry i.
func (p *Plan) LevelAt(i int) Level {
	if p.Level == nil {
		return Full
	}
	return p.Level[i]
}

func ceilDiv(a, b int) int {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
