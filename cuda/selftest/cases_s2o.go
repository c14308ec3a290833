package selftest

import (
	"fmt"
	"slices"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// s2oPlanners are the S2O configurations the device planner is checked
// with: Q_perm (QueryPerm) with the CLI's τ, Q_perm exact (s2o.NoStop) with
// a local window, and the fused default with a window that is no multiple
// of a block, all with the default outlier query (s2o.DefaultOutliers);
// then Q_perm with three outlier queries a segment, and with none (the
// paper's key order).
// Segments are multiples of every shape's BlockQ.
func s2oPlanners() []plan.Planner {
	return []plan.Planner{
		s2o.Planner{Segment: 256, Tau: 0.005, QueryPerm: true},
		s2o.Planner{Segment: 512, Tau: s2o.NoStop, Window: 128, QueryPerm: true},
		s2o.Planner{Segment: 256, Tau: 0.005, Window: 100},
		s2o.Planner{Segment: 256, Tau: 0.005, Outliers: 3, QueryPerm: true},
		s2o.Planner{Segment: 256, Tau: 0.005, Outliers: s2o.NoOutliers, QueryPerm: true},
	}
}

// s2oTieCases are p's extra cases when p is S2O: the ragged GQA shape
// with every 7th row of q and k repeated, so that each list's scores take
// a few values, interleaved in index order: the stable order of ties is
// checked; none for other planners. The first of s2oPlanners also gets
// s2oLongCases.
func s2oTieCases(p plan.Planner) []PlannerCase {
	if _, ok := p.(s2o.Planner); !ok {
		return nil
	}
	s := shapes()[0]
	cs := []PlannerCase{{Name: caseName(p) + "/ties " + s.Name, Planner: p, Case: s, Repeat: 7}}
	if p == s2oPlanners()[0] {
		cs = append(cs, s2oLongCases()...)
	}
	return cs
}

// s2oLongCases have lists of several of the device sort's chunks of 4096
// (s2o_sort, then s2o_merge's levels): at N = 9000 and S = 256 the last
// causal prefix and every non-causal list take three chunks (two merge
// levels, the third chunk unpaired at the first), with ties (every 7th
// row repeated) across chunks; S = 4608 cuts query lists of two chunks.
func s2oLongCases() []PlannerCase {
	long := func(name string, causal bool) cuda.Case {
		return cuda.Case{Name: name, B: 1, Hq: 2, Hkv: 1, Nq: 9000, Nk: 9000, D: 64, Dv: 64,
			DType: tensor.BFloat16, Layout: tensor.BHND, Causal: causal, BlockQ: 64, BlockK: 64}
	}
	c, nc := long("long lists causal N=9000", true), long("long lists non-causal N=9000", false)
	p := s2o.Planner{Segment: 256, Tau: 0.005, QueryPerm: true}
	q := s2o.Planner{Segment: 4608, Tau: 0.005, QueryPerm: true}
	return []PlannerCase{
		{Name: caseName(p) + "/" + c.Name, Planner: p, Case: c},
		{Name: caseName(p) + "/ties " + c.Name, Planner: p, Case: c, Repeat: 7},
		{Name: caseName(p) + "/" + nc.Name, Planner: p, Case: nc},
		{Name: caseName(q) + "/" + c.Name, Planner: q, Case: c},
	}
}

// repeatRows makes row n of x a copy of row n mod every, for each batch
// and head.
func repeatRows(x *tensor.Tensor, every int) {
	sh := x.Shape()
	for b := range sh.B {
		for h := range sh.H {
			for n := every; n < sh.N; n++ {
				for d := range sh.D {
					x.Set(b, h, n, d, x.At(b, h, n%every, d))
				}
			}
		}
	}
}

// caseName names p's cases: the planner's name, with S2O's segment, τ,
// window, variant and outlier count, which tell its configurations apart.
func caseName(p plan.Planner) string {
	s, ok := p.(s2o.Planner)
	if !ok {
		return p.Name()
	}
	name := fmt.Sprintf("s2o S=%d τ=%g W=%d", s.Segment, s.Tau, s.Window)
	if s.QueryPerm {
		name += " qperm"
	}
	if s.Outliers != 0 {
		name += fmt.Sprintf(" outliers=%d", s.Outliers)
	}
	return name
}

// ordersDiffer counts what differs between the CPU plan want and the
// device plan got beyond the main rows (which the caller compares): each
// head row's query order, each key order, the key-order starts and row
// map, the stop rule, and the Init plan's rows and orders the same way.
// Plans without orders, stop rule or Init plan give 0.
func ordersDiffer(want, got *plan.Plan) int {
	n := 0
	if (want.Stop == nil) != (got.Stop == nil) || want.Stop != nil && (want.Stop.Tau != got.Stop.Tau || want.Stop.After != got.Stop.After || !slices.Equal(want.Stop.RowAfter, got.Stop.RowAfter)) {
		n++
	}
	wo, gor := want.Order, got.Order
	switch {
	case wo == nil && gor == nil:
	case wo == nil || gor == nil || !slices.Equal(wo.KVStart, gor.KVStart) || !slices.Equal(wo.RowKV, gor.RowKV) || len(wo.Query) != len(gor.Query) || len(wo.KV) != len(gor.KV):
		n++
	default:
		g := want.Geometry
		for i := 0; i+g.Nq <= len(wo.Query) && g.Nq > 0; i += g.Nq {
			if !slices.Equal(wo.Query[i:i+g.Nq], gor.Query[i:i+g.Nq]) {
				n++
			}
		}
		for o := range len(wo.KVStart) - 1 {
			if !slices.Equal(wo.KV[wo.KVStart[o]:wo.KVStart[o+1]], gor.KV[wo.KVStart[o]:wo.KVStart[o+1]]) {
				n++
			}
		}
	}
	wi, gi := want.Init, got.Init
	switch {
	case wi == nil && gi == nil:
	case wi == nil || gi == nil || !slices.Equal(wi.RowStart, gi.RowStart) || !slices.Equal(wi.KVBlock, gi.KVBlock):
		n++
	default:
		n += ordersDiffer(wi, gi)
	}
	return n
}
