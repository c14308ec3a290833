package workload

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// This file holds the only transcendental functions the generators use.
//
// Bit-identical output across platforms rules out the math package's Exp,
// Log, Sin and Cos: several architectures have assembly versions of them
// (amd64's Exp even picks an FMA path at run time), and on architectures
// whose compiler fuses x*y+z the pure-Go versions round differently. The
// versions below use only +, -, *, / and math.Sqrt (all correctly rounded
// in IEEE 754) plus bit manipulation, and every product that is added to
// something is wrapped in an explicit float64 conversion, which the Go
// specification says prevents fused multiply-add. They are accurate to a
// few ulp, which is all a synthetic workload needs; what matters is that
// every platform computes the same bits.

const (
	ln2Hi  = 6.93147180369123816490e-01 // upper bits of ln 2 (exact times small ints)
	ln2Lo  = 1.90821492927058770002e-10 // ln 2 - ln2Hi
	invLn2 = 1.44269504088896338700e+00
	// π/2 split into three parts for Cody–Waite reduction; the first two
	// are float32 values, so k·part is exact for |k| < 2^29.
	pio2a = 1.5707963705062866
	pio2b = -4.371138828673793e-08
	pio2c = -1.7151244994428829e-15
	// 2/π
	twoOverPi = 0.63661977236758134308
)

// dexp returns e^x.
func dexp(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 709:
		return math.Inf(1)
	case x < -708:
		return 0 // below the normal range; the generators never need it
	}
	k := math.Floor(float64(x*invLn2) + 0.5)
	r := x - float64(k*ln2Hi)
	r -= float64(k * ln2Lo)
	// Taylor series of e^r for |r| <= 0.35, Horner form, degree 14.
	p := 1.0 / 87178291200.0 // 1/14!
	for _, c := range [...]float64{
		1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800,
		1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
		1.0 / 24, 1.0 / 6, 1.0 / 2, 1, 1,
	} {
		p = float64(p*r) + c
	}
	return float64(p * math.Float64frombits(uint64(int64(k)+1023)<<52))
}

// dlog returns the natural logarithm of x. x must be a positive normal
// number or +Inf; zero gives -Inf and negative values NaN.
func dlog(x float64) float64 {
	switch {
	case x != x || x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return x
	}
	bits := math.Float64bits(x)
	e := int64(bits>>52&0x7ff) - 1023
	if e == -1023 { // subnormal: scale into the normal range first
		return dlog(x*(1<<54)) - 54*ln2Hi - 54*ln2Lo
	}
	m := math.Float64frombits(bits&^(0x7ff<<52) | 1023<<52) // in [1, 2)
	if m > math.Sqrt2 {
		m /= 2
		e++
	}
	// log m = 2 atanh(s) with s = (m-1)/(m+1), |s| <= 0.1716.
	s := (m - 1) / (m + 1)
	s2 := s * s
	p := 1.0 / 25
	for _, c := range [...]float64{
		1.0 / 23, 1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13,
		1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1,
	} {
		p = float64(p*s2) + c
	}
	fe := float64(e)
	return float64(fe*ln2Hi) + (float64(fe*ln2Lo) + float64(2*s*p))
}

// dpow returns b^x for b > 0.
func dpow(b, x float64) float64 { return dexp(float64(x * dlog(b))) }

// dsincos returns sin x and cos x. Arguments up to about 2^28 in magnitude
// are reduced accurately; larger ones (never produced by the generators)
// still give deterministic, if less accurate, results.
func dsincos(x float64) (sin, cos float64) {
	if x != x || math.IsInf(x, 0) {
		return math.NaN(), math.NaN()
	}
	k := math.Floor(float64(x*twoOverPi) + 0.5)
	r := x - float64(k*pio2a)
	r -= float64(k * pio2b)
	r -= float64(k * pio2c)
	r2 := r * r
	// Taylor series on |r| <= π/4: sin to r^17, cos to r^18.
	ps := -1.0 / 355687428096000 // -1/17!
	for _, c := range [...]float64{
		1.0 / 1307674368000, -1.0 / 6227020800, 1.0 / 39916800,
		-1.0 / 362880, 1.0 / 5040, -1.0 / 120, 1.0 / 6,
	} {
		ps = float64(ps*r2) + c
	}
	// ps now approximates (r - sin r)/r^3 with the wrong sign; fix below.
	s := r - float64(float64(r*r2)*ps)
	pc := 1.0 / 6402373705728000 // 1/18!
	for _, c := range [...]float64{
		-1.0 / 20922789888000, 1.0 / 87178291200, -1.0 / 479001600,
		1.0 / 3628800, -1.0 / 40320, 1.0 / 720, -1.0 / 24, 1.0 / 2,
	} {
		pc = float64(pc*r2) + c
	}
	c := 1 - float64(r2*pc)
	switch int64(k) & 3 {
	case 0:
		return s, c
	case 1:
		return c, -s
	case 2:
		return -s, -c
	default:
		return -c, s
	}
}

// rng is a seeded random source: a PCG stream plus a cached second normal
// deviate. It is a plain value, so reseeding it per token allocates
// nothing. Not safe for concurrent use; every worker owns its own.
type rng struct {
	pcg      rand.PCG
	spare    float64
	hasSpare bool
}

// Stream tags: the first element of every derived-seed path, so that no
// two purposes ever share a random stream.
const (
	tagRandQ uint64 = iota + 1
	tagRandK
	tagRandV
	tagLLMKVParams
	tagLLMQParams
	tagLLMInput
	tagLLMEmbed
	tagLLMK
	tagLLMV
	tagLLMQ
	tagVisKVParams
	tagVisQParams
	tagVisInput
	tagVisK
	tagVisV
	tagVisQ
)

// splitmix64's finaliser: a bijective 64-bit mixer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// deriveSeed hashes a base seed and a path of small integers (a stream tag,
// batch, head, ...) into an independent 64-bit seed.
func deriveSeed(seed uint64, path ...uint64) uint64 {
	h := mix64(seed ^ 0x6a09e667f3bcc909)
	for _, p := range path {
		h = mix64(h ^ mix64(p+0x9e3779b97f4a7c15))
	}
	return h
}

// newRNG returns the stream for seed and path.
func newRNG(seed uint64, path ...uint64) *rng {
	g := &rng{}
	g.reseed(seed, path...)
	return g
}

// reseed restarts g as the stream for seed and path.
func (g *rng) reseed(seed uint64, path ...uint64) {
	s := deriveSeed(seed, path...)
	g.pcg.Seed(s, mix64(s^0xbb67ae8584caa73b))
	g.hasSpare = false
}

// uniform returns a float64 in [0, 1) (the same construction as
// math/rand/v2's Float64).
func (g *rng) uniform() float64 { return float64(g.pcg.Uint64()<<11>>11) / (1 << 53) }

// intN returns an int in [0, n) without bias (Lemire's method). n > 0.
func (g *rng) intN(n int) int {
	un := uint64(n)
	hi, lo := bits.Mul64(g.pcg.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(g.pcg.Uint64(), un)
		}
	}
	return int(hi)
}

// norm returns a standard normal deviate (Marsaglia's polar method, built
// on dlog so that it is bit-identical everywhere).
func (g *rng) norm() float64 {
	if g.hasSpare {
		g.hasSpare = false
		return g.spare
	}
	for {
		u := float64(2*g.uniform()) - 1
		v := float64(2*g.uniform()) - 1
		s := float64(u*u) + float64(v*v)
		if s >= 1 || s == 0 {
			continue
		}
		f := math.Sqrt(-2 * dlog(s) / s)
		g.spare, g.hasSpare = float64(v*f), true
		return float64(u * f)
	}
}

// noise returns a cheap approximately normal deviate with mean 0 and
// variance 1: the Irwin–Hall sum of four 16-bit uniforms cut from a single
// 64-bit draw, standardized. Its tails stop at ±3.46; the generators use it
// for the per-token noise that dominates their random-number budget, and
// the exact norm for everything else.
func (g *rng) noise() float64 {
	u := g.pcg.Uint64()
	s := (u & 0xffff) + (u >> 16 & 0xffff) + (u >> 32 & 0xffff) + (u >> 48)
	// Each chunk is uniform on {0..65535}: mean 32767.5, variance (65536²−1)/12.
	const mean = 4 * 32767.5
	const inv = 1 / 37837.22723720648 // 1/sqrt(4·(65536²−1)/12)
	return float64((float64(s) - mean) * inv)
}

// fillNoise fills dst with independent noise deviates times scale.
func (g *rng) fillNoise(dst []float64, scale float64) {
	for i := range dst {
		dst[i] = float64(g.noise() * scale)
	}
}

// fillNorm fills dst with independent normal deviates times scale.
func (g *rng) fillNorm(dst []float64, scale float64) {
	for i := range dst {
		dst[i] = float64(g.norm() * scale)
	}
}
