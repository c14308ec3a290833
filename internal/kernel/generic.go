package kernel

import "math"

// Constants of the exp approximation shared by expGeneric and the assembly
// in kernel_amd64.s and kernel_avx512_amd64.s (which repeat them as bit
// patterns; keep them in sync).
const (
	// expLog2E is log2(e) rounded to float32.
	expLog2E float32 = 1.44269502 // 0x3fb8aa3b
	// expLn2Hi + expLn2Lo ≈ ln 2. expLn2Hi has 8 trailing zero bits, so
	// n·expLn2Hi is exact for |n| ≤ 256 and the reduction x - n·ln2 loses
	// almost nothing even without a fused multiply-add.
	expLn2Hi float32 = 0.693145751953125 // 0x3f317200
	expLn2Lo float32 = 1.42860677e-06    // 0x35bfbe8e
	// expLow and expMax bound the argument. Below about -87.3365,
	// floor(x·log2 e) is -127 or less and the result is flushed to 0 (exp
	// would be below the smallest normal float32); -88 is low enough for
	// that and high enough that n stays -127, whose 2^n is +0 in the
	// assembly. 89 > ln(MaxFloat32) gives n = 128, whose exponent field 255
	// encodes +Inf.
	expLow float32 = -88 // 0xc2b00000
	expMax float32 = 89  // 0x42b20000

	// Coefficients of e^r ≈ 1 + r + c2 r² + … + c6 r⁶ on [0, ln2],
	// fitted (iteratively reweighted least squares, i.e. near-minimax) for
	// relative error; the approximation error of the float32-rounded
	// coefficients is below 9e-9, far below float32 rounding.
	expC2 float32 = 0.500002265   // 0x3f000026
	expC3 float32 = 0.166631892   // 0x3e2aa18d
	expC4 float32 = 0.0418550633  // 0x3d2b7037
	expC5 float32 = 0.00786828622 // 0x3c00e9fc
	expC6 float32 = 0.00191257079 // 0x3afaaf3a
)

// expGeneric returns e^x with the same algorithm as the assembly: it is 0
// when floor(x·log2 e) < -126 (x below about -87.3365, -Inf included), +Inf
// for x above about 88.72 and NaN for NaN.
func expGeneric(x float32) float32 {
	switch {
	case x < expLow:
		x = expLow
	case x > expMax:
		x = expMax
	case x != x:
		return x
	}
	t := x * expLog2E
	n := int32(t) // t is in [-127, 129): truncation, then floor
	if float32(n) > t {
		n--
	}
	if n < -126 {
		return 0
	}
	fn := float32(n)
	r := x - fn*expLn2Hi
	r -= fn * expLn2Lo
	p := expC6
	p = p*r + expC5
	p = p*r + expC4
	p = p*r + expC3
	p = p*r + expC2
	p = p*r + 1
	p = p*r + 1
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// expShiftGeneric is the portable ExpShift; len(dst) ≥ len(src).
func expShiftGeneric(dst, src []float32, shift float32) float32 {
	dst = dst[:len(src)]
	var sum float32
	for i, v := range src {
		e := expGeneric(v - shift)
		dst[i] = e
		sum += e
	}
	return sum
}

// maxGeneric is the portable Max. NaN elements are skipped because a
// comparison with NaN is false.
func maxGeneric(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

// scaleGeneric is the portable Scale.
func scaleGeneric(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// dotGeneric is the portable Dot; len(b) ≥ len(a). Four partial sums
// shorten the dependency chain and, for long vectors, the rounding error.
func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpyGeneric is the portable Axpy; len(y) ≥ len(x).
func axpyGeneric(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

// matMulGeneric is the portable MatMul. The arguments have been checked by
// MatMul; m, n, k ≥ 1. Each row of C is updated with four rows of B at a
// time (an axpy-style loop written so that the compiler can drop the
// bounds checks), which quarters the loads and stores of C.
func matMulGeneric(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	for i := 0; i < m; i++ {
		ci := c[i*ldc : i*ldc+n]
		if !accumulate {
			clear(ci)
		}
		ai := a[i*lda : i*lda+k]
		p := 0
		for ; p+4 <= k; p += 4 {
			a0, a1, a2, a3 := ai[p], ai[p+1], ai[p+2], ai[p+3]
			b0 := b[p*ldb:][:len(ci)]
			b1 := b[(p+1)*ldb:][:len(ci)]
			b2 := b[(p+2)*ldb:][:len(ci)]
			b3 := b[(p+3)*ldb:][:len(ci)]
			for j := range ci {
				ci[j] += a0*b0[j] + a1*b1[j] + a2*b2[j] + a3*b3[j]
			}
		}
		for ; p < k; p++ {
			av := ai[p]
			bp := b[p*ldb:][:len(ci)]
			for j := range ci {
				ci[j] += av * bp[j]
			}
		}
	}
}
