package s2o

import "github.com/sparseattn/sparseattn/plan"

// Layout returns the plan that Plan gives with tiling t for any inputs,
// except that Q_perm and the ranked part of every key order are left in
// index order: its rows, Init rows, key-order starts, row-to-order map and
// stop rule do not depend on q and k, only on t and the hyperparameters.
// The device planner (package cuda) uploads it once per runner and ranks
// the orders in place on the device at each call.
func (s Planner) Layout(t plan.Tiling) (*plan.Plan, error) {
	s = s.Resolve(t)
	if err := s.check(t); err != nil {
		return nil, err
	}
	if _, err := plan.NewBuilder(t); err != nil {
		return nil, err
	}
	g := t.Geometry
	segs := (g.Nq + s.Segment - 1) / s.Segment
	ho := headOrders{query: make([]int32, g.Nq), segs: make([]segOrder, segs)}
	for i := range ho.query {
		ho.query[i] = int32(i)
	}
	for n := range segs {
		wlo, whi := s.window(t, n)
		keys := make([]int32, 0, g.Nk)
		for j := wlo; j < whi; j++ {
			keys = append(keys, int32(j))
		}
		for j := range wlo {
			keys = append(keys, int32(j))
		}
		if !t.Causal {
			for j := whi; j < g.Nk; j++ {
				keys = append(keys, int32(j))
			}
		}
		ho.segs[n] = segOrder{keys: keys, local: whi - wlo}
	}
	perHead := make([]headOrders, g.B*g.Hq) // every head shares the index orders
	for i := range perHead {
		perHead[i] = ho
	}
	return s.assemble(t, perHead, segs)
}

// MaxRanked returns the most ranked keys one segment's key order holds,
// for s resolved against t (Resolve): the keys before the segment's
// window (its causal prefix), or every key outside the window when t is
// not causal. The device planner sizes its key sort by it.
func (s Planner) MaxRanked(t plan.Tiling) int {
	if s.Segment <= 0 {
		s = s.Resolve(t)
	}
	g := t.Geometry
	most := 0
	for n := range (g.Nq + s.Segment - 1) / s.Segment {
		wlo, whi := s.window(t, n)
		r := wlo
		if !t.Causal {
			r += g.Nk - whi
		}
		most = max(most, r)
	}
	return most
}

// window returns segment n's pass-1 keys [wlo, whi): the Window keys
// before the segment and the segment's own, clamped to the keys.
func (s Planner) window(t plan.Tiling, n int) (wlo, whi int) {
	g := t.Geometry
	off := g.QueryOffset()
	qlo, qhi := n*s.Segment, min((n+1)*s.Segment, g.Nq)
	whi = min(max(qhi+off, 0), g.Nk)
	wlo = min(max(qlo+off-s.Window, 0), whi)
	return wlo, whi
}
