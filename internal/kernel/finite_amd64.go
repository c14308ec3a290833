package kernel

// The AVX2 scans (finite_amd64.s). They are memory-bound at 256 bits, so
// AVX-512 machines run them too. Each returns the start of the first
// group (32 elements of 4 bytes, 64 of 2 bytes) holding a non-finite
// element, or n when there is none; n must be a multiple of the group.

//go:noescape
func nonFiniteGroup32(x *float32, n int) int

//go:noescape
func nonFiniteGroup16(x *uint16, n int, expMask uint16) int

func firstNonFinite32(x []float32) int {
	if !hasAVX2 {
		return firstNonFinite32Generic(x)
	}
	return firstNonFinite32AVX2(x)
}

func firstNonFinite16(x []uint16, expMask uint16) int {
	if !hasAVX2 {
		return firstNonFinite16Generic(x, expMask)
	}
	return firstNonFinite16AVX2(x, expMask)
}

// firstNonFinite32AVX2 scans whole groups in assembly, then finds the
// element in the failing group, or in the tail, in Go.
func firstNonFinite32AVX2(x []float32) int {
	n := len(x) &^ 31
	if n > 0 {
		if g := nonFiniteGroup32(&x[0], n); g < n {
			return g + scan32(x[g:g+32])
		}
	}
	if j := scan32(x[n:]); j >= 0 {
		return n + j
	}
	return -1
}

func firstNonFinite16AVX2(x []uint16, expMask uint16) int {
	n := len(x) &^ 63
	if n > 0 {
		if g := nonFiniteGroup16(&x[0], n, expMask); g < n {
			return g + scan16(x[g:g+64], expMask)
		}
	}
	if j := scan16(x[n:], expMask); j >= 0 {
		return n + j
	}
	return -1
}
