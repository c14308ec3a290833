package cpu

import (
	"context"
	"math"
	"runtime"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestLambdaFilterWholeRows: under a λ filter the executor folds each row's
// KV blocks in one pass, whatever the number of workers, because
// SpargeAttn's rule (§3.4) compares a block's row maxima with the running
// maxima of every block before it. Shapes with few query blocks (chunked
// prefill, decode), which the executor splits into parts when no filter is
// set, must give the same output bit for bit and the same counters on 1
// and 16 workers, and their P̃·V count must be that of a float64 model of
// the rule over whole rows. Issue 12: the split parts each started from
// m = −∞ and kept products the whole row skips (chunked prefill Nq=300,
// Nk=1100 counted 193 P̃·V products on 16 workers and 190.5 on one).
func TestLambdaFilterWholeRows(t *testing.T) {
	r := testutil.Rand(t)
	for _, tc := range []struct {
		pr       problem
		rowGroup int
		keep     float64 // fraction of blocks kept; 1 = dense
	}{
		{problem{"chunked-prefill", 1, 2, 2, 100, 600, 64, 64, 32, 32, true, tensor.Float32, tensor.BHND}, 16, 1},
		{problem{"chunked-prefill-gqa-bf16-ragged-group", 1, 4, 2, 70, 500, 64, 64, 64, 32, true, tensor.BFloat16, tensor.BHND}, 32, 1},
		{problem{"chunked-prefill-sparse", 1, 2, 1, 90, 700, 32, 32, 32, 16, true, tensor.Float32, tensor.BNHD}, 8, 0.6},
		{problem{"decode", 2, 2, 2, 1, 900, 64, 64, 16, 16, true, tensor.Float32, tensor.BHND}, 1, 1},
	} {
		t.Run(tc.pr.name, func(t *testing.T) {
			pr := tc.pr
			q := testutil.Gaussian(t, r, pr.dtype, pr.layout, tensor.Shape{B: pr.b, H: pr.hq, N: pr.nq, D: pr.d}, 2)
			k := testutil.Gaussian(t, r, pr.dtype, pr.layout, tensor.Shape{B: pr.b, H: pr.hkv, N: pr.nk, D: pr.d}, 2)
			v := testutil.Gaussian(t, r, pr.dtype, pr.layout, tensor.Shape{B: pr.b, H: pr.hkv, N: pr.nk, D: pr.dv}, 1)
			p, _ := randomPlan(t, r, pr.tiling(), tc.keep)
			const workers = 16
			// The executor caps its workers at 4·GOMAXPROCS: on one core the
			// plan would not be split even without the filter.
			if n := splitCount(p, pr.b*pr.hq*p.QBlocks(), min(workers, maxWorkersPerCPU*runtime.GOMAXPROCS(0))); n < 2 {
				t.Logf("without a filter the plan would not be split here (%d parts): only the model is checked", n)
			}
			p.Filter = &plan.Filter{Lambda: -1.5, RowGroup: tc.rowGroup}
			one, s1, err := Executor{Workers: 1}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			many, sn, err := Executor{Workers: workers}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s1 != sn {
				t.Errorf("counters: 1 worker %+v, %d workers %+v", s1, workers, sn)
			}
			for i, x := range one.Float32s() {
				if y := many.Float32s()[i]; x != y {
					t.Fatalf("element %d: %v on 1 worker, %v on %d", i, x, y, workers)
				}
			}
			// Both sides compute the logits from the same stored inputs,
			// the model in float64 and the executor in float32 (a gap error
			// of about 1e-5 at these logits, below 10 in size): only a group
			// whose gap lies within 1e-3 of λ may be decided differently.
			pv, near := lambdaModel(p, q, k)
			if d := math.Abs(s1.PVBlocks - pv); d > near {
				t.Errorf("P̃·V products: executor %v, float64 model %v (groups within 1e-3 of λ: %v)", s1.PVBlocks, pv, near)
			}
			if s1.PVBlocks >= s1.QKBlocks {
				t.Errorf("P̃·V %v of QK %v: λ skipped nothing, the case tests little", s1.PVBlocks, s1.QKBlocks)
			}
			t.Logf("P̃·V %v of %v QK block products (model %v)", s1.PVBlocks, s1.QKBlocks, pv)
		})
	}
}

// lambdaModel counts in float64 the P̃·V block products that plan p's λ
// filter keeps (SpargeAttn §3.4 on whole rows, blocks in list order): a row
// group's share 1/⌈rows/RowGroup⌉ of a block product when some row of the
// group with a visible key so far has m_local − m ≥ λ. near is the
// products' share of groups whose gap lies within 1e-3 of λ.
func lambdaModel(p *plan.Plan, q, k *tensor.Tensor) (pv, near float64) {
	g, f := p.Geometry, p.Filter
	scale, off := float64(p.SoftmaxScale()), g.QueryOffset()
	for b := range g.B {
		for h := range g.Hq {
			kh := g.KVHead(h)
			lambda := float64(f.LambdaFor(h))
			for qb := range p.QBlocks() {
				qlo, qhi := p.QueryRange(qb)
				nq := qhi - qlo
				share := 1 / float64((nq+f.RowGroup-1)/f.RowGroup)
				m, gaps := make([]float64, nq), make([]float64, nq)
				for i := range m {
					m[i] = math.Inf(-1)
				}
				blocks, _ := p.Entries(p.Row(b, h, qb))
				for _, kb := range blocks {
					klo, khi := p.KeyRange(int(kb))
					for i := range nq {
						ml := math.Inf(-1)
						for j := klo; j < khi && (!p.Causal || j <= qlo+i+off); j++ {
							var s float64
							for d := range g.D {
								s += float64(q.At(b, h, qlo+i, d)) * float64(k.At(b, kh, j, d))
							}
							ml = max(ml, s*scale)
						}
						mn := max(m[i], ml)
						gaps[i], m[i] = math.Inf(-1), mn
						if !math.IsInf(mn, -1) {
							gaps[i] = ml - mn
						}
					}
					for lo := 0; lo < nq; lo += f.RowGroup {
						gap := math.Inf(-1)
						for _, x := range gaps[lo:min(lo+f.RowGroup, nq)] {
							gap = max(gap, x)
						}
						if gap >= lambda {
							pv += share
						}
						if math.Abs(gap-lambda) < 1e-3 {
							near += share
						}
					}
				}
			}
		}
	}
	return pv, near
}
