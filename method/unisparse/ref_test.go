package unisparse

import (
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
)

// TestBlockMassMatchesSequentialDots checks that blockMass, whose dot
// products run in vector panels, gives the masses of the code it replaced
// (blockMassRef: plan.Dot64x4 and plan.Dot64 one composite query at a
// time) bit for bit, as the device planner repeats this arithmetic: on the
// awkward shapes and on longer ones (several key panels with ragged ends,
// causal and not, Nq < Nk), with composite sizes giving 1, 4 and 8
// composite queries per block, and head pooling.
func TestBlockMassMatchesSequentialDots(t *testing.T) {
	long := []plantest.Shape{
		{Name: "long-causal-gqa", B: 1, Hq: 4, Hkv: 2, Nq: 1000, Nk: 1000, D: 64, BlockQ: 32, BlockK: 32, Causal: true},
		{Name: "long-noncausal-d256", B: 1, Hq: 1, Hkv: 1, Nq: 300, Nk: 700, D: 256, BlockQ: 32, BlockK: 32},
		{Name: "long-prefill", B: 2, Hq: 2, Hkv: 1, Nq: 200, Nk: 900, D: 32, BlockQ: 32, BlockK: 16, Causal: true},
	}
	r := testutil.Rand(t)
	for _, s := range plantest.Select(append(long, shapes...)) {
		pr := s.Problem(t, r, 1.5, 1)
		dense, err := plan.Dense(pr.Tiling)
		if err != nil {
			t.Fatal(err)
		}
		g := pr.Tiling.Geometry
		for _, u := range []Planner{
			{TopP: 0.9, CQ: 4, CK: 4, CH: 1},
			{TopP: 0.9, CQ: 8, CK: 2, CH: g.Hq / g.Hkv},
			{TopP: 0.9, CQ: 32, CK: 16, CH: 1},
		} {
			if pr.Tiling.BlockQ%u.CQ != 0 || pr.Tiling.BlockK%u.CK != 0 {
				continue
			}
			c, err := u.config(pr.Tiling)
			if err != nil {
				t.Fatal(err)
			}
			sc := newScorer(dense, c, pr.Q, pr.K)
			for b := range g.B {
				for h0 := 0; h0 < g.Hq; h0 += c.ch {
					sc.compress(b, h0)
					for qb := range dense.QBlocks() {
						blocks, _ := dense.Entries(dense.Row(b, h0, qb))
						got := append([]float64(nil), sc.blockMass(qb, blocks)...)
						want := sc.blockMassRef(qb, blocks)
						for i := range want {
							if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
								t.Fatalf("%s %+v b%d h%d qb%d block %d: mass %v, want %v (bit for bit)", s.Name, u, b, h0, qb, blocks[i], got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// blockMassRef is blockMass as it was before the vectorised panels and
// exponentials (test-only reference: plan.AddBlockSoftmax itself). It returns, for each of query block qb's visible KV blocks, the
// compressed attention mass its composite queries put on the block's
// composite keys (UniSparse Eq. 4–5), the softmax of each composite query
// running over the composite keys in its valid causal range: those whose
// first token its last token sees.
func (s *scorer) blockMassRef(qb int, blocks []int32) []float64 {
	p, g, c := s.p, s.g, s.c
	a0 := qb * p.BlockQ / c.cq
	a1 := min(a0+p.BlockQ/c.cq, s.nq)
	clear(s.mass)
	// Visible blocks are a prefix in causal plans, so every composite up to
	// the last visible block's counts.
	last := 0
	for _, kb := range blocks {
		last = max(last, int(kb))
	}
	cols := min(s.nk, (last+1)*p.BlockK/c.ck)
	if len(blocks) == 0 || cols == 0 {
		return s.mass[:0]
	}
	off := g.QueryOffset()
	mb, eb := make([]float64, p.KBlocks()), make([]float64, p.KBlocks())
	for a := a0; a < a1; a++ {
		vis := cols
		if p.Causal {
			lastTok := min((a+1)*c.cq, g.Nq) - 1 + off // composite key j is visible when j·c_k ≤ lastTok
			vis = 0
			if lastTok >= 0 {
				vis = min(cols, lastTok/c.ck+1)
			}
		}
		l := s.logits[:vis]
		qa := s.cq[a*g.D : (a+1)*g.D]
		j, D := 0, g.D
		for ; j+4 <= len(l); j += 4 {
			l[j], l[j+1], l[j+2], l[j+3] = plan.Dot64x4(qa, s.ck[j*D:], s.ck[(j+1)*D:], s.ck[(j+2)*D:], s.ck[(j+3)*D:])
		}
		for ; j < len(l); j++ {
			l[j] = plan.Dot64(qa, s.ck[j*D:(j+1)*D])
		}
		plan.AddBlockSoftmax(s.mass, l, p.BlockK/c.ck, mb, eb)
	}
	out := s.mass[:len(blocks)]
	if len(blocks) == p.KBlocks() || blocks[0] == 0 && int(blocks[len(blocks)-1]) == len(blocks)-1 {
		return out // visible blocks are 0..len−1, already in place
	}
	tmp := make([]float64, len(blocks))
	for i, kb := range blocks {
		tmp[i] = s.mass[kb]
	}
	return tmp
}
