package kernel

import "math"

// Exponent masks for FirstNonFinite16: an element is NaN or infinite
// exactly when all of its exponent bits are set.
const (
	F16ExpMask  uint16 = 0x7c00 // IEEE binary16
	BF16ExpMask uint16 = 0x7f80 // bfloat16
)

// f32ExpMask is the exponent field of an IEEE binary32.
const f32ExpMask uint32 = 0x7f800000

// FirstNonFinite32 returns the index of the first NaN or ±Inf in x, or -1
// when every element is finite. It tests the exponent bits, so it never
// converts or rounds, and reads x at memory speed.
func FirstNonFinite32(x []float32) int {
	return firstNonFinite32(x)
}

// FirstNonFinite16 returns the index of the first element of x whose
// exponent bits (expMask: F16ExpMask or BF16ExpMask) are all set — a NaN
// or ±Inf of that 16-bit format — or -1 when there is none.
func FirstNonFinite16(x []uint16, expMask uint16) int {
	if expMask == 0 {
		panic("kernel: FirstNonFinite16: zero exponent mask")
	}
	return firstNonFinite16(x, expMask)
}

// firstNonFinite32Generic is FirstNonFinite32 in portable Go: it ORs a
// test of 8 elements at a time and looks for the index only in a group
// that failed, so the loop has no data-dependent branch per element.
func firstNonFinite32Generic(x []float32) int {
	i := 0
	for ; i+8 <= len(x); i += 8 {
		g := x[i : i+8 : i+8]
		var bad uint32
		for _, v := range g {
			bad |= (^bits32(v) & f32ExpMask) - 1 // wraps to bit 31 only when the exponent is all ones
		}
		if bad&0x80000000 != 0 {
			return i + scan32(g)
		}
	}
	if j := scan32(x[i:]); j >= 0 {
		return i + j
	}
	return -1
}

// scan32 is the plain element-by-element search.
func scan32(x []float32) int {
	for i, v := range x {
		if bits32(v)&f32ExpMask == f32ExpMask {
			return i
		}
	}
	return -1
}

// firstNonFinite16Generic is FirstNonFinite16 in portable Go.
func firstNonFinite16Generic(x []uint16, expMask uint16) int {
	i := 0
	for ; i+16 <= len(x); i += 16 {
		g := x[i : i+16 : i+16]
		var bad uint32
		for _, v := range g {
			bad |= uint32(^v&expMask) - 1 // negative (bit 31 set) only when the exponent is all ones
		}
		if bad&0x80000000 != 0 {
			return i + scan16(g, expMask)
		}
	}
	if j := scan16(x[i:], expMask); j >= 0 {
		return i + j
	}
	return -1
}

// scan16 is the plain element-by-element search.
func scan16(x []uint16, expMask uint16) int {
	for i, v := range x {
		if v&expMask == expMask {
			return i
		}
	}
	return -1
}

func bits32(v float32) uint32 { return math.Float32bits(v) }
