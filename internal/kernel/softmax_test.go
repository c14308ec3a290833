package kernel

import (
	"fmt"
	"math"
	"os"
	"testing"
)

// softmaxCase is a tile for OnlineSoftmax with its per-row state.
type softmaxCase struct {
	m, n, lds, dv, ldacc  int
	s, mloc, mrun, l, acc []float32
	sum, lold             []float32
}

// newSoftmaxCase draws a tile whose rows cover OnlineSoftmax's branches:
// fresh rows (mrun = -Inf), rows whose maximum does not move (α = 1) or
// moves, fully masked rows (all -Inf, mnew = -Inf), and logits that
// underflow exp or sit at its underflow boundary. The padding between rows
// is NaN, so that a read or write there shows.
func newSoftmaxCase(t *testing.T, m, n, lds, dv, ldacc int) *softmaxCase {
	r := newRand(t)
	negInf := float32(math.Inf(-1))
	c := &softmaxCase{m: m, n: n, lds: lds, dv: dv, ldacc: ldacc,
		s: make([]float32, (m-1)*lds+n), acc: make([]float32, (m-1)*ldacc+dv),
		mloc: make([]float32, m), mrun: make([]float32, m), l: make([]float32, m),
		sum: make([]float32, m), lold: make([]float32, m)}
	nan := float32(math.NaN())
	for i := range c.s {
		c.s[i] = nan
	}
	for i := range c.acc {
		c.acc[i] = nan
	}
	for i := range m {
		row := c.s[i*lds : i*lds+n]
		for j := range row {
			switch r.IntN(12) {
			case 0:
				row[j] = negInf // masked
			case 1:
				row[j] = -87.3 - 0.1*r.Float32() // near exp's underflow
			case 2:
				row[j] = -200 // underflows
			default:
				row[j] = 20 * (r.Float32() - 0.5)
			}
		}
		for j := range c.acc[i*ldacc : i*ldacc+dv] {
			c.acc[i*ldacc+j] = r.Float32() - 0.5
		}
		c.mloc[i] = Max(row)
		switch i % 4 {
		case 0: // fresh row
			c.mrun[i], c.l[i] = negInf, 0
			clear(c.acc[i*ldacc : i*ldacc+dv])
		case 1: // max unchanged: α = 1
			c.mrun[i], c.l[i] = c.mloc[i]+1, 1+10*r.Float32()
		case 2: // max moves
			c.mrun[i], c.l[i] = c.mloc[i]-3*r.Float32()-0.01, 1+10*r.Float32()
		case 3: // a masked row: nothing visible yet when fresh
			for j := range row {
				row[j] = negInf
			}
			c.mloc[i] = negInf
			if r.IntN(2) == 0 {
				c.mrun[i], c.l[i] = negInf, 0
			} else {
				c.mrun[i], c.l[i] = 2, 3
			}
		}
	}
	return c
}

func (c *softmaxCase) clone() *softmaxCase {
	d := *c
	for _, p := range []*[]float32{&d.s, &d.mloc, &d.mrun, &d.l, &d.acc, &d.sum, &d.lold} {
		*p = append([]float32(nil), (*p)...)
	}
	return &d
}

func (c *softmaxCase) run(f func(m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int)) {
	f(c.m, c.n, c.s, c.lds, c.mloc, c.mrun, c.l, c.sum, c.lold, c.acc, c.ldacc, c.dv)
}

// sameBits reports the first index where a and b differ in bits (NaN
// patterns included), or -1.
func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

var softmaxShapes = []struct{ m, n, lds, dv, ldacc int }{
	{1, 1, 1, 1, 1}, {4, 15, 16, 16, 16}, {5, 16, 16, 15, 17}, {3, 17, 20, 17, 17},
	{8, 31, 31, 64, 64}, {6, 33, 40, 32, 48}, {7, 47, 47, 96, 96}, {64, 64, 64, 64, 64},
	{16, 64, 64, 128, 128}, {5, 65, 65, 128, 130}, {9, 100, 128, 256, 256}, {3, 130, 131, 33, 40},
}

// TestOnlineSoftmaxMatchesRows checks OnlineSoftmax against the same step
// taken row by row with the package's ExpShift and Scale (α as ExpShift's
// one-element result), bit for bit: the AVX-512 kernel must give exactly
// what the per-row calls did. Padding between rows must stay untouched.
func TestOnlineSoftmaxMatchesRows(t *testing.T) {
	for _, sh := range softmaxShapes {
		t.Run(fmt.Sprintf("%dx%d-ld%d-dv%d-ld%d", sh.m, sh.n, sh.lds, sh.dv, sh.ldacc), func(t *testing.T) {
			got := newSoftmaxCase(t, sh.m, sh.n, sh.lds, sh.dv, sh.ldacc)
			want := got.clone()
			got.run(OnlineSoftmax)
			want.run(func(m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int) {
				onlineSoftmaxWith(expShift, scale, m, n, s, lds, mloc, mrun, l, sum, lold, acc, ldacc, dv)
			})
			for name, p := range map[string][2][]float32{
				"s": {got.s, want.s}, "acc": {got.acc, want.acc}, "mrun": {got.mrun, want.mrun},
				"l": {got.l, want.l}, "sum": {got.sum, want.sum}, "lold": {got.lold, want.lold},
			} {
				if i := sameBits(p[0], p[1]); i >= 0 {
					t.Errorf("%s[%d] = %g, row by row %g", name, i, p[0][i], p[1][i])
				}
			}
		})
	}
}

// TestOnlineSoftmaxReference checks every implementation against the step
// computed in float64. Tolerances: each exp is within 1.2e-7 relative of
// the true value (ExpShift's bound, portable code) after the argument is
// rounded to float32, which moves it by up to |x|·2⁻²⁴ (|x| < 128 here:
// 8e-6 relative); the sums and l add n float32 terms (n·2⁻²⁴ relative).
func TestOnlineSoftmaxReference(t *testing.T) {
	impls := map[string]func(m, n int, s []float32, lds int, mloc, mrun, l, sum, lold []float32, acc []float32, ldacc, dv int){
		"dispatch": OnlineSoftmax, "generic": onlineSoftmaxGeneric,
	}
	for _, sh := range softmaxShapes {
		for name, f := range impls {
			c := newSoftmaxCase(t, sh.m, sh.n, sh.lds, sh.dv, sh.ldacc)
			in := c.clone()
			c.run(f)
			tol := 1e-5 + float64(sh.n)*6e-8
			near := func(what string, i int, got float32, want float64) {
				if d := math.Abs(float64(got) - want); d > tol*math.Abs(want)+1e-37 {
					t.Errorf("%s %dx%d: %s[%d] = %g, want %g", name, sh.m, sh.n, what, i, got, want)
				}
			}
			for i := range sh.m {
				mr, ml := float64(in.mrun[i]), float64(in.mloc[i])
				mnew := math.Max(mr, ml)
				if math.IsInf(mnew, -1) {
					for j := range sh.n {
						if c.s[i*sh.lds+j] != 0 {
							t.Errorf("%s %dx%d: masked row %d: s[%d] = %g, want 0", name, sh.m, sh.n, i, j, c.s[i*sh.lds+j])
						}
					}
					if c.mrun[i] != in.mrun[i] || c.l[i] != in.l[i] || c.sum[i] != 0 || c.lold[i] != 0 {
						t.Errorf("%s: masked row %d: state changed", name, i)
					}
					continue
				}
				alpha := math.Exp(mr - mnew)
				var sum float64
				for j := range sh.n {
					e := math.Exp(float64(in.s[i*sh.lds+j]) - mnew)
					if e < 1.2e-38 { // below the normal range: the kernel gives 0
						e = 0
					}
					near("s", i*sh.lds+j, c.s[i*sh.lds+j], e)
					sum += e
				}
				near("sum", i, c.sum[i], sum)
				near("lold", i, c.lold[i], float64(in.l[i])*alpha)
				near("l", i, c.l[i], float64(in.l[i])*alpha+sum)
				if float64(c.mrun[i]) != mnew {
					t.Errorf("%s: mrun[%d] = %g, want %g", name, i, c.mrun[i], mnew)
				}
				for j := range sh.dv {
					near("acc", i*sh.ldacc+j, c.acc[i*sh.ldacc+j], float64(in.acc[i*sh.ldacc+j])*alpha)
				}
			}
			for i, v := range c.s { // the padding between rows stays NaN
				if i%sh.lds >= sh.n && v == v {
					t.Errorf("%s: s padding %d written", name, i)
				}
			}
		}
	}
}

// TestOnlineSoftmaxExpArguments checks OnlineSoftmax's exp against
// ExpShift's, bit for bit, on every 257th float32 bit pattern as the
// argument (every pattern when KERNEL_EXHAUSTIVE is set): the AVX-512
// kernel computes 2^n by VSCALEFPS under a zero mask rather than in the
// exponent field, which must not change a result.
func TestOnlineSoftmaxExpArguments(t *testing.T) {
	step := uint64(257)
	if os.Getenv("KERNEL_EXHAUSTIVE") != "" {
		step = 1
	}
	const chunk = 1 << 16
	row := make([]float32, 0, chunk)
	got := make([]float32, chunk)
	zero := [1]float32{}
	for b := uint64(0); b < 1<<32; b += step {
		row = append(row, math.Float32frombits(uint32(b)))
		if len(row) < chunk && b+step < 1<<32 {
			continue
		}
		copy(got, row)
		want := make([]float32, len(row))
		ws := ExpShift(want, row, 0)
		mloc, mrun, l, sum, lold := zero, zero, [1]float32{1}, zero, zero // shift 0, α = 1
		OnlineSoftmax(1, len(row), got, len(row), mloc[:], mrun[:], l[:], sum[:], lold[:], zero[:], 1, 1)
		if i := sameBits(got[:len(row)], want); i >= 0 {
			t.Fatalf("exp(%g) = %g, ExpShift gives %g", row[i], got[i], want[i])
		}
		if math.Float32bits(sum[0]) != math.Float32bits(ws) {
			t.Fatalf("sum %g, ExpShift gives %g", sum[0], ws)
		}
		row = row[:0]
	}
}

// TestOnlineSoftmaxPanics checks the programmer errors that panic.
func TestOnlineSoftmaxPanics(t *testing.T) {
	v := make([]float32, 8)
	for name, f := range map[string]func(){
		"negative":  func() { OnlineSoftmax(2, -1, v, 4, v, v, v, v, v, v, 4, 4) },
		"short s":   func() { OnlineSoftmax(2, 4, v[:7], 4, v, v, v, v, v, v, 4, 4) },
		"lds < n":   func() { OnlineSoftmax(2, 4, v, 3, v, v, v, v, v, v, 4, 4) },
		"short acc": func() { OnlineSoftmax(2, 4, v, 4, v, v, v, v, v, v[:7], 4, 4) },
		"short row": func() { OnlineSoftmax(2, 4, v, 4, v, v[:1], v, v, v, v, 4, 4) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
