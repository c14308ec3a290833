package selftest

import (
	"math"
	"slices"
	"sort"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// The MInference and FlexPrefill device planners score their probe lines
// on the tensor cores (cuda/kernels/probe.cuh), and the CPU in float64.
// Their judges accept a plan row that differs from the CPU's when some
// perturbation of the CPU's exact scores within the probe's error bound
// (probeTol) explains it: every line kept in all such perturbations is
// kept, and no line kept in none of them is.

// probeTol bounds the relative error of the device probe's line scores,
// for the last n queries of head (b, h), and their absolute error (float32
// underflow). Its logits are QKᵀ on the tensor cores: 16-bit products are
// exact and accumulate in float32 with at most one ulp (2⁻²³, the tensor
// cores truncate) per addition, so a logit is off by at most
// εdot·scale·Σ|q_d·k_d| ≤ εdot·L, with εdot = (D+2)·2⁻²³ and L =
// scale·max‖q_i‖·max‖k_j‖. Float32 inputs are split into bf16 halves
// (three products; the dropped terms are ≤ 3·2⁻¹⁸ relative) and
// accumulate 3D terms. A probability exp(l − max)/Σ is then off by a
// factor within exp(2·εdot·L) (numerator and normalizer). Its float32
// base-2 arithmetic (probe.cuh: P = 2^(a·λ − β), λ = scale·log2 e rounded,
// β = m + log2 S rounded) adds, relative: λ's rounding 2⁻²²·L (it scales
// every logit, numerator and normalizer), the fused multiply-adds'
// rounding 2⁻²⁴·(2L + ln Nk) (the exponent is at most (2L + ln Nk)·log2 e
// in magnitude) in P and 2⁻²⁴·2L in the tile sums, β's 2⁻²⁴·(L + ln Nk):
// below 2⁻²⁰·L + 2·ln(Nk)·2⁻²⁴ in all; and at most 40·2⁻²⁴ more for ex2
// (2 ulp, in P and in the tile sums), the float32 tile sums (depth 11) and
// the float32 partial line sums over 16 rows (depth ≤ 6). A line score, a
// sum of probabilities, is off by the same relative amount. The returned
// tolerance is twice that. ex2.approx.ftz returns 0 below 2⁻¹²⁶: a line
// meets each probe row once, so abs allows 2⁻¹²⁵ per probe row.
func probeTol(t plan.Tiling, q, k *tensor.Tensor, b, h, n int) (rel, abs float64) {
	g := t.Geometry
	n = max(min(n, g.Nq), 0)
	row := make([]float32, g.D)
	norm := func(x *tensor.Tensor, hh, i int) float64 {
		x.ReadRow(b, hh, i, row)
		var s float64
		for _, v := range row {
			s += float64(v) * float64(v)
		}
		return math.Sqrt(s)
	}
	var qn, kn float64
	for i := g.Nq - n; i < g.Nq; i++ {
		qn = max(qn, norm(q, h, i))
	}
	for j := range g.Nk {
		kn = max(kn, norm(k, g.KVHead(h), j))
	}
	L := float64(t.SoftmaxScale()) * qn * kn
	eps := float64(g.D+2) * 0x1p-23
	if q.DType() == tensor.Float32 {
		eps = 3*0x1p-18 + float64(3*g.D+2)*0x1p-23
	}
	rel = 2 * (math.Expm1(2*eps*L+0x1p-20*L) + (40+2*math.Log(float64(max(g.Nk, 1))))*0x1p-24)
	return rel, float64(max(n, 1)) * 0x1p-125
}

// scored is one line (or block) of a selection: its exact score widened to
// the interval [lo, hi] the device's score may take, whether it ranks in
// the forced class (always ahead of the others), and whether it is a
// candidate: surely, maybe (it depends on the rounding), or not at all.
type scored struct {
	lo, hi float64
	forced bool
	cand   candidacy
}

type candidacy int8

const (
	notCand candidacy = iota
	maybeCand
	sureCand
)

// widen is x's interval under relative error rel and absolute error abs
// (scores are non-negative).
func widen(x, rel, abs float64) (lo, hi float64) {
	return max(x-rel*x-abs, 0), x + rel*x + abs
}

// topKBounds bounds a top-k selection (forced class first, then larger
// scores, ties by index) over every perturbation of the scores within
// their intervals and every k in [kLo, kHi]: sure[i] when item i is kept
// in all of them, maybe[i] when it is kept in at least one. Item i is sure
// when it is surely a candidate and fewer than kLo items can rank ahead of
// it; it may be kept when it may be a candidate and fewer than kHi items
// surely rank ahead of it.
func topKBounds(items []scored, kLo, kHi int) (sure, maybe []bool) {
	// Per class: the upper ends of the possible candidates and the lower
	// ends of the sure ones, ascending.
	var possHi, sureLo [2][]float64
	var nPoss, nSure [2]int
	for _, it := range items {
		c := class(it)
		if it.cand >= maybeCand {
			possHi[c] = append(possHi[c], it.hi)
			nPoss[c]++
		}
		if it.cand == sureCand {
			sureLo[c] = append(sureLo[c], it.lo)
			nSure[c]++
		}
	}
	for c := range 2 {
		slices.Sort(possHi[c])
		slices.Sort(sureLo[c])
	}
	sure, maybe = make([]bool, len(items)), make([]bool, len(items))
	for i, it := range items {
		if it.cand == notCand {
			continue
		}
		c := class(it)
		// Items that can rank ahead: a higher class, or this class with
		// an upper end at or above this item's lower end (ties may go
		// either way).
		ahead := len(possHi[c]) - sort.SearchFloat64s(possHi[c], it.lo)
		if it.cand >= maybeCand {
			ahead-- // the item itself
		}
		surelyAhead := len(sureLo[c]) - sort.SearchFloat64s(sureLo[c], math.Nextafter(it.hi, math.Inf(1)))
		if c == 0 {
			ahead += nPoss[1]
			surelyAhead += nSure[1]
		}
		sure[i] = it.cand == sureCand && ahead < kLo
		maybe[i] = surelyAhead < kHi
	}
	return sure, maybe
}

func class(it scored) int {
	if it.forced {
		return 1
	}
	return 0
}

// coverBounds bounds a γ-cover (every item a candidate, ranked by score;
// the items before the first whose running sum exceeds g are taken) over
// every perturbation within the intervals: sure[i] when item i is taken in
// all of them (even the largest sum of the items that can rank ahead of it
// stays within g), maybe[i] when in at least one (the smallest sum of the
// items that surely rank ahead of it, and its own, stays within g).
func coverBounds(items []scored, g float64) (sure, maybe []bool) {
	n := len(items)
	his, los := make([]float64, n), make([]float64, n)
	for i, it := range items {
		his[i], los[i] = it.hi, it.lo
	}
	// Descending, with prefix sums.
	slices.SortFunc(his, func(a, b float64) int { return cmpDesc(a, b) })
	slices.SortFunc(los, func(a, b float64) int { return cmpDesc(a, b) })
	sumHi, sumLo := make([]float64, n+1), make([]float64, n+1)
	for i := range n {
		sumHi[i+1] = sumHi[i] + his[i]
		sumLo[i+1] = sumLo[i] + los[i]
	}
	sure, maybe = make([]bool, n), make([]bool, n)
	for i, it := range items {
		// Items with hi ≥ it.lo (it among them) can rank ahead of or be it.
		a := sort.Search(n, func(j int) bool { return his[j] < it.lo })
		sure[i] = sumHi[a] <= g
		// Items with lo > it.hi surely rank ahead.
		s := sort.Search(n, func(j int) bool { return los[j] <= it.hi })
		maybe[i] = sumLo[s]+it.lo <= g
	}
	return sure, maybe
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// count is the number of true values.
func count(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

// pick returns the indices i (offset by base) where b[i] holds.
func pick(b []bool, base int) []int {
	var out []int
	for i, x := range b {
		if x {
			out = append(out, i+base)
		}
	}
	return out
}

// between reports whether lower ⊆ got ⊆ upper, as sets of blocks.
func between(lower, got, upper []int32) bool {
	for _, kb := range lower {
		if !slices.Contains(got, kb) {
			return false
		}
	}
	for _, kb := range got {
		if !slices.Contains(upper, kb) {
			return false
		}
	}
	return true
}
