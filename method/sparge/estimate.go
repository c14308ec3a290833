package sparge

import (
	"math"
	"sync"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// HeadEstimate is the expensive, hyperparameter-free stage of the predictor
// for one query head: block self-similarities and the compressed logits.
// Masks for any (τ, θ) are derived from it cheaply with Mask, which is what
// lets the tuner try many hyperparameters per input.
type HeadEstimate struct {
	QBlocks, KBlocks int
	// QSim[i] is CosSim of query block i, KSim[j] of key block j (shared by
	// the query heads of a GQA group). See CosSim.
	QSim, KSim []float64
	// Logits[i·KBlocks+j] is scale·q̄_i·k̄_j, the compressed attention logit
	// of block pair (i, j) (SpargeAttn §3.2, Ŝ = q kᵀ), for j < Visible[i];
	// entries of causally invisible blocks are not computed and hold 0.
	Logits []float64
	// Visible[i] is the number of leading key blocks query block i may see:
	// every block when not causal, else those with a causally visible pair.
	Visible []int
	// Diag[i] is the first key block holding a query of block i's own
	// position (its causal diagonal); -1 when not causal or when no query
	// of the block sees any key.
	Diag []int
}

// CosSim is the block self-similarity the θ judge reads: the mean pairwise
// cosine similarity of the block's tokens, diagonal included,
//
//	CosSim(X) = (1/n²) Σ_a Σ_b x̂_a·x̂_b = |(1/n) Σ_a x̂_a|²,   x̂ = x/|x|,
//
// as the reference code computes it (a Gram matrix of normalized tokens,
// averaged). The paper writes CosSim(X) = XXᵀ/max(XXᵀ), a matrix over
// unnormalized tokens, without saying how it becomes a scalar; we follow the
// code. The identity on the right makes it O(n·d) instead of O(n²·d), and
// shows it lies in [0, 1]: 1 when all tokens point the same way, about 1/n
// for independent random directions. A zero token counts as a zero vector
// (it lowers the similarity). A one-token block has CosSim 1.
func CosSim(rows [][]float64) float64 {
	if len(rows) == 0 {
		return 1
	}
	sum := make([]float64, len(rows[0]))
	for _, x := range rows {
		nn := dot64(x, x)
		if nn == 0 {
			continue
		}
		inv := 1 / math.Sqrt(nn)
		for d, v := range x {
			sum[d] += float64(v * inv)
		}
	}
	n := float64(len(rows))
	return dot64(sum, sum) / (n * n)
}

// dot64 is Σ a[i]·b[i] in the canonical warp order of plan.Sum64 (32
// partial sums over i ≡ l mod 32 in increasing i, combined by the xor
// butterfly), each product rounded before it is added. It is how the
// estimate sums over the head dimension, so that the device planner
// (cuda/kernels/plan_sparge.cu) gets the same bits: a warp's lane l holds
// partial l.
func dot64(a, b []float64) float64 {
	var p [32]float64
	b = b[:len(a)]
	for i, x := range a {
		p[i&31] += float64(x * b[i])
	}
	return plan.Sum64(p[:])
}

// blockStats reads tokens [lo, hi) of head h in batch b of x and returns the
// block's mean token (SpargeAttn Alg. 1 line 4: mean over axis 0) and its
// CosSim. row and sum are scratch of length D, f and unit too. The token sum
// runs in float32 in increasing token order, as the reference pools (its
// Triton kernel sums the block in float32), and is divided by the count in
// float64; where a float32 sum overflows (inputs near float32's limit) that
// column is summed again in float64. CosSim's sums run in float64, in token
// order, and sums over d in dot64's canonical order. A float64 token sum
// would cost the device planner one float32-to-float64 conversion an
// element, a quarter of the rate of a float32 add on Hopper (BENCHMARKS.md,
// "sparge's prediction at 8K").
func blockStats(x *tensor.Tensor, b, h, lo, hi int, row, sum []float32, f, mean, unit []float64) float64 {
	clear(sum)
	clear(unit)
	for n := lo; n < hi; n++ {
		x.ReadRow(b, h, n, row)
		for d, v := range row {
			f[d] = float64(v)
			sum[d] += v
		}
		nn := dot64(f, f)
		if nn == 0 {
			continue
		}
		inv := 1 / math.Sqrt(nn)
		for d, v := range f {
			unit[d] += float64(v * inv)
		}
	}
	cnt := float64(hi - lo)
	for d, s := range sum {
		if math.IsInf(float64(s), 0) {
			mean[d] = columnSum64(x, b, h, lo, hi, d, row)
		} else {
			mean[d] = float64(s)
		}
		mean[d] /= cnt
	}
	return dot64(unit, unit) / (cnt * cnt)
}

// columnSum64 is Σ_n x[n, d] over tokens [lo, hi) in float64, in token
// order: blockStats' sum for a column whose float32 sum overflows.
func columnSum64(x *tensor.Tensor, b, h, lo, hi, d int, row []float32) float64 {
	s := 0.0
	for n := lo; n < hi; n++ {
		x.ReadRow(b, h, n, row)
		s += float64(row[d])
	}
	return s
}

// EstimateGroup computes the estimates of the query heads that share KV head
// kvh in batch b (GQA): the key blocks are pooled and judged once for the
// group, and each query head gets its own pooled queries, logits and hence
// its own mask. The returned estimates share one KSim slice. Inputs must
// match t.Geometry (the caller validates).
func EstimateGroup(t plan.Tiling, q, k *tensor.Tensor, b, kvh int) []*HeadEstimate {
	g := t.Geometry
	p := plan.Plan{Tiling: t} // for block ranges and causal visibility
	nqb, nkb := p.QBlocks(), p.KBlocks()
	row, sum := make([]float32, g.D), make([]float32, g.D)
	f := make([]float64, g.D)
	unit := make([]float64, g.D)
	kMean := make([]float64, nkb*g.D)
	kSim := make([]float64, nkb)
	for j := range nkb {
		lo, hi := p.KeyRange(j)
		kSim[j] = blockStats(k, b, kvh, lo, hi, row, sum, f, kMean[j*g.D:(j+1)*g.D], unit)
	}
	visible := make([]int, nqb)
	diag := make([]int, nqb)
	off := g.QueryOffset()
	for i := range nqb {
		visible[i], diag[i] = nkb, -1
		if !t.Causal {
			continue
		}
		qlo, qhi := p.QueryRange(i)
		last := qhi - 1 + off // the last key the block's last query sees
		if last < 0 {
			visible[i] = 0
			continue
		}
		visible[i] = min(nkb, last/t.BlockK+1)
		diag[i] = max(0, qlo+off) / t.BlockK
	}
	scale := float64(t.SoftmaxScale())
	out := make([]*HeadEstimate, g.Group())
	// The query heads of a group are independent; estimate them in
	// parallel, since a planner's pool runs one goroutine per group and GQA
	// layers have few groups.
	var wg sync.WaitGroup
	for gi := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row, sum := make([]float32, g.D), make([]float32, g.D)
			f := make([]float64, g.D)
			unit := make([]float64, g.D)
			qMean := make([]float64, g.D)
			h := kvh*g.Group() + gi
			e := &HeadEstimate{
				QBlocks: nqb, KBlocks: nkb,
				QSim: make([]float64, nqb), KSim: kSim,
				Logits: make([]float64, nqb*nkb), Visible: visible, Diag: diag,
			}
			for i := range nqb {
				lo, hi := p.QueryRange(i)
				e.QSim[i] = blockStats(q, b, h, lo, hi, row, sum, f, qMean, unit)
				for d := range qMean {
					qMean[d] *= scale
				}
				// Only causally visible blocks are ever read; the rest
				// stay 0.
				lg := e.Logits[i*nkb : i*nkb+visible[i]]
				for j := range lg {
					lg[j] = dot64(qMean, kMean[j*g.D:(j+1)*g.D])
				}
			}
			out[gi] = e
		}()
	}
	wg.Wait()
	return out
}
