package cpu

import (
	"sync"

	"github.com/sparseattn/sparseattn/plan"
)

// tileSets recycles the scratch tiles of finished runs, as packSlabs does
// the packed heads. A worker's tiles (its own and the sub-tiles of a row
// group) hold about 240 KiB at 64×64 blocks and D=64, and memory fresh from
// the operating system costs a page fault per 4 KiB page on first touch:
// about 120–190 faults and 1.5 ms of system time per run with 2 workers on
// the 2-core development VM, 4% of a causal 2K-token D=64 pass
// (BENCHMARKS.md, issue 16).
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
