package unisparse

import (
	"math"

	"github.com/sparseattn/sparseattn/internal/kernel"
)

// The outlier query: this project's extension of UniSparse's block
// selection (§4.3), not in the paper.
//
// §4.2 argues that average pooling preserves the ranking of blocks because
// neighbouring tokens are coherent. A query–key pair that stands alone
// breaks that: a single query retrieving a single key (a needle) adds its
// logit to the composite pair's only as 1/(c_q·c_k) of it (1/64 at the
// default 16×4), so the block holding the key gets no more compressed mass
// than its neighbours and falls outside Top-P however large the pair's
// logit. Composites cannot show what they average away, but the token a
// composite represents worst is cheap to find: the one farthest from its
// composite's mean, whose logits the composite may misjudge the most
// (|q·k − q̄·k| ≤ ‖q − q̄‖·‖k‖ for every key k). So each query block's
// outlier query — the token with the largest ‖q − q̄‖ over the block, q̄
// the mean of its c_q-token composite group — is scored against every
// individual key its block sees, and the KV block that takes the most of
// its softmax is kept besides Top-P's. That costs one dot product per
// (query block, key), as many as the compressed pass's (N/B_q·N against
// N/c_q·N/c_k at the defaults, c_q·c_k = B_q), and no position is special:
// whichever query of a block stands out is the one checked.
//
// The order of operations is canonical, as the scorer's (the device
// planner repeats it): the mean is average pooling's (float32 adds in
// token order, then one multiply by 1/n, whatever Pooling says), the
// squared distance adds, in float32 and in increasing d, the squares of
// the differences of the float32 values and the mean (each difference,
// square and sum rounded on its own, nothing fused), and the first token
// of the largest distance wins; the outlier is scaled in float32 as
// composite queries are, its logits are plan.Dot64 of float32 values (in
// kernel.Dot64Panel8) against the keys up to the block's last query's
// causal limit, and the first block of the largest softmax mass wins
// (outlierBlocks says how it is computed).

// outlierStats records token t's squared distance from its composite
// group's mean (x holds the group's c tokens, lo its first token, mean its
// average-pooled composite) and keeps each query block's farthest token,
// the first of ties, in s.otok and its distance in s.odist. Each
// distance is float32, added in increasing d; four tokens' sums run
// interleaved. float32 is ample: the distance only picks the token.
func (s *scorer) outlierStats(x, mean []float32, lo int) {
	D := s.g.D
	n := len(x) / D
	var r [4]float32
	for i0 := 0; i0 < n; i0 += 4 {
		m := min(4, n-i0)
		r = [4]float32{}
		if m == 4 {
			x0, x1, x2, x3 := x[i0*D:(i0+1)*D], x[(i0+1)*D:(i0+2)*D], x[(i0+2)*D:(i0+3)*D], x[(i0+3)*D:(i0+4)*D]
			var r0, r1, r2, r3 float32
			for d, mv := range mean[:D] {
				e0, e1, e2, e3 := x0[d]-mv, x1[d]-mv, x2[d]-mv, x3[d]-mv
				// The conversions round each product on its own: no
				// fused multiply-adds (the device's __fmul_rn, __fadd_rn).
				r0 += float32(e0 * e0)
				r1 += float32(e1 * e1)
				r2 += float32(e2 * e2)
				r3 += float32(e3 * e3)
			}
			r = [4]float32{r0, r1, r2, r3}
		} else {
			for i := range m {
				for d, v := range x[(i0+i)*D : (i0+i+1)*D] {
					e := v - mean[d]
					r[i] += float32(e * e)
				}
			}
		}
		for i := range m {
			t := lo + i0 + i
			qb := t / s.p.BlockQ
			if t%s.p.BlockQ == 0 || r[i] > s.odist[qb] {
				s.odist[qb], s.otok[qb] = r[i], int32(t)
				copy(s.oq[qb*D:(qb+1)*D], x[(i0+i)*D:(i0+i+1)*D])
			}
		}
	}
}

// outlierBlocks fills s.extra with each query block's extra KV block: the
// heaviest block of its outlier query's softmax over the individual keys
// the block sees (−1 for a block that sees none). s.oq holds the outlier
// tokens, unscaled, and s.keyT the keys in interleaved panels.
//
// Masses are compared unnormalised, Σ Exp64(l_j − m) over the block in
// increasing j with m the row's largest logit; the first largest wins.
// Only blocks that can win get their exponentials: the block holding the
// row's largest logit first, then those whose B_k terms, each at most
// e^(max − m), could still reach the best so far (a block whose largest
// logit lies ln(B_k) + 1 below m cannot even reach that first block's 1).
func (s *scorer) outlierBlocks() {
	p, g := s.p, s.g
	D, qbs := g.D, p.QBlocks()
	scale := p.SoftmaxScale()
	const rows, keysPer = 8, 2 * kernel.Dot64Lanes
	margin := math.Log(float64(p.BlockK)) + 1
	for qb0 := 0; qb0 < qbs; qb0 += rows {
		n := min(rows, qbs-qb0)
		most := 0
		var vis [rows]int
		for r := range n {
			vis[r] = s.outlierVisible(qb0 + r)
			most = max(most, vis[r])
		}
		clear(s.oa)
		for i, x := range s.oq[qb0*D : (qb0+n)*D] {
			s.oa[i] = float64(x * scale) // rounded to float32 first, as composite queries
		}
		for j0 := 0; j0 < most; j0 += keysPer {
			kernel.Dot64Panel8(s.oa, D, D, s.keyT[j0*D:], s.oout)
			for r := range n {
				if keys := min(keysPer, vis[r]-j0); keys > 0 {
					copy(s.ol[r*g.Nk+j0:r*g.Nk+j0+keys], s.oout[r*keysPer:r*keysPer+keys])
				}
			}
		}
		for r := range n {
			qb := qb0 + r
			s.extra[qb] = -1
			if vis[r] == 0 {
				continue
			}
			nb := (vis[r] + p.BlockK - 1) / p.BlockK
			l, m := s.ol[r*g.Nk:r*g.Nk+vis[r]], s.obm[:nb]
			full := vis[r] / p.BlockK
			kernel.BlockMaxShift(s.oshift, l[:full*p.BlockK], p.BlockK, m) // block maxima
			if full < nb {
				top := l[full*p.BlockK]
				for _, v := range l[full*p.BlockK:] {
					if v > top {
						top = v
					}
				}
				m[full] = top
			}
			first := 0 // the block of the row's largest logit, the first of ties
			for kb, v := range m {
				if v > m[first] {
					first = kb
				}
			}
			top := m[first] // finite: float64 sums of products of finite float32 values
			best, bestE := first, s.blockExp(l, first, top)
			for kb, v := range m {
				// Block kb holds at most B_k terms of at most e^(v − top);
				// one under bestE by more than rounding cannot win.
				if kb == first || v < top-margin || float64(p.BlockK)*math.Exp(v-top)*(1+1e-9) < bestE {
					continue
				}
				if e := s.blockExp(l, kb, top); e > bestE || e == bestE && kb < best {
					best, bestE = kb, e
				}
			}
			s.extra[qb] = int32(best)
		}
	}
}

// blockExp is Σ Exp64(l_j − top) over block kb's logits, added in
// increasing j from +0.
func (s *scorer) blockExp(l []float64, kb int, top float64) float64 {
	per := s.p.BlockK
	blk := l[kb*per : min(len(l), (kb+1)*per)]
	x := s.ox[:len(blk)]
	for i, v := range blk {
		x[i] = v - top
	}
	kernel.Exp64s(x, x)
	var e float64
	for _, v := range x {
		e += v
	}
	return e
}

// outlierVisible is the number of leading keys query block qb's last query
// sees.
func (s *scorer) outlierVisible(qb int) int {
	p, g := s.p, s.g
	if !p.Causal {
		return g.Nk
	}
	last := min((qb+1)*p.BlockQ, g.Nq) - 1 + g.QueryOffset()
	if last < 0 {
		return 0
	}
	return min(g.Nk, last+1)
}

// outlierKeys returns the individual keys of s.keyT, Nk rows of D values.
func (s *scorer) outlierKeys() []float32 {
	D, lanes := s.g.D, kernel.Dot64Lanes
	out := make([]float32, s.g.Nk*D)
	for t := range s.g.Nk {
		panel := s.keyT[t/lanes*lanes*D:]
		for d := range D {
			out[t*D+d] = panel[d*lanes+t%lanes]
		}
	}
	return out
}
