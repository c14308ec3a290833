package selftest

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// minferencePlanners are the minference configurations the device planner
// is checked with: MInference's defaults, a tight budget (so that the
// top-k cut falls inside the scored lines, and fewer verticals than
// sinks), and more probe rows than one logits block (100 > 64).
func minferencePlanners() []plan.Planner {
	return []plan.Planner{
		minference.Planner{LastQ: 64, Vertical: 1000, Slash: 6096},
		minference.Planner{LastQ: 16, Vertical: 20, Slash: 150},
		minference.Planner{LastQ: 100, Vertical: 200, Slash: 300},
	}
}

// minferenceTieBreak judges minference rows: the device scores its probe
// lines on the tensor cores, so a line whose exact score lies within
// probeTol of the k-th may be kept by one side only. A row passes when it
// holds the blocks of every line kept under all perturbations of the exact
// scores (minference.LineScores) and only blocks of lines kept under some.
func minferenceTieBreak(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) rowJudge {
	m, ok := p.(minference.Planner)
	if !ok {
		return nil
	}
	m = m.ForLength(t.Geometry.Nk)
	g := t.Geometry
	dense, err := plan.Dense(t)
	if err != nil {
		return func(context.Context, int, []int32, []int32) error { return err }
	}
	type bounds struct{ lower, upper minference.Lines }
	heads := map[int]bounds{}
	return func(_ context.Context, row int, _, gpuRow []int32) error {
		bh, qb := row/dense.QBlocks(), row%dense.QBlocks()
		bd, ok := heads[bh]
		if !ok {
			b, h := bh/g.Hq, bh%g.Hq
			vert, slash := minference.LineScores(t, q, k, b, h, m.LastQ)
			rel, abs := probeTol(t, q, k, b, h, m.LastQ)
			vs := make([]scored, len(vert))
			for j, x := range vert {
				lo, hi := widen(x, rel, abs)
				vs[j] = scored{lo: lo, hi: hi, forced: j < minference.SinkKeys, cand: sureCand}
			}
			ss := make([]scored, len(slash))
			for o, x := range slash {
				d := o - (g.Nk - 1)
				lo, hi := widen(x, rel, abs)
				c := sureCand // every d ≥ 0 is a candidate; d < 0 needs mass
				switch {
				case d < 0 && t.Causal:
					c = notCand // keys after the query: masked, exactly 0 on both sides
				case d < 0 && lo == 0:
					c = maybeCand
				}
				ss[o] = scored{lo: lo, hi: hi, forced: d >= 0 && d < minference.RecentSlashes, cand: c}
			}
			vSure, vMaybe := topKBounds(vs, m.Vertical, m.Vertical)
			sSure, sMaybe := topKBounds(ss, m.Slash, m.Slash)
			bd = bounds{
				lower: minference.Lines{Vertical: pick(vSure, 0), Slash: pick(sSure, -(g.Nk - 1))},
				upper: minference.Lines{Vertical: pick(vMaybe, 0), Slash: pick(sMaybe, -(g.Nk - 1))},
			}
			heads[bh] = bd
		}
		visible, _ := dense.Entries(row)
		lower := minference.Blocks(dense, qb, visible, bd.lower)
		upper := minference.Blocks(dense, qb, visible, bd.upper)
		if !between(lower, gpuRow, upper) {
			return fmt.Errorf("blocks %v outside the tie-break bounds %v ⊆ row ⊆ %v (%d..%d verticals, %d..%d slashes)",
				gpuRow, lower, upper, len(bd.lower.Vertical), len(bd.upper.Vertical), len(bd.lower.Slash), len(bd.upper.Slash))
		}
		return nil
	}
}
