package kernel

import (
	"fmt"
	"math"
	"testing"
)

// finiteImpls are the implementations of the scans to check side by side:
// the portable one always, the one in use (assembly where the CPU has it).
var finiteImpls = []struct {
	name string
	f32  func([]float32) int
	f16  func([]uint16, uint16) int
}{
	{"generic", firstNonFinite32Generic, firstNonFinite16Generic},
	{"dispatch", FirstNonFinite32, FirstNonFinite16},
}

// finiteLengths straddle the group sizes of every implementation (8, 16,
// 32 and 64 elements).
var finiteLengths = []int{1, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 127, 200, 1000}

func TestFirstNonFinite32(t *testing.T) {
	bad := []struct {
		name string
		v    float32
	}{
		{"NaN", float32(math.NaN())},
		{"+Inf", float32(math.Inf(1))},
		{"-Inf", float32(math.Inf(-1))},
		{"NaN-payload", math.Float32frombits(0xff800001)},
	}
	// The largest finite values, subnormals and zeros must pass.
	fill := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 0, float32(math.Copysign(0, -1)), 1.5}
	for _, im := range finiteImpls {
		for _, n := range finiteLengths {
			x := make([]float32, n)
			for i := range x {
				x[i] = fill[i%len(fill)]
			}
			if got := im.f32(x); got != -1 {
				t.Fatalf("%s n=%d all finite: got %d, want -1", im.name, n, got)
			}
			for _, b := range bad {
				for _, at := range []int{0, n / 2, n - 1} {
					x[at] = b.v
					if got := im.f32(x); got != at {
						t.Errorf("%s n=%d %s at %d: got %d", im.name, n, b.name, at, got)
					}
					if at+1 < n { // a later one must not hide the first
						x[n-1] = b.v
						if got := im.f32(x); got != at {
							t.Errorf("%s n=%d %s at %d and %d: got %d", im.name, n, b.name, at, n-1, got)
						}
						x[n-1] = fill[(n-1)%len(fill)]
					}
					x[at] = fill[at%len(fill)]
				}
			}
		}
		if got := im.f32(nil); got != -1 {
			t.Errorf("%s empty: got %d", im.name, got)
		}
	}
}

func TestFirstNonFinite16(t *testing.T) {
	for _, c := range []struct {
		format string
		mask   uint16
		bad    []uint16 // NaN, +Inf, -Inf
		fill   []uint16 // finite extremes, zeros, subnormals
	}{
		{"float16", F16ExpMask, []uint16{0x7e00, 0x7c00, 0xfc00, 0x7c01}, []uint16{0x7bff, 0xfbff, 0x0001, 0x8000, 0x3c00}},
		{"bfloat16", BF16ExpMask, []uint16{0x7fc0, 0x7f80, 0xff80, 0xff81}, []uint16{0x7f7f, 0xff7f, 0x0001, 0x8000, 0x3f80}},
	} {
		for _, im := range finiteImpls {
			for _, n := range finiteLengths {
				name := fmt.Sprintf("%s/%s/n=%d", im.name, c.format, n)
				x := make([]uint16, n)
				for i := range x {
					x[i] = c.fill[i%len(c.fill)]
				}
				if got := im.f16(x, c.mask); got != -1 {
					t.Fatalf("%s all finite: got %d, want -1", name, got)
				}
				for _, b := range c.bad {
					for _, at := range []int{0, n / 2, n - 1} {
						x[at] = b
						if got := im.f16(x, c.mask); got != at {
							t.Errorf("%s %#04x at %d: got %d", name, b, at, got)
						}
						if at+1 < n {
							x[n-1] = b
							if got := im.f16(x, c.mask); got != at {
								t.Errorf("%s %#04x at %d and %d: got %d", name, b, at, n-1, got)
							}
							x[n-1] = c.fill[(n-1)%len(c.fill)]
						}
						x[at] = c.fill[at%len(c.fill)]
					}
				}
			}
		}
	}
}
