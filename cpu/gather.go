package cpu

import (
	"cmp"
	"slices"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// gathered is a worker's scratch for one KV block gathered by token index
// (S2O §3.2, coordinate-indexed loading): keys transposed to D×BlockK for
// the GEMM, values row-major.
type gathered struct {
	kT  []float32 // D×BlockK keys, row stride BlockK
	v   []float32 // BlockK×Dv values
	tok []int32   // token of each key
	row []float32 // BlockK×D staging rows for keys not stored as float32
}

// gather copies block kb of the row's key order (of the natural order when
// kvOrder < 0) of query head h in batch b into the tile's gathered block:
// whole rows, keys transposed eight at a time.
func (t *tile) gather(r *run, b, h, kb, kvOrder int) keyBlock {
	p, g := r.p, r.g
	kh := g.KVHead(h)
	if t.gat == nil {
		t.gat = &gathered{
			kT: make([]float32, g.D*p.BlockK), v: make([]float32, p.BlockK*g.Dv),
			tok: make([]int32, p.BlockK),
		}
	}
	if t.gat.row == nil && r.k.DType() != tensor.Float32 {
		t.gat.row = make([]float32, p.BlockK*g.D)
	}
	gt := t.gat
	var tokens []int32
	lo := kb * p.BlockK
	hi := lo + p.BlockK
	if kvOrder >= 0 {
		o := p.Order
		tokens = o.KV[o.KVStart[kvOrder]:o.KVStart[kvOrder+1]]
		hi = min(hi, len(tokens))
	} else {
		hi = min(hi, g.Nk)
	}
	n := max(hi-lo, 0)
	tok := gt.tok[:n]
	last := int32(-1)
	for j := range tok {
		x := int32(lo + j)
		if tokens != nil {
			x = tokens[lo+j]
		}
		tok[j] = x
		last = max(last, x)
	}
	kf := r.k.Float32s()
	var rows [8][]float32
	for j0 := 0; j0 < n; j0 += 8 {
		m := min(8, n-j0)
		for i := range m {
			j := int(tok[j0+i])
			if kf != nil {
				off := r.k.RowOffset(b, kh, j)
				rows[i] = kf[off : off+g.D]
			} else {
				rows[i] = gt.row[(j0+i)*g.D : (j0+i+1)*g.D]
				r.k.ReadRow(b, kh, j, rows[i])
			}
		}
		transposeRows(gt.kT[j0:], p.BlockK, rows[:m], g.D)
	}
	for j, x := range tok {
		r.v.ReadRow(b, kh, int(x), gt.v[j*g.Dv:])
	}
	return keyBlock{kT: gt.kT, ldk: p.BlockK, v: gt.v, ldv: g.Dv, n: n, tok: tok, last: last}
}

// transposeRows writes column c of the m ≤ 8 rows (each of d values) to
// dst[c·ld : c·ld+m].
func transposeRows(dst []float32, ld int, rows [][]float32, d int) {
	if len(rows) == 8 {
		r0, r1, r2, r3 := rows[0][:d], rows[1][:d], rows[2][:d], rows[3][:d]
		r4, r5, r6, r7 := rows[4][:d], rows[5][:d], rows[6][:d], rows[7][:d]
		for c := range r0 {
			o := dst[c*ld : c*ld+8]
			o[0], o[1], o[2], o[3] = r0[c], r1[c], r2[c], r3[c]
			o[4], o[5], o[6], o[7] = r4[c], r5[c], r6[c], r7[c]
		}
		return
	}
	for i, row := range rows {
		for c, x := range row[:d] {
			dst[c*ld+i] = x
		}
	}
}

// rowGroup is a run of consecutive query blocks qb0 ≤ qb < qb1 of query
// head h in batch b whose rows share one key order: a segment of S2O. The
// group runs as one task, so that each gathered KV block is gathered once
// for every row of the group that lists it.
type rowGroup struct {
	b, h, qb0, qb1 int
	work           int // entries in all its rows, for the launch order
}

// maxGroupRows bounds a group's rows: their tiles stay in cache together.
const maxGroupRows = 16

// rowGroups cuts the rows of query heads [h0, h0+nh) (numbered b·Hq + h)
// into groups, in row order.
func rowGroups(p *plan.Plan, h0, nh int) []rowGroup {
	g := p.Geometry
	var gs []rowGroup
	for bh := h0; bh < h0+nh; bh++ {
		b, h := bh/g.Hq, bh%g.Hq
		for qb := 0; qb < p.QBlocks(); {
			key := kvOrderOf(p, p.Row(b, h, qb))
			grp := rowGroup{b: b, h: h, qb0: qb}
			for qb < p.QBlocks() && qb-grp.qb0 < maxGroupRows && kvOrderOf(p, p.Row(b, h, qb)) == key {
				ri := p.Row(b, h, qb)
				grp.work += p.RowStart[ri+1] - p.RowStart[ri]
				qb++
			}
			grp.qb1 = qb
			gs = append(gs, grp)
		}
	}
	return gs
}

// longestFirst sorts tasks by decreasing work (stable), so that the longest
// start first and the finish times balance.
func longestFirst[T any](ts []T, work func(T) int) {
	slices.SortStableFunc(ts, func(x, y T) int { return cmp.Compare(work(y), work(x)) })
}

// passTogether reports whether an Init plan's groups and the main plan's
// groups cover the same rows and every main row's queries come from its
// own group's query blocks, as with S2O, whose query order permutes only
// within a segment. Then one task can run a group's pass 1 and pass 2
// back to back, the saved states still in cache.
func passTogether(p *plan.Plan, init, main []rowGroup) bool {
	if len(init) != len(main) {
		return false
	}
	g := p.Geometry
	for i, m := range main {
		if x := init[i]; x.b != m.b || x.h != m.h || x.qb0 != m.qb0 || x.qb1 != m.qb1 {
			return false
		}
		if p.Order == nil || p.Order.Query == nil {
			continue
		}
		lo, _ := p.QueryRange(m.qb0)
		_, hi := p.QueryRange(m.qb1 - 1)
		row := (m.b*g.Hq + m.h) * g.Nq
		for _, tok := range p.Order.Query[row+lo : row+hi] {
			if int(tok) < lo || int(tok) >= hi {
				return false
			}
		}
	}
	return true
}

// kvOrderOf is the key order row ri reads, or -1 for the natural order.
func kvOrderOf(p *plan.Plan, ri int) int {
	if p.Order == nil || p.Order.RowKV == nil {
		return -1
	}
	return int(p.Order.RowKV[ri])
}

// cursor walks one row of a group.
type cursor struct {
	ri, nq   int
	blocks   []int32
	levels   []plan.Level
	e        int
	finished bool
}

// at returns the KV block at c's position after stepping over Skip
// entries, or -1 once the row is finished.
func (c *cursor) at() int32 {
	for !c.finished && c.levels != nil && c.e < len(c.blocks) && c.levels[c.e] == plan.Skip {
		c.e++
	}
	if c.e == len(c.blocks) {
		c.finished = true
	}
	if c.finished {
		return -1
	}
	return c.blocks[c.e]
}

// smallestNext returns the smallest block any unfinished cursor is at, or
// -1 when every one is finished.
func smallestNext(cs []cursor) int32 {
	kb := int32(-1)
	for i := range cs {
		if b := cs[i].at(); b >= 0 && (kb < 0 || b < kb) {
			kb = b
		}
	}
	return kb
}

// group runs the rows of grp, each in its own tile of t.sub, visiting the
// KV blocks they list in each row's own order: at every step the smallest
// block any unfinished row lists next is gathered once and folded into
// every row that lists it next, so the rows of an S2O segment share each
// gathered tile. Each row honors the plan's stop rule by itself. In pass 1
// (r.pass1) the rows' states are saved for the main plan; otherwise they
// are normalized and written.
func (t *tile) group(r *run, grp rowGroup) {
	p := r.p
	nr := grp.qb1 - grp.qb0
	for len(t.sub) < nr {
		t.sub = append(t.sub, newTile(p))
	}
	gathered := p.Order != nil && (p.Order.Query != nil || kvOrderOf(p, p.Row(grp.b, grp.h, grp.qb0)) >= 0)
	if !gathered { // natural rows read the packed blocks, shared already
		for qb := grp.qb0; qb < grp.qb1; qb++ {
			if r.pass1 {
				t.rowInit(r, grp.b, grp.h, qb)
			} else {
				t.row(r, grp.b, grp.h, qb)
			}
		}
		return
	}
	kvOrder := kvOrderOf(p, p.Row(grp.b, grp.h, grp.qb0))
	cs := make([]cursor, nr)
	for i := range cs {
		ri := p.Row(grp.b, grp.h, grp.qb0+i)
		blocks, levels := p.Entries(ri)
		cs[i] = cursor{ri: ri, nq: t.sub[i].begin(r, grp.b, grp.h, grp.qb0+i), blocks: blocks, levels: levels}
	}
	for {
		kb := smallestNext(cs)
		if kb < 0 {
			break
		}
		blk := t.gather(r, grp.b, grp.h, int(kb), kvOrder)
		for i := range cs {
			c := &cs[i]
			if c.finished || c.blocks[c.e] != kb {
				continue
			}
			s := t.sub[i]
			small := s.block(r, c.nq, blk, 1)
			c.e++
			if st := p.Stop; st != nil && c.e > st.AfterRow(c.ri) && small {
				s.stats.Stopped++
				c.finished = true
			}
		}
	}
	for i, c := range cs {
		s := t.sub[i]
		if r.pass1 {
			s.save(r, grp.b, c.nq)
		} else {
			s.finish(r, grp.b, c.nq)
		}
		t.stats.Add(s.stats)
		s.stats = plan.Stats{}
		if s.err != nil && t.err == nil {
			t.err = s.err
		}
		s.err = nil
	}
}
