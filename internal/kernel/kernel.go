package kernel

import "math"

// MatMul computes C = A·B (accumulate=false) or C += A·B (accumulate=true),
// with A an m×k row-major matrix with row stride lda, B k×n with row stride
// ldb, C m×n with row stride ldc. Only the m×n window of C is written;
// elements of c between rows (the stride padding) are left alone. With
// accumulate=false C is not read, so it may hold garbage, NaN included.
// When k is 0, C is zeroed (or left unchanged when accumulating).
//
// Every element is a float32 sum of k products (plus the old value when
// accumulating), so its error is within about (k+1)·2⁻²⁴·(|c|+Σ|a||b|).
//
// It panics only on programmer error, which callers guarantee not to make:
// negative dimensions, strides smaller than the row widths
// (lda < k, ldb < n, ldc < n) or slices too short for the strides.
func MatMul(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	if m < 0 || n < 0 || k < 0 {
		panic("kernel: MatMul: negative dimension")
	}
	if m == 0 || n == 0 {
		return
	}
	if !fits(m, n, c, ldc) {
		panic("kernel: MatMul: c is too short or ldc < n")
	}
	if k == 0 {
		if !accumulate {
			for i := 0; i < m; i++ {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	if !fits(m, k, a, lda) {
		panic("kernel: MatMul: a is too short or lda < k")
	}
	if !fits(k, n, b, ldb) {
		panic("kernel: MatMul: b is too short or ldb < n")
	}
	matMul(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
}

// fits reports whether x holds a rows×cols matrix with row stride ld
// (rows, cols ≥ 1), without overflowing in the size computation.
func fits(rows, cols int, x []float32, ld int) bool {
	return ld >= cols && len(x) >= cols && (rows-1) <= (len(x)-cols)/ld
}

// ExpShift sets dst[i] = exp(src[i]-shift) for i < len(src) and returns the
// sum of the results. dst must be at least as long as src; it may be src
// itself (same first element) but must not otherwise overlap it.
//
// The difference src[i]-shift is rounded to float32 first; exp of that
// float32 is then accurate to a relative error of at most 9.5e-8 on amd64
// with AVX2+FMA or AVX-512 (the two give bit-identical results) and 1.2e-7
// for the portable code compiled for amd64
// (maxima measured over every float32 argument in [-87.3365, 88.72];
// rounding the exact result to float32 alone costs up to 6e-8).
// Arguments below about -87.3365 (precisely: with floor(x·log2 e) < -126),
// whose exp would be below the smallest normal float32 1.18e-38, give
// exactly 0, and so does -Inf; arguments above ln(MaxFloat32) ≈ 88.72 give
// +Inf; NaN gives NaN. shift must be finite. The sum is accumulated in
// float32 (in 8 or 16 lanes on amd64), with relative error about
// len(src)·2⁻²⁴.
func ExpShift(dst, src []float32, shift float32) float32 {
	if len(dst) < len(src) {
		panic("kernel: ExpShift: dst shorter than src")
	}
	if len(src) == 0 {
		return 0
	}
	return expShift(dst[:len(src)], src, shift)
}

// Max returns the largest element of x, or -Inf when x is empty. NaN
// elements are ignored (all-NaN input gives -Inf); the result for input
// containing both +0 and -0 as its maximum may be either zero.
func Max(x []float32) float32 {
	return maxOf(x)
}

// MaxRows sets out[i] to Max of row i of the m×n matrix s (row stride
// lds), for i < m; out must hold at least m elements. It panics only on
// programmer error: negative dimensions, lds < n, or slices too short.
func MaxRows(m, n int, s []float32, lds int, out []float32) {
	if m < 0 || n < 0 {
		panic("kernel: MaxRows: negative dimension")
	}
	if m == 0 {
		return
	}
	if len(out) < m {
		panic("kernel: MaxRows: out shorter than m")
	}
	if n == 0 {
		for i := range m {
			out[i] = float32(math.Inf(-1))
		}
		return
	}
	if !fits(m, n, s, lds) {
		panic("kernel: MaxRows: s is too short or lds < n")
	}
	maxRows(m, n, s, lds, out)
}

// maxRowsWith is MaxRows on a one-row Max; m, n ≥ 1.
func maxRowsWith(f func(x []float32) float32, m, n int, s []float32, lds int, out []float32) {
	for i := range m {
		out[i] = f(s[i*lds : i*lds+n])
	}
}

// Scale multiplies every element of x by a.
func Scale(x []float32, a float32) {
	scale(x, a)
}

// Dot returns the inner product of a and b[:len(a)]; b must be at least as
// long as a. The sum is taken in several float32 partial sums, so the
// error is within about len(a)·2⁻²⁴·Σ|a||b|.
func Dot(a, b []float32) float32 {
	if len(b) < len(a) {
		panic("kernel: Dot: b shorter than a")
	}
	return dot(a, b[:len(a)])
}

// Axpy sets y[i] += a*x[i] for i < len(x); y must be at least as long as x.
// x and y must not overlap unless they are the same slice.
func Axpy(a float32, x, y []float32) {
	if len(y) < len(x) {
		panic("kernel: Axpy: y shorter than x")
	}
	axpy(a, x, y[:len(x)])
}

// Accelerated names the implementation in use: "avx512" for the amd64
// AVX-512F assembly, "avx2+fma" for the amd64 AVX2 assembly or "generic"
// for the portable Go code.
func Accelerated() string {
	return accelerated
}
