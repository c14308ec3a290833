package psa

import (
	"cmp"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn/plan"
)

// assign writes the level of each of a row's blocks into lv from their
// importance imp (PSA §3.3.2). Importance need not be normalized; a row whose
// importance is all zero is treated as uniform.
func assign(c config, imp []float64, lv []plan.Level) {
	n := len(imp)
	if n == 0 {
		return
	}
	order := descending(imp) // ties keep key order, so plans are deterministic
	for i := range lv {
		lv[i] = plan.Skip
	}
	switch c.rule {
	case Threshold:
		total := chunkedSum(imp)
		// PSA Alg. 2 with cumulative thresholds T = {τ_1 ≤ … ≤ τ_H}: a block
		// gets the first level t whose threshold its preceding mass has not
		// yet reached, so level t's set is the smallest prefix whose mass
		// reaches τ_t (the crossing block included, as the authors' code
		// does; the paper's literal "Ê ≤ τ" would drop the block that
		// crosses, even a row's heaviest). τ = 1 keeps everything.
		// The preceding mass by chunks, as chunkedSum: a chunk's own
		// running sum on top of the chunks' before it.
		var base, inChunk float64
		for p, e := range order {
			if p%sumChunk == 0 {
				base += inChunk
				inChunk = 0
			}
			w := 1 / float64(n) // uniform when the row carries no mass
			if total > 0 {
				w = imp[e] / total
			}
			before := base + inChunk
			for t, tau := range c.cuts {
				if tau >= 1 || before < tau {
					lv[e] = plan.Level(t + 1)
					break
				}
			}
			inChunk += w
		}
	case Quantile:
		// PSA §4.5, quantile-based rule: fixed cumulative shares of the row's
		// blocks per level, rounded up so a positive share keeps a block.
		for p, e := range order {
			for t, share := range c.cuts {
				if p < quota(share, n) {
					lv[e] = plan.Level(t + 1)
					break
				}
			}
		}
	}
}

// descending returns the indices of x from its largest value to its
// smallest, equal values in index order (a stable sort).
func descending[E cmp.Ordered](x []E) []int {
	order := make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(x[b], x[a]) })
	return order
}

// sumChunk is the chunk of assign's sums (the device's PSA_SUM_CHUNK).
const sumChunk = 32

// chunkedSum is the sum of x by chunks of sumChunk: each chunk summed in
// order, then the chunks' sums in order. It is the canonical order of
// assign's float64 sums, which the device planner repeats bit for bit
// (kernels/plan_psa.cu, psa_assign) with a chunk a thread; up to sumChunk
// values it is the plain sum in order.
func chunkedSum(x []float64) float64 {
	var total float64
	for c := 0; c < len(x); c += sumChunk {
		var s float64
		for _, v := range x[c:min(c+sumChunk, len(x))] {
			s += v
		}
		total += s
	}
	return total
}

// quota is ⌈share·n⌉, robust to share·n landing a rounding error above an
// integer.
func quota(share float64, n int) int {
	return int(math.Ceil(share*float64(n) - 1e-9))
}
