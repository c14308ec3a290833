package kernel

import "golang.org/x/sys/cpu"

// The CPU (and OS) support for each assembly implementation, recorded once
// at initialization and never written afterwards. golang.org/x/sys/cpu
// applies GODEBUG=cpu.<feature>=off before these are computed, so
// cpu.avx2=off or cpu.fma=off selects the portable code (whatever the
// AVX-512 support) and cpu.avx512f=off (or cpu.avx512=off) the AVX2 code.
var (
	// hasAVX2 reports AVX2 and FMA: the kernels in kernel_amd64.s.
	hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	// hasAVX512 reports AVX512F on top of AVX2 and FMA: the kernels in
	// kernel_avx512_amd64.s (which use VEX-encoded AVX instructions too).
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512 && cpu.X86.HasAVX512F
)

// accelerated names the implementation in use, for Accelerated.
var accelerated = func() string {
	switch {
	case hasAVX512:
		return "avx512"
	case hasAVX2:
		return "avx2+fma"
	}
	return "generic"
}()

// The dispatching functions called by the exported API: the best
// implementation the CPU supports. The per-implementation functions below
// them (matMulAVX512, matMulAVX2, …) are also called directly by the tests.

func matMul(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	switch {
	case hasAVX512:
		matMulAVX512(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
	case hasAVX2:
		matMulAVX2(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
	default:
		matMulGeneric(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
	}
}

func expShift(dst, src []float32, shift float32) float32 {
	switch {
	case hasAVX512:
		return expShiftAVX512(dst, src, shift)
	case hasAVX2:
		return expShiftAVX2(dst, src, shift)
	}
	return expShiftGeneric(dst, src, shift)
}

func maxOf(x []float32) float32 {
	switch {
	case hasAVX512:
		return maxAVX512(x)
	case hasAVX2:
		return maxAVX2(x)
	}
	return maxGeneric(x)
}

func maxRows(m, n int, s []float32, lds int, out []float32) {
	switch {
	case hasAVX512:
		maxRowsZ(&s[0], lds*4, m, n, &out[0])
	case hasAVX2:
		maxRowsWith(maxAVX2, m, n, s, lds, out)
	default:
		maxRowsWith(maxGeneric, m, n, s, lds, out)
	}
}

func scale(x []float32, a float32) {
	switch {
	case hasAVX512:
		scaleAVX512(x, a)
	case hasAVX2:
		scaleAVX2(x, a)
	default:
		scaleGeneric(x, a)
	}
}

func dotRows(m, n, d int, q []float32, ldq int, k []float32, ldk int, s []float32, lds int) {
	switch {
	case hasAVX512:
		dotRowsAVX512(m, n, d, q, ldq, k, ldk, s, lds)
	case hasAVX2:
		dotRowsWith(dotAVX2, m, n, d, q, ldq, k, ldk, s, lds)
	default:
		dotRowsGeneric(m, n, d, q, ldq, k, ldk, s, lds)
	}
}

func dot(a, b []float32) float32 {
	switch {
	case hasAVX512:
		return dotAVX512(a, b)
	case hasAVX2:
		return dotAVX2(a, b)
	}
	return dotGeneric(a, b)
}

func axpy(a float32, x, y []float32) {
	switch {
	case hasAVX512:
		axpyAVX512(a, x, y)
	case hasAVX2:
		axpyAVX2(a, x, y)
	default:
		axpyGeneric(a, x, y)
	}
}

// ---------------------------------------------------------------------------
// AVX2+FMA (kernel_amd64.s). The Go functions have the contracts of the
// generic ones (MatMul's arguments checked, m, n, k ≥ 1; len(b) ≥ len(a)
// for dot, len(y) ≥ len(x) for axpy) and must only be called when hasAVX2.

// Rows of C per AVX2 micro-kernel panel.
const panelRows = 6

// The assembly micro-kernels. Strides are in elements; mr is 1..panelRows;
// k ≥ 1. gemm16 and gemm8 compute an mr×16 or mr×8 block of C, gemmMask an
// mr×nr block with 1 ≤ nr ≤ 7.

//go:noescape
func gemm16(mr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func gemm8(mr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func gemmMask(mr, nr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

// expShiftY handles any n ≥ 1 (the last n mod 8 with masked moves).
//
//go:noescape
func expShiftY(dst, src *float32, n int, shift float32) float32

// The following take n a positive multiple of 8.

//go:noescape
func maxY(x *float32, n int) float32

//go:noescape
func scaleY(x *float32, n int, a float32)

//go:noescape
func dotY(a, b *float32, n int) float32

//go:noescape
func axpyY(x, y *float32, n int, a float32)

// matMulAVX2 is MatMul on 6×16 AVX2 micro-kernels.
func matMulAVX2(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
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

func expShiftAVX2(dst, src []float32, shift float32) float32 {
	if len(src) == 0 {
		return 0
	}
	dst = dst[:len(src)]
	return expShiftY(&dst[0], &src[0], len(src), shift)
}

func maxAVX2(x []float32) float32 {
	n := len(x) &^ 7
	if n == 0 {
		return maxGeneric(x)
	}
	m := maxY(&x[0], n)
	for _, v := range x[n:] {
		if v > m {
			m = v
		}
	}
	return m
}

func scaleAVX2(x []float32, a float32) {
	n := len(x) &^ 7
	if n == 0 {
		scaleGeneric(x, a)
		return
	}
	scaleY(&x[0], n, a)
	scaleGeneric(x[n:], a)
}

func dotAVX2(a, b []float32) float32 {
	n := len(a) &^ 7
	if n == 0 {
		return dotGeneric(a, b)
	}
	b = b[:len(a)]
	return dotY(&a[0], &b[0], n) + dotGeneric(a[n:], b[n:])
}

func axpyAVX2(a float32, x, y []float32) {
	n := len(x) &^ 7
	if n == 0 {
		axpyGeneric(a, x, y)
		return
	}
	y = y[:len(x)]
	axpyY(&x[0], &y[0], n, a)
	axpyGeneric(a, x[n:], y[n:])
}

// ---------------------------------------------------------------------------
// AVX-512F (kernel_avx512_amd64.s). Same contracts as the AVX2 functions;
// they must only be called when hasAVX512.

// Rows of C per AVX-512 micro-kernel panel.
const panelRowsZ = 8

// The assembly micro-kernels. Strides are in elements; mr is
// 1..panelRowsZ; k ≥ 1. gemmZ32 computes an mr×32 block of C, gemmZ16 an
// mr×nr block with 1 ≤ nr ≤ 16 (through a lane mask).

//go:noescape
func gemmZ32(mr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func gemmZ16(mr, nr, k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

// The following take any n ≥ 1 (the last n mod 16 under a lane mask).

//go:noescape
func expShiftZ(dst, src *float32, n int, shift float32) float32

//go:noescape
func maxZ(x *float32, n int) float32

// maxRowsZ is MaxRows for m, n ≥ 1; lds in bytes.
//
//go:noescape
func maxRowsZ(s *float32, lds, m, n int, out *float32)

//go:noescape
func scaleZ(x *float32, n int, a float32)

//go:noescape
func dotZ(a, b *float32, n int) float32

//go:noescape
func axpyZ(x, y *float32, n int, a float32)

// blockBytesZ bounds the size of the block of B that matMulAVX512 keeps in
// L1 while all row panels of A pass over it: 32 KiB of the 48 KiB L1 data
// cache of recent Intel server cores (32 KiB on AMD Zen 4, where part of
// the block then comes from L2).
const blockBytesZ = 32 << 10

// matMulAVX512 is MatMul on 8×32 AVX-512 micro-kernels, with one or two
// 16-column strips (the last one masked) for the ragged edge.
//
// B is cut into column blocks of nb columns, k·nb·4 ≤ blockBytesZ (but at
// least one 32-column strip), so that a block stays in L1 while every
// 8-row panel of A is multiplied by it, strip by strip; the panel (8·k
// elements) stays in L1 across the strips. For the usual attention tiles
// (k·n·4 ≤ 32 KiB: a Kᵀ or V block of 64 keys with a head dimension of at
// most 128) there is a single block and the loop is simply panel by panel.
func matMulAVX512(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	nb := max(32, blockBytesZ/(4*k)&^31)
	for jb := 0; jb < n; {
		je := min(n, jb+nb)
		if n-je < 32 {
			je = n // a ragged edge joins the last block
		}
		for i := 0; i < m; i += panelRowsZ {
			mr := min(panelRowsZ, m-i)
			ai, ci := a[i*lda:], c[i*ldc:]
			j := jb
			for ; j+32 <= je; j += 32 {
				gemmZ32(mr, k, &ai[0], lda, &b[j], ldb, &ci[j], ldc, accumulate)
			}
			for ; j < je; j += 16 {
				gemmZ16(mr, min(16, je-j), k, &ai[0], lda, &b[j], ldb, &ci[j], ldc, accumulate)
			}
		}
		jb = je
	}
}

func expShiftAVX512(dst, src []float32, shift float32) float32 {
	if len(src) == 0 {
		return 0
	}
	dst = dst[:len(src)]
	return expShiftZ(&dst[0], &src[0], len(src), shift)
}

func maxAVX512(x []float32) float32 {
	if len(x) == 0 {
		return maxGeneric(x)
	}
	return maxZ(&x[0], len(x))
}

func scaleAVX512(x []float32, a float32) {
	if len(x) > 0 {
		scaleZ(&x[0], len(x), a)
	}
}

func dotAVX512(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	b = b[:len(a)]
	return dotZ(&a[0], &b[0], len(a))
}

func axpyAVX512(a float32, x, y []float32) {
	if len(x) == 0 {
		return
	}
	y = y[:len(x)]
	axpyZ(&x[0], &y[0], len(x), a)
}

// The DotRows kernels (dotrows_avx512_amd64.s): 4 (dotRows4Z) or 1
// (dotRows1Z) query rows against n4·4 keys, d a positive multiple of 16.
// Strides and dBytes are in bytes; kStep is 4·ldk in bytes.

//go:noescape
func dotRows4Z(q *float32, ldq int, k *float32, ldk int, s *float32, lds int, n4, dBytes int)

//go:noescape
func dotRows1Z(q *float32, k *float32, ldk int, s *float32, n4, dBytes int)

// dotRowsAVX512 runs the assembly on groups of four keys and of four rows
// (a ragged row count in single rows), and dot products on what is left:
// the last n mod 4 keys, and every key when d is not a multiple of 16.
func dotRowsAVX512(m, n, d int, q []float32, ldq int, k []float32, ldk int, s []float32, lds int) {
	n4 := n / 4
	if d%16 != 0 || n4 == 0 {
		dotRowsWith(dotAVX512, m, n, d, q, ldq, k, ldk, s, lds)
		return
	}
	i := 0
	for ; i+4 <= m; i += 4 {
		dotRows4Z(&q[i*ldq], ldq*4, &k[0], ldk*4, &s[i*lds], lds*4, n4, d*4)
	}
	for ; i < m; i++ {
		dotRows1Z(&q[i*ldq], &k[0], ldk*4, &s[i*lds], n4, d*4)
	}
	if r := n4 * 4; r < n {
		dotRowsWith(dotAVX512, m, n-r, d, q, ldq, k[r*ldk:], ldk, s[r:], lds)
	}
}

// The MulAddRows kernels (mulrows_avx512_amd64.s): 1, 2 or 4 rows of acc,
// 4 or 8 chunks of 16 columns, n ≥ 1 keys; strides in bytes.

//go:noescape
func pvRows1x4Z(p *float32, ldp int, v *float32, ldv int, acc *float32, ldacc int, n int)

//go:noescape
func pvRows1x8Z(p *float32, ldp int, v *float32, ldv int, acc *float32, ldacc int, n int)

//go:noescape
func pvRows2x4Z(p *float32, ldp int, v *float32, ldv int, acc *float32, ldacc int, n int)

//go:noescape
func pvRows2x8Z(p *float32, ldp int, v *float32, ldv int, acc *float32, ldacc int, n int)

//go:noescape
func pvRows4x4Z(p *float32, ldp int, v *float32, ldv int, acc *float32, ldacc int, n int)

//go:noescape
func pvRows4x8Z(p *float32, ldp int, v *float32, ldv int, acc *float32, ldacc int, n int)

func mulAddRows(m, n, dv int, p []float32, ldp int, v []float32, ldv int, acc []float32, ldacc int) {
	if hasAVX512 && (dv == 64 || dv == 128) {
		mulAddRowsAVX512(m, n, dv, p, ldp, v, ldv, acc, ldacc)
		return
	}
	matMul(m, dv, n, p, ldp, v, ldv, acc, ldacc, true)
}

// mulAddRowsAVX512 takes rows four at a time (a GQA group's stacked
// heads: one pass over V), then two and one, dv 64 or 128.
func mulAddRowsAVX512(m, n, dv int, p []float32, ldp int, v []float32, ldv int, acc []float32, ldacc int) {
	four, two, one := pvRows4x8Z, pvRows2x8Z, pvRows1x8Z
	if dv == 64 {
		four, two, one = pvRows4x4Z, pvRows2x4Z, pvRows1x4Z
	}
	i := 0
	for ; i+4 <= m; i += 4 {
		four(&p[i*ldp], ldp*4, &v[0], ldv*4, &acc[i*ldacc], ldacc*4, n)
	}
	for ; i+2 <= m; i += 2 {
		two(&p[i*ldp], ldp*4, &v[0], ldv*4, &acc[i*ldacc], ldacc*4, n)
	}
	if i < m {
		one(&p[i*ldp], ldp*4, &v[0], ldv*4, &acc[i*ldacc], ldacc*4, n)
	}
}

func dot64Panel(a []float64, lda, l int, bt []float32, out []float64) {
	if hasAVX512 {
		dot64PanelZ(&a[0], lda, &bt[0], l, &out[0])
		return
	}
	dot64PanelGeneric(a, lda, l, bt, out)
}

// dot64PanelZ is Dot64Panel for l ≥ 1 on eight AVX-512 double
// accumulators (4 query rows × 2 panels).
//
//go:noescape
func dot64PanelZ(a *float64, lda int, bt *float32, l int, out *float64)

func transpose(rows, cols int, src []float32, lds int, dst []float32, ldd int) {
	if !hasAVX512 || rows < 16 || cols < 16 {
		transposeGeneric(0, rows, 0, cols, src, lds, dst, ldd)
		return
	}
	transposeAVX512(rows, cols, src, lds, dst, ldd)
}

// transposeAVX512 is Transpose by 16×16 tiles (transpose16Z), the edges
// that are no whole tile in Go.
func transposeAVX512(rows, cols int, src []float32, lds int, dst []float32, ldd int) {
	r16, c16 := rows&^15, cols&^15
	for r := 0; r < r16; r += 16 {
		for c := 0; c < c16; c += 16 {
			transpose16Z(&src[r*lds+c], lds, &dst[c*ldd+r], ldd)
		}
	}
	if c16 < cols { // right edge, every row
		transposeGeneric(0, rows, c16, cols, src, lds, dst, ldd)
	}
	if r16 < rows { // bottom edge, the tiled columns
		transposeGeneric(r16, rows, 0, c16, src, lds, dst, ldd)
	}
}

// transpose16Z writes the transpose of the 16×16 tile at src (row stride
// lds floats) to dst (row stride ldd floats) with AVX-512 shuffles.
//
//go:noescape
func transpose16Z(src *float32, lds int, dst *float32, ldd int)
