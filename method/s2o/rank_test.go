package s2o

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestRankerMatchesStableSort checks the radix ranker against the stable
// comparison sort it replaced, on lists with many ties, both zeros,
// infinities and subnormals, in random and in sorted order. The orders must
// be identical, not merely both valid.
func TestRankerMatchesStableSort(t *testing.T) {
	r := testutil.Rand(t)
	pool := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 2.5, -2.5, 1e-40, -1e-40, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32}
	var rk ranker
	for _, n := range []int{0, 1, 2, 3, 17, 256, 1000, 5000} {
		for trial := range 4 {
			score := make([]float32, n+7)
			for i := range score {
				switch trial {
				case 0: // few distinct values: ties everywhere
					score[i] = pool[r.IntN(len(pool))]
				case 1:
					score[i] = float32(r.NormFloat64())
				case 2: // one shared exponent, so high key digits are all equal
					score[i] = 1 + float32(r.IntN(64))/64
				default:
					score[i] = float32(r.IntN(5)) - 2
				}
			}
			idx := make([]int32, n)
			for i := range idx {
				idx[i] = int32(i + r.IntN(8)) // duplicates and gaps, in list order
			}
			want := slices.Clone(idx)
			slices.SortStableFunc(want, func(a, b int32) int { return descending(score[a], score[b]) })
			got := slices.Clone(idx)
			rk.sort(got, score)
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d trial %d: ranker order differs from the stable sort", n, trial)
			}
		}
	}
}

// TestRankerPutsNaNLast pins the one order the comparison sort left
// unspecified: NaN scores after every other, in list order.
func TestRankerPutsNaNLast(t *testing.T) {
	nan := float32(math.NaN())
	score := []float32{nan, 3, float32(math.Inf(-1)), nan, 5}
	idx := []int32{0, 1, 2, 3, 4}
	var rk ranker
	rk.sort(idx, score)
	if want := []int32{4, 1, 2, 0, 3}; !slices.Equal(idx, want) {
		t.Fatalf("order %v, want %v", idx, want)
	}
}

// TestPlanMatchesComparisonSortPlanner checks that the planner reading one
// segment at a time and ranking by radix gives exactly the plan of the
// planner it replaced (ordersRef: every query row copied, comparison
// sorts), on every test shape, with Gaussian inputs and with inputs on a
// coarse grid whose scores tie often.
func TestPlanMatchesComparisonSortPlanner(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range shapes {
		for _, grid := range []bool{false, true} {
			q, k, v, tl := inputs(t, s)
			if grid {
				snap(q, r)
				snap(k, r)
			}
			for _, tau := range []float64{NoStop, 0.01} {
				for _, outliers := range []int{NoOutliers, 0, 3} {
					pl := s.planner(tau)
					pl.Outliers = outliers
					got, err := pl.Plan(context.Background(), tl, q, k, v)
					if err != nil {
						t.Fatal(err)
					}
					want, err := planRef(pl.Resolve(tl), tl, q, k)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s grid=%v τ=%v outliers=%d: plan differs from the comparison-sort planner's", s.Name, grid, tau, outliers)
					}
				}
			}
		}
	}
}

// snap replaces every element of x by one of {-1, -0.5, 0, 0.5, 1}, so
// that dot products tie.
func snap(x *tensor.Tensor, r *rand.Rand) {
	sh := x.Shape()
	for b := range sh.B {
		for h := range sh.H {
			for n := range sh.N {
				for d := range sh.D {
					x.Set(b, h, n, d, float32(r.IntN(5)-2)/2)
				}
			}
		}
	}
}

// planRef is Plan as it was before segment-wise reading and radix ranking.
func planRef(s Planner, t plan.Tiling, q, k *tensor.Tensor) (*plan.Plan, error) {
	g := t.Geometry
	segs := (g.Nq + s.Segment - 1) / s.Segment
	perHead := make([]headOrders, g.B*g.Hq)
	err := heads.ForEach(context.Background(), len(perHead), func(i int) {
		b, h := i/g.Hq, i%g.Hq
		keys := make([]float32, g.Nk*g.D)
		for j := range g.Nk {
			k.ReadRow(b, g.KVHead(h), j, keys[j*g.D:(j+1)*g.D])
		}
		perHead[i] = s.ordersRef(t, q, keys, b, h, segs)
	})
	if err != nil {
		return nil, err
	}
	return s.assemble(t, perHead, segs)
}

// ordersRef computes Q_perm and the key orders of query head h in batch b.
// keys holds the head's keys row-major.
func (s Planner) ordersRef(t plan.Tiling, q *tensor.Tensor, keys []float32, b, h, segs int) headOrders {
	g := t.Geometry
	d := g.D
	off := g.QueryOffset()
	qrows := make([]float32, g.Nq*d)
	for i := range g.Nq {
		q.ReadRow(b, h, i, qrows[i*d:(i+1)*d])
	}
	ho := headOrders{query: make([]int32, g.Nq), segs: make([]segOrder, segs)}
	for i := range ho.query {
		ho.query[i] = int32(i)
	}

	// S2O Alg. 1 line 5, Eq. 1: queries scored against the guide key, the
	// mean key of the first segment, and sorted within their segment.
	if s.QueryPerm {
		guide := meanRows(keys, d, 0, min(s.Segment, g.Nk))
		score := make([]float32, g.Nq)
		for i := range g.Nq {
			score[i] = Score(qrows[i*d:(i+1)*d], guide)
		}
		for n := range segs {
			seg := ho.query[n*s.Segment : min((n+1)*s.Segment, g.Nq)]
			slices.SortStableFunc(seg, func(a, b int32) int { return descending(score[a], score[b]) })
		}
	}

	// S2O Alg. 1 lines 10–13, Eq. 2: each segment's prefix keys scored
	// against its mean query and sorted, after the segment's own window.
	score := make([]float32, g.Nk)
	for n := range segs {
		qlo, qhi := n*s.Segment, min((n+1)*s.Segment, g.Nq)
		// The segment's own keys sit at the positions of its queries.
		whi := min(max(qhi+off, 0), g.Nk)
		wlo := min(max(qlo+off-s.Window, 0), whi)
		keysOrder := make([]int32, 0, g.Nk)
		for j := wlo; j < whi; j++ {
			keysOrder = append(keysOrder, int32(j))
		}
		local := len(keysOrder)
		ranked := make([]int32, 0, g.Nk)
		for j := range wlo {
			ranked = append(ranked, int32(j))
		}
		if !t.Causal {
			for j := whi; j < g.Nk; j++ {
				ranked = append(ranked, int32(j))
			}
		}
		if len(ranked) > 0 {
			qmean := meanRows(qrows, d, qlo, qhi)
			for _, j := range ranked {
				score[j] = Score(keys[int(j)*d:int(j+1)*d], qmean)
			}
			slices.SortStableFunc(ranked, func(a, b int32) int { return descending(score[a], score[b]) })
			ranked = outliersRef(ranked, qrows[qlo*d:qhi*d], qmean, keys, d, s.Outliers)
		}
		ho.segs[n] = segOrder{keys: append(keysOrder, ranked...), local: local}
	}
	return ho
}

// outliersRef is the outlier rule of outlier.go written out plainly on
// the segment's queries qrows (qmean their mean) and its ranked keys, which
// KV_perm has sorted: the k queries farthest from qmean (each distance a
// float64 sum in increasing d, NaN as −1, the earliest of ties first),
// each one's top ranked key (the largest Score, NaN last, the earliest
// token of ties), and those
// keys moved to the front in increasing token order. k ≤ 0 changes
// nothing.
func outliersRef(ranked []int32, qrows, qmean, keys []float32, d, k int) []int32 {
	n := len(qrows) / d
	dist := make([]float64, n)
	for i := range n {
		for c := range d {
			e := float64(qrows[i*d+c]) - float64(qmean[c])
			dist[i] += float64(e * e)
		}
		if math.IsNaN(dist[i]) {
			dist[i] = -1
		}
	}
	byDist := make([]int, n)
	for i := range byDist {
		byDist[i] = i
	}
	slices.SortStableFunc(byDist, func(a, b int) int {
		switch {
		case dist[a] > dist[b]:
			return -1
		case dist[a] < dist[b]:
			return 1
		}
		return 0
	})
	tokens := slices.Sorted(slices.Values(ranked))
	var moved []int32
	for _, i := range byDist[:min(max(k, 0), n)] {
		best := int32(-1)
		var bestS float32
		for _, j := range tokens {
			if s := Score(qrows[i*d:(i+1)*d], keys[int(j)*d:int(j+1)*d]); best < 0 || s > bestS || bestS != bestS && s == s {
				best, bestS = j, s
			}
		}
		if !slices.Contains(moved, best) {
			moved = append(moved, best)
		}
	}
	slices.Sort(moved)
	out := slices.Clone(moved)
	for _, j := range ranked {
		if !slices.Contains(moved, j) {
			out = append(out, j)
		}
	}
	return out
}

// descending orders larger scores first: the comparison sort the ranker
// replaced, kept as its reference.
func descending(a, b float32) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
