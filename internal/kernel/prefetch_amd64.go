package kernel

// prefetch is Prefetch on a window that lies inside x: one PREFETCHT1 per
// cache line a row touches (any amd64 CPU has the instruction).
func prefetch(rows, cols int, x []float32, ld int) {
	if ld == cols { // contiguous rows: one run of lines
		prefetchT1(&x[0], 1, rows*cols*4, 0)
		return
	}
	prefetchT1(&x[0], rows, cols*4, ld*4)
}

// prefetchT1 issues PREFETCHT1 for the cache lines of rows runs of n bytes,
// ld bytes apart, starting at p; rows, n ≥ 1.
//
//go:noescape
func prefetchT1(p *float32, rows, n, ld int)
