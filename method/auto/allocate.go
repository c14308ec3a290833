package auto

import (
	"cmp"
	"math"
	"slices"
)

// allocate picks one option per head (an index into its frontier's
// options) so that the layer's mean sparsity is high while its rel L1,
// Σ_h diff_h / Σ_h |O_h| on each calibration input, stays within limit.
// It returns the picks and the layer's largest rel L1 over the inputs.
//
// This is a multiple-choice knapsack: each head's options cost their
// share of the layer's error (the head's Σ|O − O'| over the layer's Σ|O|,
// so the cost is |O|-weighted) and gain their sparsity. Every head starts
// at its cheapest option; then, greedily, the head whose next point on
// its upper convex hull of (cost, sparsity) buys the most sparsity per
// unit of cost moves there, while that fits; a head whose next move does
// not fit stops. A last pass takes, while any fits, the single-head
// change (to any option, on the hull or not) that adds the most sparsity,
// so that no single head can then be made sparser within the budget.
func allocate(fronts []frontier, limit float64) ([]int, float64) {
	if len(fronts) == 0 {
		return nil, 0
	}
	inputs := len(fronts[0].abs)
	total := make([]float64, inputs) // the layer's Σ|O| per input
	for _, f := range fronts {
		for i, a := range f.abs {
			total[i] += a
		}
	}
	contrib := func(o *option, i int) float64 {
		if total[i] == 0 {
			return 0
		}
		return o.diff[i] / total[i]
	}
	cost := func(o *option) float64 {
		var c float64
		for i := range inputs {
			c += contrib(o, i)
		}
		return c / float64(inputs)
	}
	pick := make([]int, len(fronts))
	err := make([]float64, inputs) // the layer's rel L1 per input at pick
	opt := func(h, k int) *option { return &fronts[h].options[k] }
	fits := func(h, k int) bool {
		for i := range inputs {
			if err[i]-contrib(opt(h, pick[h]), i)+contrib(opt(h, k), i) > limit {
				return false
			}
		}
		return true
	}
	move := func(h, k int) {
		for i := range inputs {
			err[i] += contrib(opt(h, k), i) - contrib(opt(h, pick[h]), i)
		}
		pick[h] = k
	}

	hulls := make([][]int, len(fronts))
	for h, f := range fronts {
		hulls[h] = hull(f.options, cost)
		move(h, hulls[h][0])
	}
	pos := make([]int, len(fronts)) // each head's place on its hull
	for {
		best, bestRate := -1, math.Inf(-1)
		for h, hl := range hulls {
			if pos[h]+1 >= len(hl) {
				continue
			}
			a, b := opt(h, hl[pos[h]]), opt(h, hl[pos[h]+1])
			rate := math.Inf(1)
			if dc := cost(b) - cost(a); dc > 0 {
				rate = (b.sparsity - a.sparsity) / dc
			}
			if rate > bestRate {
				best, bestRate = h, rate
			}
		}
		if best < 0 {
			break
		}
		next := hulls[best][pos[best]+1]
		if !fits(best, next) {
			hulls[best] = hulls[best][:pos[best]+1] // error only grows from here: it never fits
			continue
		}
		move(best, next)
		pos[best]++
	}
	for {
		bh, bk, gain := -1, 0, 0.0
		for h, f := range fronts {
			cur := f.options[pick[h]].sparsity
			for k := range f.options {
				if g := f.options[k].sparsity - cur; g > gain && fits(h, k) {
					bh, bk, gain = h, k, g
				}
			}
		}
		if bh < 0 {
			break
		}
		move(bh, bk)
	}
	return pick, slices.Max(err)
}

// hull returns the indices of the options on the upper convex hull of
// (cost, sparsity), from the cheapest (the sparsest of the cheapest) on,
// sparsity strictly rising: the options a greedy allocation moves
// through.
func hull(opts []option, cost func(*option) float64) []int {
	idx := make([]int, len(opts))
	c := make([]float64, len(opts))
	for i := range opts {
		idx[i], c[i] = i, cost(&opts[i])
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if r := cmp.Compare(c[a], c[b]); r != 0 {
			return r
		}
		return cmp.Compare(opts[b].sparsity, opts[a].sparsity)
	})
	sp := func(i int) float64 { return opts[i].sparsity }
	var out []int
	for _, o := range idx {
		if len(out) > 0 && sp(o) <= sp(out[len(out)-1]) {
			continue // no sparser than a cheaper option
		}
		for len(out) >= 2 {
			a, b := out[len(out)-2], out[len(out)-1]
			// b on or under the segment a→o: not on the hull.
			if (sp(b)-sp(a))*(c[o]-c[a]) <= (sp(o)-sp(a))*(c[b]-c[a]) {
				out = out[:len(out)-1]
				continue
			}
			break
		}
		out = append(out, o)
	}
	return out
}
