package kernel

import "math"

// Constants of the canonical float64 exponential (Exp64): log2(e), ln 2
// split into a 33-bit head (so n·ln2Hi is exact for |n| < 2¹¹) and a tail,
// and the Taylor coefficients 1/13!, 1/12!, …, 1/2!, as hexadecimal
// literals that the device code repeats.
const (
	exp64Log2E = 0x1.71547652b82fep+00
	exp64Ln2Hi = 0x1.62e42feep-01
	exp64Ln2Lo = 0x1.a39ef35793c76p-33
)

var exp64Coef = [...]float64{
	0x1.6124613a86d09p-33, 0x1.1eed8eff8d898p-29, 0x1.ae64567f544e4p-26, 0x1.27e4fb7789f5cp-22,
	0x1.71de3a556c734p-19, 0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-13, 0x1.6c16c16c16c17p-10,
	0x1.1111111111111p-07, 0x1.5555555555555p-05, 0x1.5555555555555p-03, 0x1p-01,
}

// Exp64s sets dst[i] to plan.Exp64(src[i]) bit for bit, for i below
// len(src): the canonical float64 exponential (a fixed sequence of double
// multiplies and adds, none fused, that the device planners repeat), eight
// values at a time in AVX-512 where the CPU has it. dst may be src.
//
// It panics only on programmer error: dst shorter than src.
func Exp64s(dst, src []float64) {
	if len(dst) < len(src) {
		panic("kernel: Exp64s: dst shorter than src")
	}
	exp64s(dst[:len(src)], src)
}

// exp64sGeneric is Exp64s one value at a time.
func exp64sGeneric(dst, src []float64) {
	for i, x := range src {
		dst[i] = Exp64(x)
	}
}

// Exp64 is the canonical e^x that plan.Exp64 documents (plan/canon.go) and
// the device planners repeat as exp64_canon: a fixed sequence of double
// multiplies and adds, the explicit conversions forbidding fused
// multiply-adds.
func Exp64(x float64) float64 {
	switch {
	case x != x:
		return x
	case x < -708:
		return 0
	case x > 709:
		return math.Inf(1)
	}
	n := math.Floor(float64(x*exp64Log2E) + 0.5)
	r := x - float64(n*exp64Ln2Hi)
	r -= float64(n * exp64Ln2Lo)
	p := exp64Coef[0]
	for _, c := range exp64Coef[1:] {
		p = float64(p*r) + c
	}
	p = float64(p*r) + 1
	p = float64(p*r) + 1
	return p * math.Float64frombits(uint64(int64(n)+1023)<<52)
}
