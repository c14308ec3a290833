package plan

import (
	"fmt"
	"math"
)

// Validate checks that the plan is well formed: CSR bounds, block indices in
// range and distinct within a row, levels in range, no fully future block
// in a causal plan, pooled levels only on blocks that need no masking, and
// well-formed optional parts. Executors call it before running.
func (p *Plan) Validate() error {
	if err := p.Tiling.check(); err != nil {
		return err
	}
	rows, kblocks := p.Rows(), p.KBlocks()
	if len(p.RowStart) != rows+1 || p.RowStart[0] != 0 || p.RowStart[rows] != len(p.KVBlock) {
		return fmt.Errorf("%w: RowStart must have %d entries from 0 to len(KVBlock)=%d", ErrInvalid, rows+1, len(p.KVBlock))
	}
	if p.Level != nil && len(p.Level) != len(p.KVBlock) {
		return fmt.Errorf("%w: Level has %d entries, KVBlock %d", ErrInvalid, len(p.Level), len(p.KVBlock))
	}
	for r := range rows {
		if p.RowStart[r] > p.RowStart[r+1] {
			return fmt.Errorf("%w: RowStart decreases at row %d", ErrInvalid, r)
		}
	}
	if err := p.Order.validate(p); err != nil {
		return err
	}
	seen := make([]int32, kblocks) // seen[kb] == r+1 when row r already lists kb
	for r := range rows {
		lo, hi := p.RowStart[r], p.RowStart[r+1]
		qb := r % p.QBlocks()
		natural := p.Order == nil || (p.Order.Query == nil && p.Order.kvOrder(r) < 0)
		limit := kblocks // blocks the row's key order has
		if ord := p.Order.kvOrder(r); ord >= 0 {
			limit = (p.Order.KVStart[ord+1] - p.Order.KVStart[ord] + p.BlockK - 1) / p.BlockK
		}
		for i := lo; i < hi; i++ {
			kb, lv := int(p.KVBlock[i]), p.LevelAt(i)
			if kb < 0 || kb >= limit {
				return fmt.Errorf("%w: row %d lists KV block %d of %d in its key order", ErrInvalid, r, kb, limit)
			}
			if seen[kb] == int32(r+1) {
				return fmt.Errorf("%w: row %d lists KV block %d twice", ErrInvalid, r, kb)
			}
			seen[kb] = int32(r + 1)
			if lv > MaxLevel {
				return fmt.Errorf("%w: level %d above MaxLevel %d", ErrInvalid, lv, MaxLevel)
			}
			if !natural && lv > Full {
				return fmt.Errorf("%w: row %d pools KV block %d, but pooled levels need the natural token order", ErrInvalid, r, kb)
			}
			if natural && p.Causal {
				anyVis, partial := p.BlockVisibility(qb, kb)
				if !anyVis {
					return fmt.Errorf("%w: row %d visits KV block %d, which is entirely in the future of query block %d", ErrInvalid, r, kb, qb)
				}
				if partial && lv > Full {
					return fmt.Errorf("%w: row %d pools KV block %d, which needs causal masking; diagonal blocks must be Full", ErrInvalid, r, kb)
				}
			}
		}
	}
	if f := p.Filter; f != nil {
		if f.HeadLambda == nil && (!(f.Lambda < 0) || math.IsInf(float64(f.Lambda), 0)) {
			return fmt.Errorf("%w: filter λ=%v must be negative and finite", ErrInvalid, f.Lambda)
		}
		if f.HeadLambda != nil && len(f.HeadLambda) != p.Geometry.Hq {
			return fmt.Errorf("%w: filter has %d per-head λ values, want one per query head (%d)", ErrInvalid, len(f.HeadLambda), p.Geometry.Hq)
		}
		for h, l := range f.HeadLambda {
			if !(l < 0) || math.IsInf(float64(l), 1) {
				return fmt.Errorf("%w: filter λ=%v of head %d must be negative (−Inf switches the head's filter off)", ErrInvalid, l, h)
			}
		}
		if f.RowGroup <= 0 || p.BlockQ%f.RowGroup != 0 {
			return fmt.Errorf("%w: filter row group %d must divide BlockQ %d", ErrInvalid, f.RowGroup, p.BlockQ)
		}
	}
	if in := p.Init; in != nil {
		if in.Tiling != p.Tiling {
			return fmt.Errorf("%w: Init plan's tiling %+v differs from the plan's %+v", ErrInvalid, in.Tiling, p.Tiling)
		}
		if in.Init != nil {
			return fmt.Errorf("%w: an Init plan must not have an Init of its own", ErrInvalid)
		}
		if err := in.Validate(); err != nil {
			return fmt.Errorf("Init plan: %w", err)
		}
	}
	if s := p.Stop; s != nil {
		if !(s.Tau > 0 && s.Tau < 1) || s.After < 0 {
			return fmt.Errorf("%w: stop rule τ=%v must be in (0,1) and After=%d non-negative", ErrInvalid, s.Tau, s.After)
		}
		if s.RowAfter != nil {
			if len(s.RowAfter) != rows {
				return fmt.Errorf("%w: stop rule RowAfter has %d entries, want one per row (%d)", ErrInvalid, len(s.RowAfter), rows)
			}
			for r, a := range s.RowAfter {
				if a < 0 {
					return fmt.Errorf("%w: stop rule RowAfter[%d]=%d must be non-negative", ErrInvalid, r, a)
				}
			}
		}
	}
	return nil
}

func (o *TokenOrder) kvOrder(r int) int {
	if o == nil || o.RowKV == nil {
		return -1
	}
	return int(o.RowKV[r])
}

func (o *TokenOrder) validate(p *Plan) error {
	if o == nil {
		return nil
	}
	g := p.Geometry
	if o.Query != nil {
		if len(o.Query) != g.B*g.Hq*g.Nq {
			return fmt.Errorf("%w: TokenOrder.Query has %d entries, want B·Hq·Nq=%d", ErrInvalid, len(o.Query), g.B*g.Hq*g.Nq)
		}
		mark := make([]int32, g.Nq)
		for i := range g.B * g.Hq {
			for _, t := range o.Query[i*g.Nq : (i+1)*g.Nq] {
				if t < 0 || int(t) >= g.Nq || mark[t] == int32(i+1) {
					return fmt.Errorf("%w: TokenOrder.Query head row %d is not a permutation of 0..%d", ErrInvalid, i, g.Nq-1)
				}
				mark[t] = int32(i + 1)
			}
		}
	}
	orders := len(o.KVStart) - 1
	if len(o.KVStart) == 0 {
		orders = 0
	} else if o.KVStart[0] != 0 || o.KVStart[orders] != len(o.KV) {
		return fmt.Errorf("%w: TokenOrder.KVStart must run from 0 to len(KV)=%d", ErrInvalid, len(o.KV))
	}
	for ord := range orders {
		if lo, hi := o.KVStart[ord], o.KVStart[ord+1]; lo > hi || hi > len(o.KV) {
			return fmt.Errorf("%w: key order %d has bounds [%d,%d) outside KV's %d tokens", ErrInvalid, ord, lo, hi, len(o.KV))
		}
	}
	mark := make([]int32, g.Nk)
	for ord := range orders {
		lo, hi := o.KVStart[ord], o.KVStart[ord+1]
		if hi-lo > g.Nk {
			return fmt.Errorf("%w: key order %d has bad bounds [%d,%d)", ErrInvalid, ord, lo, hi)
		}
		for _, t := range o.KV[lo:hi] {
			if t < 0 || int(t) >= g.Nk || mark[t] == int32(ord+1) {
				return fmt.Errorf("%w: key order %d repeats or leaves range at token %d", ErrInvalid, ord, t)
			}
			mark[t] = int32(ord + 1)
		}
	}
	if o.RowKV != nil {
		if len(o.RowKV) != p.Rows() {
			return fmt.Errorf("%w: TokenOrder.RowKV has %d entries, want %d rows", ErrInvalid, len(o.RowKV), p.Rows())
		}
		for r, ord := range o.RowKV {
			if ord < -1 || int(ord) >= orders {
				return fmt.Errorf("%w: row %d uses key order %d of %d", ErrInvalid, r, ord, orders)
			}
		}
	}
	return nil
}
