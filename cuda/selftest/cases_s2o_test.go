package selftest

import (
	"testing"

	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestOrdersDiffer: ordersDiffer finds one difference for each kind of
// change a device planner could get wrong, and none between equal plans.
func TestOrdersDiffer(t *testing.T) {
	tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 300, Nk: 300, D: 64, Dv: 64}, Causal: true, BlockQ: 64, BlockK: 64}
	layout := func(t *testing.T) *plan.Plan {
		p, err := s2o.Planner{Segment: 128, Tau: 0.01, QueryPerm: true}.Layout(tl)
		if err != nil {
			t.Fatal(err)
		}
		return deepCopy(p)
	}
	for _, tc := range []struct {
		name   string
		change func(p *plan.Plan)
		want   int
	}{
		{"equal", func(*plan.Plan) {}, 0},
		{"query order", func(p *plan.Plan) { q := p.Order.Query; q[301], q[302] = q[302], q[301] }, 1},
		{"key order", func(p *plan.Plan) { kv := p.Order.KV; kv[0], kv[1] = kv[1], kv[0] }, 1},
		{"stop rule", func(p *plan.Plan) { p.Stop.Tau = 0.02 }, 1},
		{"init row", func(p *plan.Plan) { p.Init.KVBlock[0]++ }, 1},
		{"row map", func(p *plan.Plan) { p.Order.RowKV[0] = -1 }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, got := layout(t), layout(t)
			tc.change(got)
			if n := ordersDiffer(want, got); n != tc.want {
				t.Fatalf("ordersDiffer = %d, want %d", n, tc.want)
			}
		})
	}
}

// deepCopy copies p's rows, orders, stop rule and Init plan, which Layout
// may share between passes.
func deepCopy(p *plan.Plan) *plan.Plan {
	c := *p
	c.RowStart = append([]int(nil), p.RowStart...)
	c.KVBlock = append([]int32(nil), p.KVBlock...)
	if p.Order != nil {
		o := *p.Order
		o.Query = append([]int32(nil), o.Query...)
		o.KV = append([]int32(nil), o.KV...)
		o.KVStart = append([]int(nil), o.KVStart...)
		o.RowKV = append([]int32(nil), o.RowKV...)
		c.Order = &o
	}
	if p.Stop != nil {
		s := *p.Stop
		c.Stop = &s
	}
	if p.Init != nil {
		c.Init = deepCopy(p.Init)
	}
	return &c
}
