package cpu

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestTileReuse checks that tiles recycled from an earlier run (tileSets)
// carry nothing into the next: a run that fails its input check, then one
// of other sizes, then a clean run of the first sizes gives bit for bit
// the output and the counters of the first clean run.
func TestTileReuse(t *testing.T) {
	r := testutil.Rand(t)
	pr, other := problems[0], problems[2]
	q, k, v := pr.inputs(t, r)
	p, err := plan.Dense(pr.tiling())
	if err != nil {
		t.Fatal(err)
	}
	e := Executor{Workers: 2, CheckFinite: true}
	want, ws, err := e.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	keep := v.Float32s()[7]
	v.Float32s()[7] = float32(math.NaN())
	var nf *tensor.NonFiniteError
	if _, _, err := e.Run(context.Background(), p, q, k, v, nil); !errors.As(err, &nf) {
		t.Fatalf("NaN in v: error %v, want a *tensor.NonFiniteError", err)
	}
	v.Float32s()[7] = keep
	q2, k2, v2 := other.inputs(t, r)
	p2, err := plan.Dense(other.tiling())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Run(context.Background(), p2, q2, k2, v2, nil); err != nil {
		t.Fatal(err)
	}
	got, gs, err := e.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatalf("after a failed run: %v", err)
	}
	gf, wf := got.Float32s(), want.Float32s()
	for i := range wf {
		if math.Float32bits(gf[i]) != math.Float32bits(wf[i]) {
			t.Fatalf("out[%d] = %g after reuse, %g before", i, gf[i], wf[i])
		}
	}
	if gs.Stopped != ws.Stopped || math.Abs(gs.QKBlocks-ws.QKBlocks) > 1e-9*ws.QKBlocks || math.Abs(gs.PVBlocks-ws.PVBlocks) > 1e-9*ws.PVBlocks {
		t.Errorf("stats %+v after reuse, %+v before", gs, ws)
	}
}

// TestTileSetFit checks that a recycled tile set keeps its tiles (and
// their sub-tiles) for a plan of the same sizes, cleared of the counters,
// error and finiteness record a run left, and is replaced for other sizes.
func TestTileSetFit(t *testing.T) {
	p, err := plan.Dense(problems[0].tiling())
	if err != nil {
		t.Fatal(err)
	}
	other, err := plan.Dense(problems[2].tiling())
	if err != nil {
		t.Fatal(err)
	}
	dirty := func(x *tile) {
		x.stats, x.err = plan.Stats{QKBlocks: 3}, errors.New("left over")
		x.checked, x.verified = []uint32{1}, checkedK
	}
	old := &tileSet{dims: dimsOf(p)}
	for range 3 {
		x := newTile(p)
		x.sub = []*tile{newTile(p)}
		dirty(x)
		dirty(x.sub[0])
		old.tiles = append(old.tiles, x)
	}
	kept := old.tiles
	ts := old.fit(p, 4)
	if len(ts.tiles) != 4 || ts.tiles[0] != kept[0] || ts.tiles[2] != kept[2] {
		t.Fatalf("fit kept %d tiles, first %p want %p", len(ts.tiles), ts.tiles[0], kept[0])
	}
	for i, x := range ts.tiles {
		for _, y := range append([]*tile{x}, x.sub...) {
			if y.stats != (plan.Stats{}) || y.err != nil || y.checked != nil || y.verified != 0 {
				t.Errorf("tile %d: stats %+v, err %v, checked %v, verified %d after fit", i, y.stats, y.err, y.checked, y.verified)
			}
		}
	}
	if ts := ts.fit(p, 2); len(ts.tiles) != 2 || ts.tiles[1] != kept[1] {
		t.Errorf("fit to 2 tiles: %d tiles", len(ts.tiles))
	}
	if ts := ts.fit(other, 2); ts.dims != dimsOf(other) || ts.tiles[0] == kept[0] {
		t.Errorf("fit to other sizes kept the old tiles (dims %+v)", ts.dims)
	}
}
