package kernel

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/cpu"
)

// archPaths are the assembly implementations, best first.
var archPaths = []path{
	{"avx512", missingUnless(hasAVX512, "no AVX512F, AVX2 or FMA (CPU or GODEBUG)"),
		matMulAVX512, expShiftAVX512, maxAVX512, scaleAVX512, dotAVX512, axpyAVX512},
	{"avx2", missingUnless(hasAVX2, "no AVX2 or FMA (CPU or GODEBUG)"),
		matMulAVX2, expShiftAVX2, maxAVX2, scaleAVX2, dotAVX2, axpyAVX2},
}

func missingUnless(ok bool, why string) string {
	if ok {
		return ""
	}
	return why
}

// TestDispatch checks that the implementation in use is the best one the
// CPU supports, and that GODEBUG=cpu.avx2=off (or cpu.fma=off) selects the
// portable code and GODEBUG=cpu.avx512f=off the AVX2 code.
func TestDispatch(t *testing.T) {
	godebug := os.Getenv("GODEBUG")
	off := func(feature string) bool {
		return slices.Contains(strings.Split(godebug, ","), "cpu."+feature+"=off")
	}
	want := "generic"
	switch {
	case off("avx2") || off("fma") || off("all"):
	case cpu.X86.HasAVX512F && !off("avx512f") && !off("avx512"):
		want = "avx512"
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		want = "avx2+fma"
	}
	// The CPU flags themselves already reflect GODEBUG; the switch above
	// also checks that they do.
	if got := Accelerated(); got != want {
		t.Errorf("GODEBUG=%q: Accelerated() = %q, want %q", godebug, got, want)
	}
	t.Logf("GODEBUG=%q: AVX2 %v, FMA %v, AVX512F %v: %s", godebug,
		cpu.X86.HasAVX2, cpu.X86.HasFMA, cpu.X86.HasAVX512F, Accelerated())
}

// TestExpShiftAVX512MatchesAVX2 checks that the 16-lane code computes
// exactly what the 8-lane code does (same operations in the same order),
// so that the accuracy measured for one holds for the other: on a random
// sample of arguments here, and on every float32 bit pattern when
// KERNEL_EXHAUSTIVE is set.
func TestExpShiftAVX512MatchesAVX2(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX512F, AVX2 or FMA (CPU or GODEBUG)")
	}
	// mismatch describes the first element where the two differ, if any.
	mismatch := func(src []float32, shift float32) string {
		d16, d8 := make([]float32, len(src)), make([]float32, len(src))
		expShiftAVX512(d16, src, shift)
		expShiftAVX2(d8, src, shift)
		for i := range src {
			b16, b8 := math.Float32bits(d16[i]), math.Float32bits(d8[i])
			if b16 != b8 && !(d16[i] != d16[i] && d8[i] != d8[i]) {
				return fmt.Sprintf("exp(%g - %g): avx512 %g (%#x), avx2 %g (%#x)", src[i], shift, d16[i], b16, d8[i], b8)
			}
		}
		return ""
	}
	t.Run("random", func(t *testing.T) {
		r := newRand(t)
		for range 200 {
			n := 1 + r.IntN(5000)
			src := randSlice(r, n, -120, 120)
			for i := range src {
				if r.IntN(50) == 0 {
					src[i] = math.Float32frombits(r.Uint32()) // anything, NaN and Inf included
				}
			}
			if msg := mismatch(src, 8*(r.Float32()-0.5)); msg != "" {
				t.Fatal(msg)
			}
		}
	})
	t.Run("exhaustive", func(t *testing.T) {
		exhaustive(t)
		var mu sync.Mutex
		var first string
		forEachFloat32(0, math.MaxUint32, func(src []float32) {
			if msg := mismatch(src, 0); msg != "" {
				mu.Lock()
				first = cmp.Or(first, msg)
				mu.Unlock()
			}
		})
		if first != "" {
			t.Fatal(first)
		}
		t.Log("all 2^32 float32 bit patterns agree")
	})
}

// archTransposes are the assembly Transposes the CPU supports, by name.
func archTransposes() map[string]func(rows, cols int, src []float32, lds int, dst []float32, ldd int) {
	if !hasAVX512 {
		return nil
	}
	return map[string]func(rows, cols int, src []float32, lds int, dst []float32, ldd int){"avx512": transposeAVX512}
}

// TestMulAddRows4MatchesTwoRows checks that the 4-row P·V kernels compute
// exactly what two calls of the 2-row kernel do (the same FMA chain per
// element, key after key; at dv 128 row 3's chain runs through memory),
// so that stacking a GQA group's four heads in one pass over V changes no
// bit of decode's output. Strides wider than the rows.
func TestMulAddRows4MatchesTwoRows(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX512F, AVX2 or FMA (CPU or GODEBUG)")
	}
	r := newRand(t)
	for _, dv := range []int{64, 128} {
		four, two := pvRows4x8Z, pvRows2x8Z
		if dv == 64 {
			four, two = pvRows4x4Z, pvRows2x4Z
		}
		for _, n := range []int{1, 2, 15, 16, 17, 64, 66, 200} {
			ldp, ldv, ldacc := n+3, dv+16*(n%2), dv+5
			p := randSlice(r, 4*ldp, -1, 1)
			v := randSlice(r, n*ldv, -2, 2)
			got := randSlice(r, 4*ldacc, -1, 1)
			want := slices.Clone(got)
			four(&p[0], ldp*4, &v[0], ldv*4, &got[0], ldacc*4, n)
			two(&p[0], ldp*4, &v[0], ldv*4, &want[0], ldacc*4, n)
			two(&p[2*ldp], ldp*4, &v[0], ldv*4, &want[2*ldacc], ldacc*4, n)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("dv=%d n=%d: acc[%d][%d] = %v, two 2-row calls give %v", dv, n, i/ldacc, i%ldacc, got[i], want[i])
				}
			}
		}
	}
}
