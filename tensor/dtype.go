package tensor

import (
	"fmt"
	"math"

	"github.com/x448/float16"
)

// DType is the element type a Tensor stores. Computation always happens in
// float32; the storage type only decides memory use and file round trips.
type DType uint8

// The supported storage types.
const (
	Float32  DType = iota + 1 // IEEE 754 binary32
	Float16                   // IEEE 754 binary16
	BFloat16                  // bfloat16: the upper half of a binary32
)

// String returns the lower-case name used by the CLI and in file headers
// ("float32", "float16", "bfloat16").
func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the number of bytes one element occupies.
func (d DType) Size() int {
	switch d {
	case Float32:
		return 4
	case Float16, BFloat16:
		return 2
	}
	return 0
}

// Valid reports whether d is one of the supported storage types.
func (d DType) Valid() bool { return d.Size() != 0 }

// ParseDType maps "float32"/"f32"/"fp32", "float16"/"f16"/"fp16"/"half"
// and "bfloat16"/"bf16" to a DType.
func ParseDType(s string) (DType, error) {
	switch s {
	case "float32", "f32", "fp32":
		return Float32, nil
	case "float16", "f16", "fp16", "half":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	}
	return 0, fmt.Errorf("%w: %q (want float32, float16 or bfloat16)", ErrDType, s)
}

// BF16ToFloat32 widens bfloat16 bits to float32 exactly.
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBF16 narrows f to bfloat16 with round-to-nearest-even. NaN stays
// NaN (quiet) and infinities stay infinite.
func Float32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it a quiet NaN
		return uint16(u>>16) | 0x0040
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToFloat32 widens IEEE binary16 bits to float32 exactly.
func F16ToFloat32(h uint16) float32 { return float16.Frombits(h).Float32() }

// Float32ToF16 narrows f to IEEE binary16 with round-to-nearest-even.
func Float32ToF16(f float32) uint16 { return uint16(float16.Fromfloat32(f)) }
