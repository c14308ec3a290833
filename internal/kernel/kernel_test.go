package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Unit roundoff of float32: 2⁻²⁴ (half an ulp of 1).
const u32 = 1.0 / (1 << 24)

// newRand returns a generator with a fresh seed, logged so that a failure
// can be replayed by setting KERNEL_TEST_SEED.
func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KERNEL_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("bad KERNEL_TEST_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (set KERNEL_TEST_SEED to replay)", seed)
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

func randSlice(r *rand.Rand, n int, lo, hi float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = lo + (hi-lo)*r.Float32()
	}
	return x
}

// path is one complete implementation of the kernels: the exported,
// dispatching functions (whatever this CPU selects), each assembly
// implementation of the architecture (archPaths, in kernel_*_test.go) or
// the portable code. Every test runs every path the CPU supports, so a
// machine with AVX-512 checks the AVX-512, AVX2 and portable code side by
// side against the same float64 references.
type path struct {
	name string
	// missing says why this CPU cannot run the path; empty when it can.
	missing  string
	matMul   func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool)
	expShift func(dst, src []float32, shift float32) float32
	max      func(x []float32) float32
	scale    func(x []float32, a float32)
	dot      func(a, b []float32) float32
	axpy     func(a float32, x, y []float32)
}

var paths = slices.Concat(
	[]path{{"dispatch", "", MatMul, ExpShift, Max, Scale, Dot, Axpy}},
	archPaths,
	[]path{{"generic", "", matMulGeneric, expShiftGeneric, maxGeneric, scaleGeneric, dotGeneric, axpyGeneric}},
)

// forEachPath runs f in a subtest per path, skipping the paths this CPU
// cannot run.
func forEachPath(t *testing.T, f func(t *testing.T, p path)) {
	t.Helper()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			if p.missing != "" {
				t.Skip(p.missing)
			}
			f(t, p)
		})
	}
}

type mmShape struct{ m, n, k int }

// matMulShapes is a sample of the m, n, k ∈ {1, 2, 3, 4, 5, 6, 7, 8, 12,
// 15, 16, 17, 31, 32, 33, 47, 64, 65, 128, 200, 256} cube: every
// combination of the small sizes (all row-panel remainders of the 6-row
// AVX2 and 8-row AVX-512 panels, 8/16/32-column strips and masked tails,
// odd and even k), the attention tile shapes, and a random sample of the
// rest.
func matMulShapes(r *rand.Rand) []mmShape {
	dims := []int{1, 2, 3, 4, 5, 6, 7, 8, 12, 15, 16, 17, 31, 32, 33, 47, 64, 65, 128, 200, 256}
	small := []int{1, 2, 3, 4, 5, 6, 7, 8, 12, 15, 16, 17, 31, 32, 33, 47}
	var s []mmShape
	for _, m := range small {
		for _, n := range small {
			for _, k := range []int{1, 2, 3, 7, 16, 33} {
				s = append(s, mmShape{m, n, k})
			}
		}
	}
	s = append(s,
		// Q·Kᵀ tiles: BlockQ × BlockK × D.
		mmShape{64, 64, 128}, mmShape{64, 128, 64}, mmShape{128, 128, 128},
		mmShape{64, 64, 80}, mmShape{64, 64, 96}, mmShape{128, 64, 200},
		mmShape{64, 128, 33}, mmShape{128, 128, 256},
		// P·V tiles (BlockQ × Dv × BlockK), some with a ragged last key
		// block.
		mmShape{64, 64, 64}, mmShape{64, 96, 64}, mmShape{64, 256, 64},
		mmShape{64, 128, 37}, mmShape{128, 64, 37}, mmShape{64, 80, 64},
		mmShape{65, 200, 17}, mmShape{64, 256, 128}, mmShape{60, 112, 64},
		// Decode.
		mmShape{1, 64, 128}, mmShape{1, 128, 64}, mmShape{1, 256, 256}, mmShape{2, 200, 65},
	)
	for range 40 {
		s = append(s, mmShape{dims[r.IntN(len(dims))], dims[r.IntN(len(dims))], dims[r.IntN(len(dims))]})
	}
	return s
}

// sentinel fills the stride padding of C; it must survive every call.
const sentinel = float32(-12345.5)

func TestMatMul(t *testing.T) {
	forEachPath(t, func(t *testing.T, p path) {
		r := newRand(t)
		for _, sh := range matMulShapes(r) {
			for _, acc := range []bool{false, true} {
				name := fmt.Sprintf("%dx%dx%d/acc=%v", sh.m, sh.n, sh.k, acc)
				checkMatMul(t, r, name, p.matMul, sh.m, sh.n, sh.k, acc)
			}
		}
	})
}

// checkMatMul multiplies random matrices with random stride padding and
// compares every element of C with a float64 reference.
//
// Tolerance: each element is a float32 sum of k products plus the old C
// value, with the products formed exactly (FMA) or rounded once. Whatever
// the summation order, the error of a float32 sum of k+1 such terms is at
// most γ_(k+1)·S ≈ (k+1)·2⁻²⁴·S, S = |c| + Σ|a||b| (Higham, Accuracy and
// Stability, §3.1). We allow (k+2)·2⁻²³·S, twice that; the float64
// reference itself is exact to about 2⁻⁵³·S. A wrong index or a missing
// term shows up as an error of order |a||b| ≈ S/k, far beyond this.
func checkMatMul(t *testing.T, r *rand.Rand, name string, f func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool), m, n, k int, acc bool) {
	t.Helper()
	pad := func() int {
		if r.IntN(3) == 0 {
			return 0
		}
		return 1 + r.IntN(9)
	}
	lda, ldb, ldc := k+pad(), n+pad(), n+pad()
	a := randSlice(r, (m-1)*lda+k, -1, 1)
	b := randSlice(r, (k-1)*ldb+n, -1, 1)
	// C's backing array extends past the window by one row's worth of
	// sentinels to catch writes beyond the last row.
	c := make([]float32, m*ldc+ldc)
	c0 := make([]float32, m*n)
	for i := range c {
		c[i] = sentinel
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			if acc {
				v := 2*r.Float32() - 1
				c[i*ldc+j] = v
				c0[i*n+j] = v
			} else {
				// C must not be read: NaN would poison the result.
				c[i*ldc+j] = float32(math.NaN())
			}
		}
	}
	f(m, n, k, a, lda, b, ldb, c[:(m-1)*ldc+n], ldc, acc)

	bad := 0
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want, s := float64(c0[i*n+j]), math.Abs(float64(c0[i*n+j]))
			for p := 0; p < k; p++ {
				ab := float64(a[i*lda+p]) * float64(b[p*ldb+j])
				want += ab
				s += math.Abs(ab)
			}
			got := float64(c[i*ldc+j])
			tol := float64(k+2) * 2 * u32 * s
			if !(math.Abs(got-want) <= tol) {
				if bad++; bad <= 5 {
					t.Errorf("%s: C[%d][%d] = %g, want %g (|err| %.3g > tol %.3g)", name, i, j, got, want, math.Abs(got-want), tol)
				}
			}
		}
		for j := n; j < ldc; j++ {
			if c[i*ldc+j] != sentinel {
				t.Fatalf("%s: padding C[%d][%d] overwritten with %g", name, i, j, c[i*ldc+j])
			}
		}
	}
	for i := m * ldc; i < len(c); i++ {
		if c[i] != sentinel {
			t.Fatalf("%s: element %d past the last row of C overwritten", name, i)
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d wrong elements", name, bad)
	}
}

func TestMatMulSpecialCases(t *testing.T) {
	// k = 0: C = 0, or unchanged when accumulating.
	c := []float32{1, 2, 3, 4, sentinel, 5, 6, 7, 8}
	MatMul(2, 4, 0, nil, 0, nil, 0, c, 5, true)
	if c[0] != 1 || c[8] != 8 || c[4] != sentinel {
		t.Errorf("k=0 accumulate changed C: %v", c)
	}
	MatMul(2, 4, 0, nil, 0, nil, 0, c, 5, false)
	for i, v := range c {
		if (i == 4 && v != sentinel) || (i != 4 && v != 0) {
			t.Errorf("k=0: C = %v", c)
			break
		}
	}
	// m = 0 or n = 0: nothing to do, nothing checked.
	MatMul(0, 4, 3, nil, 0, nil, 0, nil, 0, false)
	MatMul(4, 0, 3, nil, 0, nil, 0, nil, 0, false)

	// Programmer errors panic instead of touching memory.
	a, b := make([]float32, 12), make([]float32, 12)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"short a", func() { MatMul(2, 4, 3, a[:5], 3, b, 4, make([]float32, 8), 4, false) }},
		{"short b", func() { MatMul(2, 4, 3, a, 3, b[:11], 4, make([]float32, 8), 4, false) }},
		{"short c", func() { MatMul(2, 4, 3, a, 3, b, 4, make([]float32, 7), 4, false) }},
		{"ldc < n", func() { MatMul(2, 4, 3, a, 3, b, 4, make([]float32, 8), 3, false) }},
		{"lda < k", func() { MatMul(2, 4, 3, a, 2, b, 4, make([]float32, 8), 4, false) }},
		{"negative", func() { MatMul(-1, 4, 3, a, 3, b, 4, make([]float32, 8), 4, false) }},
		{"ExpShift", func() { ExpShift(make([]float32, 3), make([]float32, 4), 0) }},
		{"Dot", func() { Dot(make([]float32, 4), make([]float32, 3)) }},
		{"Axpy", func() { Axpy(1, make([]float32, 4), make([]float32, 3)) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			tc.f()
		}()
	}
}

// TestMatMulConcurrent runs MatMul and ExpShift on shared inputs from
// several goroutines (meaningful under -race) and checks they all agree.
func TestMatMulConcurrent(t *testing.T) {
	forEachPath(t, testMatMulConcurrent)
}

func testMatMulConcurrent(t *testing.T, p path) {
	r := newRand(t)
	const m, n, k = 37, 70, 45
	a, b := randSlice(r, m*k, -1, 1), randSlice(r, k*n, -1, 1)
	want := make([]float32, m*n)
	p.matMul(m, n, k, a, k, b, n, want, n, false)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := make([]float32, m*n)
			for range 20 {
				p.matMul(m, n, k, a, k, b, n, c, n, false)
				if g%2 == 0 {
					p.expShift(c, c, 1)
				}
			}
			if g%2 == 1 {
				for i := range c {
					if c[i] != want[i] {
						t.Errorf("goroutine %d: C[%d] = %g, want %g", g, i, c[i], want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// ---------------------------------------------------------------------------
// ExpShift.

// expTol bounds the relative error of one exp against math.Exp of the same
// float32 argument. The maxima measured by TestExpShiftExhaustive are
// 9.44e-8 for the AVX2 and AVX-512 code (bit-identical results) and
// 1.16e-7 for the portable code on amd64 (no FMA). The budget: the final rounding to float32 (up to 2⁻²⁴ ≈ 6e-8),
// the roundings in the Horner evaluation and in r = x - n·ln2, and the
// polynomial's own error (below 9e-9). 2e-7 leaves room for compilers that
// contract the portable code differently (arm64 fuses a*b+c).
const expTol = 2e-7

// flushBelow and accurateAbove bracket the flush-to-zero threshold
// floor(x·log2 e) < -126, x ≈ -87.33654: below flushBelow the result must
// be exactly 0, above accurateAbove it must be accurate; between, either.
const (
	flushBelow    = -87.3366
	accurateAbove = -87.3364
)

// checkExp checks one result against exp of the float32 argument x.
func checkExp(x, got float32) error {
	switch {
	case math.IsNaN(float64(x)):
		if !math.IsNaN(float64(got)) {
			return fmt.Errorf("exp(NaN) = %g", got)
		}
		return nil
	case x < flushBelow:
		if got != 0 || math.Signbit(float64(got)) {
			return fmt.Errorf("exp(%g) = %g, want exactly 0", x, got)
		}
		return nil
	}
	want := math.Exp(float64(x))
	if want > math.MaxFloat32 {
		// Overflow: +Inf, or MaxFloat32 right at the boundary.
		if float64(got) < math.MaxFloat32*(1-expTol) {
			return fmt.Errorf("exp(%g) = %g, want +Inf", x, got)
		}
		return nil
	}
	rel := math.Abs(float64(got)-want) / want
	if x < accurateAbove && got == 0 {
		return nil
	}
	if !(rel <= expTol) {
		return fmt.Errorf("exp(%g) = %.9g, want %.9g (rel err %.3g)", x, got, want, rel)
	}
	return nil
}

func TestExpShiftSweep(t *testing.T) {
	forEachPath(t, func(t *testing.T, p path) {
		r := newRand(t)
		// A dense sweep of [-100, 0] plus a little beyond, with a random
		// per-run offset, processed in chunks of random length so that
		// every tail length is exercised.
		const n = 1 << 20
		src := make([]float32, n)
		off := r.Float64()
		for i := range src {
			src[i] = float32(-100 + (100.5*(float64(i)+off))/n)
		}
		for _, shift := range []float32{0, 3.25, -1.5} {
			dst := make([]float32, n)
			var maxRel float64
			for lo := 0; lo < n; {
				hi := min(n, lo+1+r.IntN(100))
				sum := p.expShift(dst[lo:hi], src[lo:hi], shift)
				var want float64
				for i := lo; i < hi; i++ {
					x := src[i] - shift
					if err := checkExp(x, dst[i]); err != nil {
						t.Fatalf("shift=%g: %v", shift, err)
					}
					if e := math.Exp(float64(x)); dst[i] != 0 {
						maxRel = max(maxRel, math.Abs(float64(dst[i])-e)/e)
					}
					want += float64(dst[i])
				}
				// The sum of up to 100 positive terms, in float32.
				if tol := float64(hi-lo) * 2 * u32 * want; math.Abs(float64(sum)-want) > tol {
					t.Fatalf("sum = %g, want %g", sum, want)
				}
				lo = hi
			}
			t.Logf("shift=%g: max relative error %.3g", shift, maxRel)
		}
	})
}

func TestExpShiftSpecial(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	cases := []struct {
		x    float32
		want float32 // -1: check with checkExp
	}{
		{float32(math.Inf(-1)), 0},
		{0, 1},
		{-87.5, 0},
		{-88.7, 0},
		{-103, 0},
		{-1e30, 0},
		{-math.MaxFloat32, 0},
		{-87.3365, -1},
		{-87.33, -1},
		{-1e-30, -1},
		{1e-30, 1},
		{math.SmallestNonzeroFloat32, 1},
		{88.7, -1},
		{88.72, -1},
		{88.73, inf},
		{100, inf},
		{1e30, inf},
		{inf, inf},
		{nan, -1},
		{1, -1},
		{-1, -1},
		{0.5, -1},
	}
	forEachPath(t, func(t *testing.T, p path) {
		// Run every case in every lane position: as the last element of
		// slices of 1 to 40 elements (main loops and masked tails of both
		// the 8- and the 16-lane code).
		for _, tc := range cases {
			for n := 1; n <= 40; n++ {
				src := make([]float32, n)
				for i := range src {
					src[i] = -float32(i) // harmless companions
				}
				src[n-1] = tc.x
				dst := make([]float32, n+1)
				dst[n] = sentinel
				p.expShift(dst, src, 0)
				got := dst[n-1]
				if tc.want == -1 {
					if err := checkExp(tc.x, got); err != nil {
						t.Errorf("n=%d: %v", n, err)
					}
				} else if got != tc.want || math.Signbit(float64(got)) {
					t.Errorf("n=%d: exp(%g) = %g, want %g", n, tc.x, got, tc.want)
				}
				if dst[n] != sentinel {
					t.Fatalf("wrote past len(src)")
				}
			}
		}
		// The shift is applied before exp: exp(src - shift).
		src := []float32{10, 10, 10, 10, 10, 10, 10, 10, 10}
		dst := make([]float32, len(src))
		if s := p.expShift(dst, src, 10); s != 9 || dst[8] != 1 {
			t.Errorf("exp(10-10) gave %v, sum %g", dst, s)
		}
		// -Inf scores contribute nothing to the sum.
		src = []float32{float32(math.Inf(-1)), 2, float32(math.Inf(-1))}
		if s := p.expShift(make([]float32, 3), src, 2); s != 1 {
			t.Errorf("sum with -Inf = %g, want 1", s)
		}
	})
}

func TestExpShiftLengths(t *testing.T) {
	forEachPath(t, func(t *testing.T, p path) {
		r := newRand(t)
		for n := 0; n <= 70; n++ {
			src := randSlice(r, n, -30, 2)
			if n > 0 {
				src[r.IntN(n)] = float32(math.Inf(-1))
			}
			shift := 4 * (r.Float32() - 0.5)
			// Separate destination, with a sentinel after it.
			dst := make([]float32, n+1)
			dst[n] = sentinel
			sum := p.expShift(dst[:n], src, shift)
			var want float64
			for i := range n {
				if err := checkExp(src[i]-shift, dst[i]); err != nil {
					t.Fatalf("n=%d i=%d: %v", n, i, err)
				}
				want += math.Exp(float64(src[i] - shift))
			}
			if dst[n] != sentinel {
				t.Fatalf("n=%d: wrote past len(src)", n)
			}
			if tol := (float64(n)*2*u32 + expTol) * want; math.Abs(float64(sum)-want) > tol {
				t.Errorf("n=%d: sum %g, want %g", n, sum, want)
			}
			// In place: dst aliases src.
			in := append([]float32(nil), src...)
			if s2 := p.expShift(in, in, shift); s2 != sum {
				t.Errorf("n=%d: in place sum %g != %g", n, s2, sum)
			}
			for i := range n {
				if in[i] != dst[i] {
					t.Fatalf("n=%d: in place result differs at %d", n, i)
				}
			}
		}
	})
}

// exhaustive reports whether the tests over every float32 should run.
func exhaustive(t *testing.T) {
	t.Helper()
	if os.Getenv("KERNEL_EXHAUSTIVE") == "" {
		t.Skip("set KERNEL_EXHAUSTIVE=1 to run")
	}
}

// forEachFloat32 calls f, from GOMAXPROCS goroutines, on consecutive chunks
// of at most 1<<16 float32 values whose bit patterns cover [lo, hi]
// (lo ≤ hi, as uint32). Every chunk is a fresh slice.
func forEachFloat32(lo, hi uint32, f func(chunk []float32)) {
	const chunk = 1 << 16
	var next atomic.Uint64
	next.Store(uint64(lo))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, chunk)
			for {
				start := next.Add(chunk) - chunk
				if start > uint64(hi) {
					return
				}
				end := min(start+chunk-1, uint64(hi))
				x := buf[:end-start+1]
				for i := range x {
					x[i] = math.Float32frombits(uint32(start) + uint32(i))
				}
				f(x)
			}
		}()
	}
	wg.Wait()
}

// TestExpShiftExhaustive measures the maximum relative error over every
// float32 in [-87.3365, 88.72] (2.2e9 arguments per path), on all cores.
// It takes tens of seconds per path, so it runs only when
// KERNEL_EXHAUSTIVE is set.
func TestExpShiftExhaustive(t *testing.T) {
	exhaustive(t)
	forEachPath(t, func(t *testing.T, p path) {
		var mu sync.Mutex
		var maxRel float64
		var worst float32
		check := func(src []float32) {
			dst := make([]float32, len(src))
			p.expShift(dst, src, 0)
			var m float64
			var w float32
			for i, x := range src {
				e := math.Exp(float64(x))
				if rel := math.Abs(float64(dst[i])-e) / e; rel > m {
					m, w = rel, x
				}
			}
			mu.Lock()
			if m > maxRel {
				maxRel, worst = m, w
			}
			mu.Unlock()
		}
		// Negative floats from -0 down to -87.3365 (bit patterns
		// 0x80000000 up), then positive ones from 0 up to 88.72.
		forEachFloat32(0x80000000, math.Float32bits(-87.3365), check)
		forEachFloat32(0, math.Float32bits(88.72), check)
		t.Logf("max relative error %.4g at x = %.9g", maxRel, worst)
		if maxRel > expTol {
			t.Errorf("max relative error %.4g > %g", maxRel, expTol)
		}
	})
}

// ---------------------------------------------------------------------------
// Max, Scale, Dot, Axpy.

// blasLengths covers every tail length around the 8-, 16-, 32- and
// 64-element steps.
func blasLengths() []int {
	var ns []int
	for n := 0; n <= 140; n++ {
		ns = append(ns, n)
	}
	return append(ns, 191, 192, 193, 255, 256, 257, 1000, 4099)
}

func TestMax(t *testing.T) {
	negInf := float32(math.Inf(-1))
	forEachPath(t, func(t *testing.T, p path) {
		r := newRand(t)
		if got := p.max(nil); got != negInf {
			t.Errorf("Max(empty) = %g", got)
		}
		for _, n := range blasLengths() {
			x := randSlice(r, n, -100, 100)
			for i := range x {
				switch r.IntN(8) {
				case 0:
					x[i] = negInf
				case 1:
					x[i] = float32(math.NaN()) // ignored
				}
			}
			want := negInf
			for _, v := range x {
				if v > want {
					want = v
				}
			}
			if got := p.max(x); got != want {
				t.Errorf("n=%d: %g, want %g", n, got, want)
			}
			// The maximum in each position, and past the end (must not
			// be seen).
			if n > 0 {
				pos := r.IntN(n)
				x[pos] = 1000
				if got := p.max(x); got != 1000 {
					t.Errorf("n=%d: max at %d: got %g", n, pos, got)
				}
				y := make([]float32, n+1)
				for i := range y {
					y[i] = negInf
				}
				y[n] = 2000
				if got := p.max(y[:n]); got != negInf {
					t.Errorf("n=%d: all -Inf: got %g", n, got)
				}
			}
		}
	})
}

func TestScale(t *testing.T) {
	forEachPath(t, func(t *testing.T, p path) {
		r := newRand(t)
		for _, n := range blasLengths() {
			x := randSlice(r, n+1, -10, 10)
			x[n] = sentinel
			orig := append([]float32(nil), x...)
			a := 3 * (r.Float32() - 0.5)
			p.scale(x[:n], a)
			for i := range n {
				// One rounded multiplication: exact agreement.
				if want := orig[i] * a; x[i] != want {
					t.Fatalf("n=%d: x[%d] = %g, want %g", n, i, x[i], want)
				}
			}
			if x[n] != sentinel {
				t.Fatalf("n=%d: wrote past the end", n)
			}
		}
	})
}

func TestDot(t *testing.T) {
	forEachPath(t, func(t *testing.T, p path) {
		r := newRand(t)
		for _, n := range blasLengths() {
			a := randSlice(r, n, -1, 1)
			// Longer than a: only b[:n] counts (b[n:] is huge, so that
			// reading it would show).
			b := randSlice(r, n+3, -1, 1)
			b[n], b[n+1], b[n+2] = 1e30, 1e30, 1e30
			var want, s float64
			for i := range n {
				prod := float64(a[i]) * float64(b[i])
				want += prod
				s += math.Abs(prod)
			}
			got := float64(p.dot(a, b))
			// A float32 sum of n products in any order: γ_n·Σ|ab|, doubled.
			if tol := float64(n) * 2 * u32 * s; math.Abs(got-want) > tol {
				t.Errorf("n=%d: %g, want %g", n, got, want)
			}
		}
	})
}

func TestAxpy(t *testing.T) {
	forEachPath(t, func(t *testing.T, p path) {
		r := newRand(t)
		for _, n := range blasLengths() {
			x := randSlice(r, n, -1, 1)
			y := randSlice(r, n+1, -1, 1)
			y[n] = sentinel
			orig := append([]float32(nil), y...)
			a := 4 * (r.Float32() - 0.5)
			p.axpy(a, x, y)
			for i := range n {
				ax := float64(a) * float64(x[i])
				want := float64(orig[i]) + ax
				// a·x rounded at most once, then the sum once: 2·u·(|y|+|ax|).
				tol := 2 * u32 * (math.Abs(float64(orig[i])) + math.Abs(ax))
				if math.Abs(float64(y[i])-want) > tol {
					t.Fatalf("n=%d: y[%d] = %g, want %g", n, i, y[i], want)
				}
			}
			if y[n] != sentinel {
				t.Fatalf("n=%d: wrote past len(x)", n)
			}
		}
	})
}

func TestNoAllocs(t *testing.T) {
	a, b, c := make([]float32, 64*128), make([]float32, 128*64), make([]float32, 64*64)
	x, y := make([]float32, 77), make([]float32, 77)
	forEachPath(t, func(t *testing.T, p path) {
		allocs := testing.AllocsPerRun(20, func() {
			p.matMul(64, 64, 128, a, 128, b, 64, c, 64, false)
			p.matMul(5, 37, 3, a, 3, b, 37, c, 37, true)
			p.expShift(x, y, 1)
			p.max(x)
			p.scale(x, 0.5)
			p.dot(x, y)
			p.axpy(2, x, y)
		})
		if allocs != 0 {
			t.Errorf("%v allocations per run, want 0", allocs)
		}
	})
}

func TestAccelerated(t *testing.T) {
	s := Accelerated()
	if s != "avx512" && s != "avx2+fma" && s != "generic" {
		t.Errorf("Accelerated() = %q", s)
	}
	t.Logf("implementation: %s (GODEBUG=%q)", s, os.Getenv("GODEBUG"))
}
