package psa

import "math/rand/v2"

// Outlier-led sampling is our extension of PSA's sampling estimator (PSA
// §3.3.1, Eq. 4), not the paper's. There s_q queries and s_k keys are drawn
// at random from each block and Eq. 4's largest sampled weight stands for
// the block's. A pair that alone carries its block's largest weight — a
// lone key that one query retrieves, a "needle" — is then drawn with
// probability (s_q/b_q)·(s_k/b_k), 1/16 at the default quarter, and
// otherwise the block is ranked as if the pair were not there: skipped, or
// pooled, which averages the lone key away. Here the first m of a block's
// s draws are its m most outlying tokens (outlierScores) and only the
// other s − m are random. Against any vector u a token's dot product
// differs from the block mean token's by (x − μ)·u, so the tokens far from
// their block's mean, measured per dimension in units of the block's own
// spread there, are the ones whose logits can stand apart from the rest of
// the block's; a needle query or key is such a token, since it attends to,
// or is attended by, what its neighbours are not. The scores cost a few
// passes over each block's tokens and no logits; the draws stay s per
// block, so the logits cost what the paper's do. A needle that does not
// stand out in its block (one that differs from its neighbours no more
// than they differ among themselves, in every dimension) can still be
// missed; NoOutliers gives the paper's draw.

// NoOutliers, as Planner.OutlierQ or OutlierK, draws every sampled token
// at random, as PSA §3.3.1 does.
const NoOutliers = -1

// outlierScores writes to z[j] the outlier score of row j of the n rows of
// x (row-major, d columns each): the squared deviation from the rows' mean,
// dimension by dimension in units of the rows' spread in that dimension,
//
//	z_j = Σ_i (x_ji − μ_i)² / v_i,  μ_i = (Σ_j x_ji) / n,  v_i = Σ_j (x_ji − μ_i)²,
//
// leaving out the dimensions where v_i = 0 (every row equal there). The
// arithmetic is canonical float32: each difference and product rounded on
// its own (no fused multiply-add: every product is converted explicitly),
// μ and v summed in row order, z in dimension order, μ_i and 1/v_i one
// division each, so that the device (kernels/plan_psa.cu, psa_outliers)
// repeats every score bit for bit and draws the same tokens. The scores
// only choose which tokens Sampling draws first, for which float32 is
// ample (TestOutlierScoresFloat32 bounds the error). They are finite and
// ≥ +0 for inputs below 2⁶³ in magnitude (|x − μ| < 2⁶⁴, so no square
// overflows; a v_i that does is +Inf and its dimension adds +0). mean and
// inv are scratch of at least d values.
func outlierScores(x []float32, n, d int, mean, inv, z []float32) {
	mean, inv, z = mean[:d], inv[:d], z[:n]
	clear(mean)
	for j := range n {
		r := x[j*d : (j+1)*d]
		r = r[:len(mean)]
		for i, v := range r {
			mean[i] += v
		}
	}
	for i := range mean {
		mean[i] /= float32(n)
	}
	clear(inv)
	for j := range n {
		r := x[j*d : (j+1)*d]
		r = r[:len(mean)]
		for i, v := range r {
			y := v - mean[i]
			inv[i] += float32(y * y)
		}
	}
	for i, v := range inv {
		if v > 0 {
			inv[i] = 1 / v
		}
	}
	// z: four rows at a time, each summed in dimension order on its own
	// (four dependency chains instead of one; the same sums).
	j := 0
	for ; j+4 <= n; j += 4 {
		r0 := x[j*d : (j+1)*d]
		r1 := x[(j+1)*d : (j+2)*d]
		r2 := x[(j+2)*d : (j+3)*d]
		r3 := x[(j+3)*d : (j+4)*d]
		r0, r1, r2, r3 = r0[:len(inv)], r1[:len(inv)], r2[:len(inv)], r3[:len(inv)]
		var s0, s1, s2, s3 float32
		for i, w := range inv {
			m := mean[i]
			y0, y1, y2, y3 := r0[i]-m, r1[i]-m, r2[i]-m, r3[i]-m
			s0 += float32(float32(y0*y0) * w)
			s1 += float32(float32(y1*y1) * w)
			s2 += float32(float32(y2*y2) * w)
			s3 += float32(float32(y3*y3) * w)
		}
		z[j], z[j+1], z[j+2], z[j+3] = s0, s1, s2, s3
	}
	for ; j < n; j++ {
		r := x[j*d : (j+1)*d]
		r = r[:len(inv)]
		var s float32
		for i, w := range inv {
			y := r[i] - mean[i]
			s += float32(float32(y*y) * w)
		}
		z[j] = s
	}
}

// draw returns s distinct offsets in [0, n), or all n when s ≥ n: first
// the m (at most s) offsets of the largest scores z, largest first and
// ties to the lower offset, each swapped into place in the identity
// permutation as a selection sort does; then s − m drawn from the rest by
// the partial Fisher–Yates shuffle of sample, continued from position m.
// With m = 0 it is sample's draw.
func (e *estimator) draw(r *rand.Rand, n, s, m int, z []float32) []int {
	perm := e.perm[:n]
	for i := range perm {
		perm[i] = i
	}
	if s >= n {
		return perm
	}
	m = min(m, s)
	for i := range m {
		best := i
		for j := i + 1; j < n; j++ {
			if a, b := z[perm[j]], z[perm[best]]; a > b || (a == b && perm[j] < perm[best]) {
				best = j
			}
		}
		perm[i], perm[best] = perm[best], perm[i]
	}
	for i := m; i < s; i++ { // partial Fisher–Yates
		j := i + r.IntN(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm[:s]
}

// blockScores reads rows lo..hi−1 of head h of batch b of x (queries or
// keys) and returns their outlier scores, in the estimator's scratch.
func (e *estimator) blockScores(x interface {
	ReadRow(b, h, n int, dst []float32)
}, b, h, lo, hi int) []float32 {
	d, n := e.g.D, hi-lo
	e.orows = grow(e.orows, n*d)
	for j := range n {
		x.ReadRow(b, h, lo+j, e.orows[j*d:(j+1)*d])
	}
	if len(e.omean) < d {
		e.omean, e.oinv = make([]float32, d), make([]float32, d)
	}
	if len(e.oz) < n {
		e.oz = make([]float32, max(n, e.p.BlockQ, e.p.BlockK))
	}
	outlierScores(e.orows, n, d, e.omean, e.oinv, e.oz)
	return e.oz[:n]
}
