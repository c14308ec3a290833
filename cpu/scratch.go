package cpu

import (
	"sync"

	"github.com/sparseattn/sparseattn/plan"
)

// tileSets recycles the scratch tiles of finished runs, as packSlabs does
// the packed heads. A worker's tiles (its own and the sub-tiles of a row
// group) hold 80–250 KiB at 64×64 blocks, which a run used to allocate,
// zero and leave to the garbage collector, some of it on pages fresh from
// the operating system: on the 2-core development VM, recycling took a
// dense 4K-token D=64 pass from 140 to 2–4 minor page faults per run and
// decode (16K keys, D=128) to 1.14× the CPU-time rate (BENCHMARKS.md,
// issue 16).
var tileSets sync.Pool // of *tileSet

// tileSet is the scratch tiles of one run and the block and head sizes
// they were made for.
type tileSet struct {
	dims  tileDims
	tiles []*tile
}

// tileDims are the sizes a tile's buffers depend on.
type tileDims struct{ bq, bk, d, dv int }

func dimsOf(p *plan.Plan) tileDims {
	return tileDims{bq: p.BlockQ, bk: p.BlockK, d: p.Geometry.D, dv: p.Geometry.Dv}
}

// takeTiles returns a tile set with n tiles for plan p, reusing a finished
// run's tiles when their sizes match (fit).
func takeTiles(p *plan.Plan, n int) *tileSet {
	ts, _ := tileSets.Get().(*tileSet)
	return ts.fit(p, n)
}

// fit returns ts with n tiles for plan p, or a new set when ts is nil or
// made for other sizes. Each tile kept (and its sub-tiles) starts with no
// counters, no error and no finiteness record, as a new one does.
func (ts *tileSet) fit(p *plan.Plan, n int) *tileSet {
	d := dimsOf(p)
	if ts == nil || ts.dims != d {
		ts = &tileSet{dims: d}
	}
	ts.tiles = ts.tiles[:min(n, len(ts.tiles))]
	for _, t := range ts.tiles {
		t.reset()
		for _, s := range t.sub {
			s.reset()
		}
	}
	for len(ts.tiles) < n {
		ts.tiles = append(ts.tiles, newTile(p))
	}
	return ts
}

// reset clears what a run leaves in a tile besides its buffers, which
// every use overwrites before it reads them.
func (t *tile) reset() {
	t.stats, t.err = plan.Stats{}, nil
	t.checked, t.verified = nil, 0
}
