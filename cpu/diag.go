package cpu

import "github.com/sparseattn/sparseattn/internal/kernel"

// A diagonal block — consecutive keys that the causal boundary crosses —
// costs a full 64×64 tile on the GEMM path though about half of it is
// masked. The functions below cut its two products by panels of query
// rows, each over only the keys its rows can see: about 3/4 of the Q·Kᵀ
// and 9/16 of the P̃·V work of a square diagonal block. Diagonal tiles are
// 3% of a causal 2K-token pass's tiles at 64×64 blocks (1.5% at 4K).

// panelRows is the height of the AVX-512 MatMul micro-kernel's row panels
// (8): a product cut at multiples of it runs every element through the
// same micro-kernel as the uncut one, so with the AVX-512 kernels the
// results are bit for bit those of the full tile (TestDiagonalTrim).
const panelRows = 8

// stripCols is the width of the AVX-512 MatMul's column strips: a product
// over the first multiple of it of B's columns computes those columns as
// the product over all of them does.
const stripCols = 32

// panelReach sets t.reach[p], for each panel p of panelRows of the first
// nq rows, to how many of blk's keys (consecutive tokens) the panel's rows
// can see: the most any of its rows sees, 0 to blk.n. off is the query
// offset (Nk − Nq) that puts a query's last visible key at its token + off.
func (t *tile) panelReach(nq int, blk keyBlock, off int) {
	t.reach = t.reach[:0]
	for i0 := 0; i0 < nq; i0 += panelRows {
		reach := 0
		for i := i0; i < min(nq, i0+panelRows); i++ {
			reach = max(reach, min(blk.n, max(0, int(t.qtok[i])+off-blk.first+1)))
		}
		t.reach = append(t.reach, reach)
	}
}

// diagLogits computes S = (scale·Q)·Kᵀ of a diagonal block, each run of
// panels with the same reach over its visible keys rounded up to whole
// column strips. The logits left out are all masked: the caller's causal
// mask overwrites them with -Inf, as it does the computed ones past each
// row's last visible key.
func (t *tile) diagLogits(nq int, blk keyBlock, d, bk int) {
	cols := func(p int) int { return min(blk.n, (t.reach[p]+stripCols-1)/stripCols*stripCols) }
	for p := 0; p*panelRows < nq; {
		c, q := cols(p), p+1
		for q*panelRows < nq && cols(q) == c {
			q++
		}
		i0, i1 := p*panelRows, min(nq, q*panelRows)
		if c > 0 {
			kernel.MatMul(i1-i0, c, d, t.qt[i0*d:], d, blk.kT, blk.ldk, t.s[i0*bk:], bk, false)
		}
		p = q
	}
}

// diagOutput adds P̃·V of a diagonal block to the first nq output rows,
// each run of panels with the same reach over its visible keys only: the
// probabilities past them are exactly 0 (masked logits), so every element
// is the full product's sum less terms that add +0. It reports whether
// every key of the block was folded into some row, as the input check's
// test of the accumulators needs (a NaN or Inf value in a key no row folds
// would go unseen).
func (t *tile) diagOutput(nq int, blk keyBlock, dv, bk int) (all bool) {
	most := 0
	for p := 0; p*panelRows < nq; {
		k, q := t.reach[p], p+1
		for q*panelRows < nq && t.reach[q] == k {
			q++
		}
		i0, i1 := p*panelRows, min(nq, q*panelRows)
		kernel.MatMul(i1-i0, dv, k, t.s[i0*bk:], bk, blk.v, blk.ldv, t.acc[i0*dv:], dv, true)
		most = max(most, k)
		p = q
	}
	return most == blk.n
}
