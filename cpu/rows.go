package cpu

import "github.com/sparseattn/sparseattn/plan"

// maxRowGroup is the most query blocks of one head that rows runs
// together, each KV block then serving them all while it is in cache.
const maxRowGroup = 4

// rowGroupSize is how many consecutive query blocks of a head each task
// runs together (rows), 1 to run them one by one (row). Grouping pays
// where KV blocks are packed for the GEMM path: a head's packed keys and
// values (2–4 MiB at N=4K, D 64–128) outgrow the core's L2 cache, so a
// task that runs one query block reads every KV block from L3 or memory,
// while a group of g reads it once for g query blocks. Groups shrink so
// that every worker still gets at least four tasks. A positive force
// (Executor.rowGroup, for the tests) sets the size on the GEMM path.
func (r *run) rowGroupSize(tasks, workers, force int) int {
	switch {
	case r.kRows != nil || r.pass1:
		return 1
	case force > 0:
		return force
	}
	return max(1, min(maxRowGroup, tasks/(4*workers)))
}

// rows runs query blocks [qb0, qb1) of head h in batch b (and of the heads
// stacked below it) over their whole CSR rows, each in its own tile of
// t.sub, and writes their normalized outputs. It walks the KV blocks the
// rows list in ascending order, folding each into every row that lists it
// next, so that a block read from memory serves all the rows while it is
// in cache; each row honors the plan's stop rule by itself. The results
// are those of row on each query block: every row folds the same blocks
// in the same order.
func (t *tile) rows(r *run, b, h, qb0, qb1 int) {
	p := r.p
	nr := qb1 - qb0
	for len(t.sub) < nr {
		t.sub = append(t.sub, newTile(p))
	}
	cs := t.cursors[:0]
	for i := range nr {
		ri := p.Row(b, h, qb0+i)
		blocks, levels := p.Entries(ri)
		cs = append(cs, cursor{ri: ri, nq: t.sub[i].begin(r, b, h, qb0+i), blocks: blocks, levels: levels})
	}
	t.cursors = cs
	for kb := int(smallestNext(cs)); kb >= 0; kb = int(smallestNext(cs)) {
		if r.prefetch {
			// The smallest block listed after kb: the next step's.
			kn := -1
			for i := range cs {
				c := &cs[i]
				e := c.e
				if !c.finished && int(c.blocks[e]) == kb {
					e++
				}
				if !c.finished && e < len(c.blocks) && (kn < 0 || int(c.blocks[e]) < kn) {
					kn = int(c.blocks[e])
				}
			}
			if kn >= 0 {
				r.block(b, h, qb0, kn, plan.Full).prefetch(r.g)
			}
		}
		for i := range cs {
			c := &cs[i]
			if c.finished || int(c.blocks[c.e]) != kb {
				continue
			}
			lv := plan.Full
			if c.levels != nil {
				lv = c.levels[c.e]
			}
			s := t.sub[i]
			blk := r.block(b, h, qb0+i, kb, lv)
			small := s.block(r, c.nq, blk, r.work(b, h, kb, lv, blk))
			t.record(r, b, h, kb, s.verified)
			if st := p.Stop; st != nil && c.e >= st.AfterRow(c.ri) && small {
				s.stats.Stopped++
				c.finished = true
			}
			c.e++
		}
	}
	for i, c := range cs {
		s := t.sub[i]
		s.finish(r, b, c.nq)
		t.stats.Add(s.stats)
		s.stats = plan.Stats{}
		if s.err != nil && t.err == nil {
			t.err = s.err
		}
		s.err = nil
	}
}
