package cpu

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// bytesReader hands out fuzz bytes, then zeros.
type bytesReader struct{ b []byte }

func (r *bytesReader) next() int {
	if len(r.b) == 0 {
		return 0
	}
	x := r.b[0]
	r.b = r.b[1:]
	return int(x)
}

// FuzzRunPlan builds plans of every shape the format allows — including
// broken ones — from fuzz bytes and runs them. Whatever the plan, Run must
// either reject it with plan.ErrInvalid or return finite outputs and
// counters in range; it must never panic.
func FuzzRunPlan(f *testing.F) {
	f.Add([]byte{1, 2, 1, 20, 20, 8, 8, 4, 4, 1, 3, 0, 1, 2})
	f.Add([]byte{2, 4, 2, 7, 33, 5, 3, 2, 8, 0, 9, 1, 1, 1, 200, 7, 7})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 255, 255, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &bytesReader{data}
		group := 1 + in.next()%3
		g := tensor.Geometry{B: 1 + in.next()%2, Hkv: 1 + in.next()%2}
		g.Hq = g.Hkv * group
		g.Nq, g.Nk = 1+in.next()%40, 1+in.next()%40
		g.D, g.Dv = 1+in.next()%12, 1+in.next()%12
		tl := plan.Tiling{Geometry: g, BlockQ: 1 + in.next()%12, BlockK: 1 + in.next()%12, Causal: in.next()%2 == 1}
		bld, err := plan.NewBuilder(tl)
		if err != nil {
			t.Fatal(err)
		}
		shape, _ := plan.Dense(tl) // only for its sizes
		for r := range shape.Rows() {
			for range in.next() % 4 {
				lv := plan.Full
				if in.next()%4 == 0 {
					lv = plan.Level(in.next() % 10)
				}
				bld.Add(r, in.next()%(shape.KBlocks()+2)-1, lv)
			}
		}
		switch in.next() % 4 {
		case 1:
			bld.SetFilter(&plan.Filter{Lambda: -float32(in.next()) / 8, RowGroup: 1 + in.next()%tl.BlockQ})
		case 2:
			bld.SetStop(&plan.StopRule{Tau: float32(in.next()) / 256, After: in.next() % 3})
		case 3:
			rng := rand.New(rand.NewPCG(uint64(in.next()), 1))
			o := &plan.TokenOrder{KVStart: []int{0}}
			if in.next()%2 == 0 {
				for range g.B * g.Hq {
					for _, x := range rng.Perm(g.Nq) {
						o.Query = append(o.Query, int32(x))
					}
				}
			}
			for range 2 {
				for _, x := range rng.Perm(g.Nk)[:rng.IntN(g.Nk+1)] {
					o.KV = append(o.KV, int32(x))
				}
				o.KVStart = append(o.KVStart, len(o.KV))
			}
			o.RowKV = make([]int32, shape.Rows())
			for i := range o.RowKV {
				o.RowKV[i] = int32(in.next()%4) - 1 // -1, 0, 1 and, for corruption, 2
			}
			bld.SetOrder(o)
		}
		p, err := bld.Build()
		if err != nil {
			if !errors.Is(err, plan.ErrInvalid) {
				t.Fatalf("Build: %v is not ErrInvalid", err)
			}
			return
		}
		rng := rand.New(rand.NewPCG(1, 2))
		mk := func(h, n, d int) *tensor.Tensor {
			x, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: g.B, H: h, N: n, D: d})
			for i := range x.Float32s() {
				x.Float32s()[i] = float32(rng.NormFloat64())
			}
			return x
		}
		out, stats, err := Executor{Workers: 2}.Run(context.Background(), p, mk(g.Hq, g.Nq, g.D), mk(g.Hkv, g.Nk, g.D), mk(g.Hkv, g.Nk, g.Dv), nil)
		if err != nil {
			if !errors.Is(err, plan.ErrInvalid) {
				t.Fatalf("Run: %v is not ErrInvalid", err)
			}
			return
		}
		for i, x := range out.Float32s() {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || math.Abs(float64(x)) > 10 {
				t.Fatalf("output %d is %v; outputs are convex combinations of values below 10", i, x)
			}
		}
		if s := stats.Sparsity(); !(s >= -1e-9 && s <= 1+1e-9) && p.Order == nil {
			t.Fatalf("sparsity %v outside [0, 1] (stats %+v)", s, stats)
		}
	})
}
