package kernel

// Prefetch hints that the rows×cols window of x (row-major, row stride ld)
// will be read soon, and asks that its cache lines be brought into the
// core's L2 cache (PREFETCHT1 on amd64; nothing elsewhere). It never
// changes a result and never faults: the part of the window beyond x is
// ignored. The attention kernel calls it for the next KV block while it
// computes on the current one, so that the block's first reads by the
// GEMM micro-kernels hit L2 rather than wait on L3 or memory.
func Prefetch(rows, cols int, x []float32, ld int) {
	if rows <= 0 || cols <= 0 || ld < cols || len(x) == 0 {
		return
	}
	rows = min(rows, (len(x)-1)/ld+1)
	if last := len(x) - (rows-1)*ld; last < cols { // a short last row
		if rows == 1 {
			cols = last
		} else {
			rows--
		}
	}
	prefetch(rows, cols, x, ld)
}
