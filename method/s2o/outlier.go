package s2o

// The outlier queries: this project's extension of S2O's key ranking
// (§3.1 (ii), Eq. 2, and the early stop of §3.2), not in the paper.
//
// KV_perm ranks a segment's prefix keys by their score against the
// segment's mean query, and pass 2 stops a query tile after the first
// prefix tile that adds less than τ·ℓ for every query of the tile. A key
// that matters to one query of the segment alone (a needle: one query
// retrieving one distant key) barely moves the mean query's score, so it
// ranks low, and the stop ends the row long before its tile: the mean
// represents that query worst. What stands out is the query itself: the
// segment's queries farthest from the mean the order is built from are
// the ones it may misjudge the most (|q·k − q̄·k| ≤ ‖q − q̄‖·‖k‖ for every
// key k). So the Outliers queries of each segment with the largest
// ‖q − q̄‖ are each scored against every ranked key of the segment, and
// each one's top key moves to the front of the segment's ranked keys,
// where pass 2 always computes it: the first pass-2 tile of every row is
// computed before the stop can fire. A tile's worth of keys at most moves
// (Outliers ≤ BlockK keeps them all in that first tile); the rest keep
// KV_perm's order. No position is special: whichever queries of a segment
// stand out are checked.
//
// The order of operations is canonical (the device planner,
// cuda/kernels/plan_s2o.cu, repeats it): q̄ is the segment's mean query of
// Eq. 2 (meanRows, rounded to float32); a query's squared distance adds
// float64 differences of the float32 values, squared and rounded, in
// increasing d (NaN, which only non-finite inputs give, as −1); the
// outliers are the Outliers largest distances, the earliest token of ties
// first. Each outlier's scores are Score (Eq. 2's canonical score, with the
// outlier in place of q̄) over the ranked keys, and its top key is the
// smallest keyRank: the largest score (the ranker's order: −0 and +0 equal,
// NaN last), the earliest token of ties. The scores run in the panels of
// kernel.Dot64Panel8 with the mean queries' (panel.go). The
// moved keys lead the ranked part in increasing token order, the others
// follow in KV_perm's order (what a stable sort gives when the moved keys
// sort before every score).

// DefaultOutliers is the number of outlier queries per segment that a zero
// Planner.Outliers means.
const DefaultOutliers = 1

// NoOutliers is the Planner.Outliers that checks no outlier query: the
// paper's key order (any negative value does the same).
const NoOutliers = -1

// distances sets dist[i] to the canonical squared distance of row i of the
// row-major matrix x (d columns) from mean, four rows at a time; −1 where
// it is NaN.
func distances(dist []float64, x, mean []float32, d int) {
	n := len(x) / d
	mean = mean[:d]
	i := 0
	for ; i+4 <= n; i += 4 {
		x0, x1, x2, x3 := x[i*d:(i+1)*d], x[(i+1)*d:(i+2)*d], x[(i+2)*d:(i+3)*d], x[(i+3)*d:(i+4)*d]
		var r0, r1, r2, r3 float64
		for c, mv := range mean {
			m := float64(mv)
			e0, e1, e2, e3 := float64(x0[c])-m, float64(x1[c])-m, float64(x2[c])-m, float64(x3[c])-m
			// The conversions forbid fused multiply-adds.
			r0 += float64(e0 * e0)
			r1 += float64(e1 * e1)
			r2 += float64(e2 * e2)
			r3 += float64(e3 * e3)
		}
		dist[i], dist[i+1], dist[i+2], dist[i+3] = noNaN(r0), noNaN(r1), noNaN(r2), noNaN(r3)
	}
	for ; i < n; i++ {
		var r float64
		for c, mv := range mean {
			e := float64(x[i*d+c]) - float64(mv)
			r += float64(e * e)
		}
		dist[i] = noNaN(r)
	}
}

// noNaN is r, or −1 for NaN (which only non-finite inputs give): below
// every distance.
func noNaN(r float64) float64 {
	if r != r {
		return -1
	}
	return r
}

// pickOutliers appends to out the indices of the k largest values of dist
// (all of them when there are fewer), largest first, the earliest index of
// ties first: each pick is the largest (value, earliest index) below the
// previous one in that order.
func pickOutliers(out []int, dist []float64, k int) []int {
	pd, pi := 0.0, -1 // the previous pick
	for range min(k, len(dist)) {
		bi := -1
		for i, v := range dist {
			below := pi < 0 || v < pd || v == pd && i > pi
			if below && (bi < 0 || v > dist[bi]) {
				bi = i
			}
		}
		out = append(out, bi)
		pd, pi = dist[bi], bi
	}
	return out
}

// keyRank is what the top key of an outlier query minimises: descKey of
// its score (larger scores first, −0 and +0 equal, NaN last), then the
// token.
func keyRank(s float32, j int) uint64 { return uint64(descKey(s))<<32 | uint64(uint32(j)) }

// promote moves the tokens of moved (distinct, in increasing order) to the
// front of ranked, keeping the others' order.
func promote(ranked, moved []int32) {
	if len(moved) == 0 {
		return
	}
	w := len(ranked) - 1
	for i := len(ranked) - 1; i >= 0; i-- {
		j := ranked[i]
		isMoved := false
		for _, m := range moved {
			isMoved = isMoved || m == j
		}
		if !isMoved {
			ranked[w] = j
			w--
		}
	}
	copy(ranked, moved)
}
