package psa

import (
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
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	// Descending importance; ties keep key order, so plans are deterministic.
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case imp[a] > imp[b]:
			return -1
		case imp[a] < imp[b]:
			return 1
		}
		return 0
	})
	for i := range lv {
		lv[i] = plan.Skip
	}
	switch c.rule {
	case Threshold:
		var total float64
		for _, x := range imp {
			total += x
		}
		// PSA Alg. 2 with cumulative thresholds T = {τ_1 ≤ … ≤ τ_H}: a block
		// gets the first level t whose threshold its preceding mass has not
		// yet reached, so level t's set is the smallest prefix whose mass
		// reaches τ_t (the crossing block included, as the authors' code
		// does; the paper's literal "Ê ≤ τ" would drop the block that
		// crosses, even a row's heaviest). τ = 1 keeps everything.
		var before float64
		for _, e := range order {
			w := 1 / float64(n) // uniform when the row carries no mass
			if total > 0 {
				w = imp[e] / total
			}
			for t, tau := range c.cuts {
				if tau >= 1 || before < tau {
					lv[e] = plan.Level(t + 1)
					break
				}
			}
			before += w
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

// quota is ⌈share·n⌉, robust to share·n landing a rounding error above an
// integer.
func quota(share float64, n int) int {
	return int(math.Ceil(share*float64(n) - 1e-9))
}
