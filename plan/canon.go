package plan

import (
	"math"

	"github.com/sparseattn/sparseattn/internal/kernel"
)

// Canonical float64 arithmetic shared by the CPU planners and their device
// versions (cuda/kernels/plan_*.cu), so that both compute the same bits:
// every helper here is a fixed sequence of IEEE-754 double operations with
// no fused multiply-add (explicit conversions forbid fusion), which the
// device code repeats operation for operation.

// Sum64 returns the canonical sum of x: 32 partial sums, partial l adding
// the x[i] with i ≡ l (mod 32) in increasing i, combined by xor butterflies
// 16, 8, 4, 2, 1 exactly as warp_sum in cuda/kernels/device.cuh does.
func Sum64(x []float64) float64 {
	var p [32]float64
	for i, v := range x {
		p[i%32] += v
	}
	for o := 16; o > 0; o >>= 1 {
		var q [32]float64
		for l := range p {
			q[l] = p[l] + p[l^o]
		}
		p = q
	}
	return p[0]
}

// Exp64 is the canonical e^x: x = n·ln 2 + r with n = ⌊x·log2 e + ½⌋ and
// |r| ≤ ln2/2 + ε, a degree-13 Taylor polynomial for e^r in Horner form
// (relative error about 1e-16) and 2ⁿ built in the exponent field. It
// returns 0 below −708 (where e^x would be near or below the smallest
// normal double), +Inf above 709 and NaN for NaN. Its code is
// kernel.Exp64, beside the vector version kernel.Exp64s;
// cuda/kernels/plan_*.cu repeat it as exp64_canon.
func Exp64(x float64) float64 { return kernel.Exp64(x) }

// Dot64 is the canonical dot product of two float32 vectors (b at least as
// long as a): products in float64 (exact), added in increasing index
// order from +0. A fused multiply-add gives the same bits, the product
// being exact.
func Dot64(a, b []float32) float64 {
	b = b[:len(a)]
	var s float64
	for i, x := range a {
		s += float64(x) * float64(b[i])
	}
	return s
}

// AddBlockSoftmax adds to mass[kb] the canonical softmax weight of the
// logits l of one query row, grouped in consecutive blocks of per logits
// (kb = j/per): each block's logits are shifted by the block's own maximum
// mb and their Exp64 summed in increasing j; the block sums are rescaled
// by Exp64(mb − m) with m the row maximum, normalised by their Sum64, and
// each added to its block's mass. Mathematically the weight is
// Σ_{j in kb} softmax(l)_j. mb and eb are scratch of at least ⌈len(l)/per⌉
// values. A row without logits adds nothing.
func AddBlockSoftmax(mass, l []float64, per int, mb, eb []float64) {
	nb := (len(l) + per - 1) / per
	if nb == 0 {
		return
	}
	m := math.Inf(-1)
	for kb := range nb {
		blk := l[kb*per : min(len(l), (kb+1)*per)]
		bm := math.Inf(-1)
		for _, v := range blk {
			if v > bm {
				bm = v
			}
		}
		var e float64
		for _, v := range blk {
			e += Exp64(v - bm)
		}
		mb[kb], eb[kb] = bm, e
		if bm > m {
			m = bm
		}
	}
	for kb := range nb {
		eb[kb] *= Exp64(mb[kb] - m)
	}
	sum := Sum64(eb[:nb])
	for kb := range nb {
		mass[kb] += eb[kb] / sum
	}
}

// Dot64x4 returns Dot64(a, b0), …, Dot64(a, b3), bit for bit; the four
// independent sums run interleaved, about four times as fast.
func Dot64x4(a, b0, b1, b2, b3 []float32) (s0, s1, s2, s3 float64) {
	b0, b1, b2, b3 = b0[:len(a)], b1[:len(a)], b2[:len(a)], b3[:len(a)]
	for i, x := range a {
		xf := float64(x)
		s0 += xf * float64(b0[i])
		s1 += xf * float64(b1[i])
		s2 += xf * float64(b2[i])
		s3 += xf * float64(b3[i])
	}
	return
}
