package psa

import (
	"math"
	"math/big"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
)

// TestChunkedSum checks assign's canonical sum against the exact sum
// (math/big) of random positive values: equal to the plain sum in order
// up to one chunk, and within n·2⁻⁵² of the exact sum beyond (each of the
// at most n − 1 additions rounds by at most half an ulp of a partial sum,
// and every partial sum is at most the total).
func TestChunkedSum(t *testing.T) {
	r := testutil.Rand(t)
	for _, n := range []int{0, 1, 7, 31, 32, 33, 64, 65, 1000, 2048, 4099} {
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Exp(6 * r.NormFloat64())
		}
		got := chunkedSum(x)
		var plain float64
		exact := new(big.Float).SetPrec(2000)
		for _, v := range x {
			plain += v
			exact.Add(exact, new(big.Float).SetFloat64(v))
		}
		if n <= sumChunk && got != plain {
			t.Errorf("n %d: chunked sum %v, the plain sum %v: they must agree up to one chunk", n, got, plain)
		}
		want, _ := exact.Float64()
		if tol := float64(n) * 0x1p-52 * want; math.Abs(got-want) > tol {
			t.Errorf("n %d: chunked sum %v, exact %v: off by %.3g, over the bound %.3g", n, got, want, math.Abs(got-want), tol)
		}
	}
}

// TestAssignLongRows checks assign on rows of hundreds to thousands of
// blocks, where its sums run by chunks, against naiveLevels (plain sums
// in order): every block whose preceding mass lies farther than 1e-9
// from each cut must get the same level (nearer ones may round either
// way).
func TestAssignLongRows(t *testing.T) {
	r := testutil.Rand(t)
	cuts := []float64{0.6, 0.8, 0.9, 0.95}
	for _, n := range []int{33, 500, 1024, 2048, 3000} {
		imp := make([]float64, n)
		for i := range imp {
			imp[i] = math.Exp(3 * r.NormFloat64())
			if r.IntN(10) == 0 {
				imp[i] = 1 // ties
			}
		}
		got := make([]plan.Level, n)
		assign(config{rule: Threshold, cuts: cuts}, imp, got)
		want := naiveLevels(Threshold, cuts, imp)
		var total float64
		for _, x := range imp {
			total += x
		}
		order := descending(imp)
		compared := 0
		var before float64
		for _, e := range order {
			near := false
			for _, c := range cuts {
				near = near || math.Abs(before-c) <= 1e-9
			}
			if !near {
				compared++
				if got[e] != want[e] {
					t.Errorf("n %d: block %d (preceding mass %.12f) at level %d, want %d", n, e, before, got[e], want[e])
				}
			}
			before += imp[e] / total
		}
		if compared < n-len(cuts) {
			t.Errorf("n %d: only %d of %d blocks compared", n, compared, n)
		}
	}
}
