package xattn

import (
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestBlockMassMatchesSequentialDots checks that blockMass, whose dot
// products run in vector panels, gives the masses of the planner it
// replaced (blockMassRef: plan.Dot64x4 and plan.Dot64 one query group at a
// time) bit for bit: the device planner repeats this arithmetic, so close
// is not enough. Beyond the test shapes: many query and key groups (panels
// and query batches with ragged ends), D 256, stride 16.
func TestBlockMassMatchesSequentialDots(t *testing.T) {
	long := []shape{
		{plantest.Shape{Name: "long-causal-gqa", B: 1, Hq: 2, Hkv: 1, Nq: 1000, Nk: 1000, D: 32, BlockQ: 32, BlockK: 32, Causal: true}, 8},
		{plantest.Shape{Name: "long-prefill-d256", B: 1, Hq: 1, Hkv: 1, Nq: 300, Nk: 700, D: 256, BlockQ: 32, BlockK: 32, Causal: true}, 16},
		{plantest.Shape{Name: "long-noncausal", B: 1, Hq: 1, Hkv: 1, Nq: 333, Nk: 517, D: 64, BlockQ: 16, BlockK: 16}, 4},
	}
	for _, s := range plantest.Select(append(long, shapes...)) {
		q, k, _, tl := inputs(t, s)
		dense, err := plan.Dense(tl)
		if err != nil {
			t.Fatal(err)
		}
		x := Planner{Stride: s.stride, Threshold: 0.9}
		var sc scratch // reused across heads, as a worker does
		g := tl.Geometry
		for b := range g.B {
			for h := range g.Hq {
				got, want := x.blockMass(dense, q, k, b, h, &sc), x.blockMassRef(dense, q, k, b, h)
				for qb := range want {
					for kb := range want[qb] {
						if math.Float64bits(got[qb][kb]) != math.Float64bits(want[qb][kb]) {
							t.Fatalf("%s b%d h%d block (%d,%d): mass %v, want %v (bit for bit)", s.Name, b, h, qb, kb, got[qb][kb], want[qb][kb])
						}
					}
				}
			}
		}
	}
}

// blockMassRef is blockMass as it was before the vectorised panels
// (test-only reference): it returns, for head h of batch b, the antidiagonal attention
// estimate summed per block: mass[qb][kb]. Its arithmetic is canonical, as
// the device planner (cuda/kernels/plan_xattn.cu) repeats it: logits are
// plan.Dot64 of the float32 rows times the float64 scale, and the softmax
// and its block sums are plan.AddBlockSoftmax's.
func (x Planner) blockMassRef(p *plan.Plan, q, k *tensor.Tensor, b, h int) [][]float64 {
	g := p.Geometry
	s, d := x.Stride, g.D
	qg, kg := (g.Nq+s-1)/s, (g.Nk+s-1)/s
	// Reshaped rows: query group i is Q[iS+S−1], Q[iS+S−2], …, Q[iS]
	// concatenated, key group j is K[jS], …, K[jS+S−1]; missing tokens of a
	// ragged last group are zeros. One dot product of length S·D is then
	// one antidiagonal sum (XAttention §2.1).
	rq := make([]float32, qg*s*d)
	for i := range g.Nq {
		grp, u := i/s, s-1-i%s
		q.ReadRow(b, h, i, rq[(grp*s+u)*d:(grp*s+u+1)*d])
	}
	rk := make([]float32, kg*s*d)
	for j := range g.Nk {
		k.ReadRow(b, g.KVHead(h), j, rk[j*d:(j+1)*d])
	}
	scale := float64(p.SoftmaxScale()) / float64(s)
	off := g.QueryOffset()
	mass := make([][]float64, p.QBlocks())
	for qb := range mass {
		mass[qb] = make([]float64, p.KBlocks())
	}
	row := make([]float64, kg)
	mb, eb := make([]float64, p.KBlocks()), make([]float64, p.KBlocks())
	for i := range qg {
		// Key group j is visible to query group i when its first key is
		// visible to the group's first query.
		visible := kg
		if pos := i*s + off; p.Causal && pos < 0 {
			visible = 0
		} else if p.Causal {
			visible = min(pos/s+1, kg)
		}
		if visible == 0 {
			continue
		}
		qi, L := rq[i*s*d:(i+1)*s*d], s*d
		j := 0
		for ; j+4 <= visible; j += 4 {
			s0, s1, s2, s3 := plan.Dot64x4(qi, rk[j*L:], rk[(j+1)*L:], rk[(j+2)*L:], rk[(j+3)*L:])
			row[j], row[j+1], row[j+2], row[j+3] = s0*scale, s1*scale, s2*scale, s3*scale
		}
		for ; j < visible; j++ {
			row[j] = plan.Dot64(qi, rk[j*L:(j+1)*L]) * scale
		}
		plan.AddBlockSoftmax(mass[i*s/p.BlockQ], row[:visible], p.BlockK/s, mb, eb)
	}
	return mass
}
