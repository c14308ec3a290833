package selftest

import "math"

// tensorCoreShareTol bounds how far a share of a row's block mass computed
// by the device block-mass kernel (cuda/kernels/block_mass.cuh) may lie
// from the CPU planner's float64 share, for logits scale·Σ_l q_l·k_l whose
// terms sum in absolute value to at most bound (in natural-log units):
//
//   - terms: 16-bit operands multiply exactly in float32; float32 values
//     split into bf16 halves lose the low·low product and the low halves'
//     rounding, at most 3·2⁻¹⁶ of each term (split);
//   - the float32 accumulation of n products (3·L when split, else L, the
//     row length) errs by at most n·2⁻²³ of their absolute sum, whatever
//     the order and with truncation instead of rounding;
//   - so a logit errs by δ ≤ bound·(3·2⁻¹⁶·[split] + (n + 8)·2⁻²³), the 8
//     covering the scaling to log2 units, the shift by the row maximum and
//     exp2's relative error;
//   - every softmax weight then moves by a factor within e^{±2δ}, and its
//     float32 sums over at most cols columns add (cols + 64)·2⁻²³; a
//     block's share (its mass over the row total) errs by at most twice
//     that, η = 2·(2δ + (cols + 64)·2⁻²³).
//
// The tolerance is 2η: a margin of two on a worst-case bound.
func tensorCoreShareTol(bound float64, n, cols int, split bool) float64 {
	const u = 0x1p-23
	delta := bound * float64(n+8) * u
	if split {
		delta += bound * 3 * 0x1p-16
	}
	eta := 2 * (math.Expm1(2*delta) + float64(cols+64)*u)
	return 2 * eta
}

// shares returns mass over its total, or nil when the total is 0.
func shares(mass []float64) []float64 {
	var total float64
	for _, m := range mass {
		total += m
	}
	if total == 0 {
		return nil
	}
	out := make([]float64, len(mass))
	for i, m := range mass {
		out[i] = m / total
	}
	return out
}
