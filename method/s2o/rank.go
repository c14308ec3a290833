package s2o

import "math"

// ranker sorts index lists by descending float32 score, stably: equal
// scores (−0 and +0 included) keep their order in the list. It is what
// slices.SortStableFunc with descending gives, in four linear passes (a
// least-significant-digit radix sort on order-preserving keys) instead of
// O(n log² n) element moves, and with no allocation once its buffers have
// grown. A NaN score sorts after every other; the comparison sort it
// replaces left such lists in an unspecified order.
type ranker struct {
	key, keyTmp []uint32
	idxTmp      []int32
	count       [4][257]int
}

// descKey maps a score to a key whose ascending order is the score's
// descending order, with −0 and +0 equal and NaN last.
func descKey(s float32) uint32 {
	switch {
	case s != s:
		return math.MaxUint32
	case s == 0:
		s = 0 // −0 ties with +0, as the comparison does
	}
	u := math.Float32bits(s)
	if u&(1<<31) != 0 {
		u = ^u // negative: larger magnitude is smaller
	} else {
		u |= 1 << 31
	}
	return ^u
}

// sort reorders idx by descending score[idx[i]], stably.
func (r *ranker) sort(idx []int32, score []float32) {
	n := len(idx)
	if n < 2 {
		return
	}
	if cap(r.key) < n {
		r.key, r.keyTmp, r.idxTmp = make([]uint32, n), make([]uint32, n), make([]int32, n)
	}
	key, keyTmp, idxTmp := r.key[:n], r.keyTmp[:n], r.idxTmp[:n]
	r.count = [4][257]int{}
	for i, j := range idx {
		k := descKey(score[j])
		key[i] = k
		for d := range 4 {
			r.count[d][k>>(8*d)&0xff+1]++
		}
	}
	for d := range 4 {
		c := &r.count[d]
		if c[key[0]>>(8*d)&0xff+1] == n {
			continue // every key has this digit: the pass would not move anything
		}
		for i := 1; i < 257; i++ {
			c[i] += c[i-1]
		}
		for i, k := range key {
			p := &c[k>>(8*d)&0xff]
			keyTmp[*p], idxTmp[*p] = k, idx[i]
			*p++
		}
		copy(key, keyTmp)
		copy(idx, idxTmp)
	}
}
