package s2o

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
)

// TestLayoutIsPlanWithIndexOrders: on every test shape, both variants and
// no early stop and τ 0.01, Layout's plan equals Plan's in everything but the orders'
// content — rows, Init rows, levels, stop rule, key-order starts and
// row-to-order map — and its orders are Plan's with Q_perm's segments and
// each key order's ranked part put back in index order. So the device
// planner, which ranks Layout's orders in place, needs nothing else.
func TestLayoutIsPlanWithIndexOrders(t *testing.T) {
	for _, s := range shapes {
		for _, qperm := range []bool{true, false} {
			for _, tau := range []float64{NoStop, 0.01} {
				q, k, v, tl := inputs(t, s)
				pl := s.planner(tau)
				pl.QueryPerm = qperm
				got, err := pl.Plan(context.Background(), tl, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				lay, err := pl.Layout(tl)
				if err != nil {
					t.Fatal(err)
				}
				name := s.Name
				if !qperm {
					name += "/fused"
				}
				checkLayout(t, name, pl, tl, got, lay)
				if (got.Init == nil) != (lay.Init == nil) {
					t.Fatalf("%s: Init plan present %v in Plan, %v in Layout", name, got.Init != nil, lay.Init != nil)
				}
				if got.Init != nil {
					checkLayout(t, name+"/init", pl, tl, got.Init, lay.Init)
				}
			}
		}
	}
}

// checkLayout compares one pass of Plan's plan (got) with Layout's (lay).
func checkLayout(t *testing.T, name string, pl Planner, tl plan.Tiling, got, lay *plan.Plan) {
	t.Helper()
	if !slices.Equal(got.RowStart, lay.RowStart) || !slices.Equal(got.KVBlock, lay.KVBlock) || !slices.Equal(got.Level, lay.Level) {
		t.Fatalf("%s: rows differ", name)
	}
	if !reflect.DeepEqual(got.Stop, lay.Stop) {
		t.Fatalf("%s: stop rules differ: %+v vs %+v", name, got.Stop, lay.Stop)
	}
	gor, lo := got.Order, lay.Order
	if !slices.Equal(gor.KVStart, lo.KVStart) || !slices.Equal(gor.RowKV, lo.RowKV) || (gor.Query == nil) != (lo.Query == nil) {
		t.Fatalf("%s: order layout differs", name)
	}
	g := tl.Geometry
	segs := (g.Nq + pl.Segment - 1) / pl.Segment
	most := 0 // the longest ranked part, which MaxRanked gives
	for o := range len(lo.KVStart) - 1 {
		wlo, whi := pl.window(tl, o%segs)
		a, b := gor.KV[gor.KVStart[o]:gor.KVStart[o+1]], lo.KV[lo.KVStart[o]:lo.KVStart[o+1]]
		local := whi - wlo
		most = max(most, len(b)-local)
		if !slices.Equal(a[:local], b[:local]) {
			t.Fatalf("%s: order %d: windows differ", name, o)
		}
		ranked := slices.Clone(a[local:])
		slices.Sort(ranked)
		if !slices.Equal(ranked, b[local:]) {
			t.Fatalf("%s: order %d: Layout's ranked part is not Plan's in index order", name, o)
		}
	}
	if m := pl.MaxRanked(tl); len(lo.KVStart) > 1 && m != most {
		t.Fatalf("%s: MaxRanked %d, the longest ranked part %d", name, m, most)
	}
	if lo.Query != nil {
		for i := 0; i < len(lo.Query); i += g.Nq {
			for lo2 := 0; lo2 < g.Nq; lo2 += pl.Segment {
				hi := min(lo2+pl.Segment, g.Nq)
				seg := slices.Clone(gor.Query[i+lo2 : i+hi])
				slices.Sort(seg)
				if !slices.Equal(seg, lo.Query[i+lo2:i+hi]) {
					t.Fatalf("%s: Layout's Q_perm segment at %d is not Plan's in index order", name, lo2)
				}
			}
		}
	}
}

// TestScoreAllIsScore: the four-at-a-time scoring gives Score's bits, for
// lists of every length mod 4 and D not a multiple of 4.
func TestScoreAllIsScore(t *testing.T) {
	r := testutil.Rand(t)
	for _, tc := range []struct{ n, d int }{{0, 8}, {1, 3}, {5, 7}, {8, 128}, {11, 64}} {
		rows := make([]float32, tc.n*tc.d)
		m := make([]float32, tc.d)
		for i := range rows {
			rows[i] = float32(r.NormFloat64())
		}
		for i := range m {
			m[i] = float32(r.NormFloat64())
		}
		idx := make([]int32, tc.n)
		for i := range idx {
			idx[i] = int32(i)
		}
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		score := make([]float32, tc.n)
		row := func(i int32) []float32 { return rows[int(i)*tc.d : int(i+1)*tc.d] }
		scoreAll(score, idx, m, row)
		for i := range tc.n {
			if want := float32(plan.Dot64(row(int32(i)), m)); score[i] != want {
				t.Fatalf("n=%d d=%d: score[%d] = %v, Score gives %v", tc.n, tc.d, i, score[i], want)
			}
		}
	}
}
