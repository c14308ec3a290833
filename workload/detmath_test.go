package workload

import (
	"math"
	"testing"
)

// The deterministic replacements must also be accurate.
func TestDetMathAccuracy(t *testing.T) {
	g := newRNG(99)
	near := func(name string, x, got, want, tol float64) {
		t.Helper()
		if d := math.Abs(got - want); d > tol*math.Max(1, math.Abs(want)) {
			t.Errorf("%s(%v) = %v, want %v (diff %g)", name, x, got, want, d)
		}
	}
	for range 20000 {
		x := (g.uniform() - 0.5) * 1400 // [-700, 700)
		near("dexp", x, dexp(x), math.Exp(x), 1e-14)
		y := math.Exp((g.uniform() - 0.5) * 1400)
		near("dlog", y, dlog(y), math.Log(y), 1e-15)
		z := (g.uniform() - 0.5) * 2e6
		s, c := dsincos(z)
		ws, wc := math.Sincos(z)
		near("dsin", z, s, ws, 1e-12)
		near("dcos", z, c, wc, 1e-12)
	}
	for _, x := range []float64{0, 1, -1, math.Pi / 4, math.Pi / 2, math.Pi, 1e-300} {
		s, c := dsincos(x)
		ws, wc := math.Sincos(x)
		near("dsin", x, s, ws, 1e-16)
		near("dcos", x, c, wc, 1e-16)
	}
	if dexp(0) != 1 || dlog(1) != 0 || dexp(800) != math.Inf(1) || dexp(-800) != 0 {
		t.Error("dexp/dlog special values")
	}
	if !math.IsInf(dlog(0), -1) || !math.IsNaN(dlog(-1)) || !math.IsNaN(dexp(math.NaN())) {
		t.Error("dlog/dexp of 0, -1, NaN")
	}
	// Subnormal input: compare with Log2, since math.Log's amd64 assembly
	// returns -709.09 (the log of the smallest normal) for 5e-324.
	near("dlog", 5e-324, dlog(5e-324), math.Log2(5e-324)*math.Ln2, 1e-15)
	near("dpow", 10000, dpow(10000, -0.5), 0.01, 1e-15)
}

// The random sources have the right first moments, and streams with
// different paths differ.
func TestRNG(t *testing.T) {
	const n = 200000
	for name, draw := range map[string]func(*rng) float64{
		"norm":  (*rng).norm,
		"noise": (*rng).noise,
	} {
		g := newRNG(5, 1, 2)
		var s1, s2, s4 float64
		for range n {
			x := draw(g)
			s1 += x
			s2 += x * x
			s4 += x * x * x * x
		}
		mean, v := s1/n, s2/n
		if math.Abs(mean) > 0.01 || math.Abs(v-1) > 0.02 {
			t.Errorf("%s: mean %.4f, variance %.4f", name, mean, v)
		}
		kurt := s4 / n
		if name == "norm" && math.Abs(kurt-3) > 0.1 {
			t.Errorf("norm: fourth moment %.3f, want 3", kurt)
		}
	}
	g := newRNG(5)
	counts := make([]int, 7)
	for range 70000 {
		counts[g.intN(7)]++
	}
	for i, c := range counts {
		if c < 9500 || c > 10500 {
			t.Errorf("intN(7) drew %d %d times of 70000", i, c)
		}
	}
	a, b := newRNG(5, 1, 2), newRNG(5, 2, 1)
	if a.uniform() == b.uniform() {
		t.Error("streams with swapped paths coincide")
	}
}
