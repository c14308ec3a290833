package kernel

import "golang.org/x/sys/cpu"

// accelerated records, once at initialization, whether the CPU (and OS)
// support AVX2 and FMA. It is never written afterwards.
var accelerated = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// Rows of C per micro-kernel panel.
const panelRows = 6

// The assembly micro-kernels, all in kernel_amd64.s. Strides are in
// elements; mr is 1..panelRows; k ≥ 1. gemm16 and gemm8 compute an mr×16
// or mr×8 block of C, gemmMask an mr×nr block with 1 ≤ nr ≤ 7.

//go:noescape
func gemm16(mr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func gemm8(mr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func gemmMask(mr, nr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

// expShiftAVX2 handles any n ≥ 1 (the last n mod 8 with masked moves).
//
//go:noescape
func expShiftAVX2(dst, src *float32, n int, shift float32) float32

// The following take n a positive multiple of 8.

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func scaleAVX2(x *float32, n int, a float32)

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func axpyAVX2(x, y *float32, n int, a float32)

func matMul(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	if !accelerated {
		matMulGeneric(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
		return
	}
	// Column strips outside, row panels inside: the k×16 slice of B read
	// by all panels of a strip stays in L1.
	j := 0
	for ; j+16 <= n; j += 16 {
		for i := 0; i < m; i += panelRows {
			gemm16(min(panelRows, m-i), k, &a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, accumulate)
		}
	}
	if j+8 <= n {
		for i := 0; i < m; i += panelRows {
			gemm8(min(panelRows, m-i), k, &a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, accumulate)
		}
		j += 8
	}
	if j < n {
		for i := 0; i < m; i += panelRows {
			gemmMask(min(panelRows, m-i), n-j, k, &a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, accumulate)
		}
	}
}

func expShift(dst, src []float32, shift float32) float32 {
	if !accelerated {
		return expShiftGeneric(dst, src, shift)
	}
	return expShiftAVX2(&dst[0], &src[0], len(src), shift)
}

func maxOf(x []float32) float32 {
	n := len(x) &^ 7
	if !accelerated || n == 0 {
		return maxGeneric(x)
	}
	m := maxAVX2(&x[0], n)
	for _, v := range x[n:] {
		if v > m {
			m = v
		}
	}
	return m
}

func scale(x []float32, a float32) {
	n := len(x) &^ 7
	if !accelerated || n == 0 {
		scaleGeneric(x, a)
		return
	}
	scaleAVX2(&x[0], n, a)
	scaleGeneric(x[n:], a)
}

func dot(a, b []float32) float32 {
	n := len(a) &^ 7
	if !accelerated || n == 0 {
		return dotGeneric(a, b)
	}
	return dotAVX2(&a[0], &b[0], n) + dotGeneric(a[n:], b[n:])
}

func axpy(a float32, x, y []float32) {
	n := len(x) &^ 7
	if !accelerated || n == 0 {
		axpyGeneric(a, x, y)
		return
	}
	axpyAVX2(&x[0], &y[0], n, a)
	axpyGeneric(a, x[n:], y[n:])
}
