// Package tensor holds the 4-D attention tensors sparseattn works on: shape
// [B, H, N, D], stored as float32, float16 or bfloat16, in either the
// head-major layout BHND (PyTorch SDPA) or the token-major layout BNHD
// (FlashAttention's "NHD"). Rows are read and written as float32, so the
// storage type never leaks into the attention kernels.
package tensor

import (
	"fmt"
	"strings"
)

// Layout is the memory order of a Tensor's four axes.
type Layout uint8

// The supported layouts. The logical shape is always [B, H, N, D]; only the
// order in memory differs.
const (
	BHND Layout = iota // [batch, head, token, dim]: SDPA's layout
	BNHD               // [batch, token, head, dim]: FlashAttention's "NHD"
)

// String returns "BHND" or "BNHD".
func (l Layout) String() string {
	switch l {
	case BHND:
		return "BHND"
	case BNHD:
		return "BNHD"
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}

// ParseLayout maps "bhnd" or "bnhd"/"nhd" (any case) to a Layout.
func ParseLayout(s string) (Layout, error) {
	switch strings.ToUpper(s) {
	case "BHND", "HND":
		return BHND, nil
	case "BNHD", "NHD":
		return BNHD, nil
	}
	return 0, fmt.Errorf("%w: unknown layout %q (want BHND or BNHD)", ErrShape, s)
}

// Shape is the logical shape [B, H, N, D] of an attention tensor.
type Shape struct {
	B, H, N, D int
}

// MaxElements bounds the element count of one tensor: 2^40 on 64-bit
// platforms, far beyond any real attention input, and 2^28 on 32-bit ones.
// It keeps size arithmetic clear of overflow.
const MaxElements = 1 << (28 + 12*(^uint(0)>>63))

// Len is the number of elements, B·H·N·D.
func (s Shape) Len() int { return s.B * s.H * s.N * s.D }

// Validate reports an error unless every axis is positive and the element
// count is at most MaxElements.
func (s Shape) Validate() error {
	if s.B <= 0 || s.H <= 0 || s.N <= 0 || s.D <= 0 {
		return fmt.Errorf("%w: %v has a non-positive axis", ErrShape, s)
	}
	n := 1
	for _, a := range [...]int{s.B, s.H, s.N, s.D} {
		if a > MaxElements/n {
			return fmt.Errorf("%w: %v has more than %d elements", ErrShape, s, MaxElements)
		}
		n *= a
	}
	return nil
}

// String formats the shape as "[B=1 H=8 N=4096 D=128]".
func (s Shape) String() string {
	return fmt.Sprintf("[B=%d H=%d N=%d D=%d]", s.B, s.H, s.N, s.D)
}

// Tensor is a dense [B, H, N, D] array. The zero value is not usable; build
// one with New, FromFloat32 or FromBits16. A Tensor is safe for concurrent
// reads; concurrent writes to distinct rows are safe too.
type Tensor struct {
	shape  Shape
	layout Layout
	dtype  DType
	f32    []float32 // storage when dtype == Float32
	u16    []uint16  // storage when dtype is Float16 or BFloat16
}

// New returns a zero-filled tensor.
func New(dtype DType, layout Layout, shape Shape) (*Tensor, error) {
	if err := checkHeader(dtype, layout, shape); err != nil {
		return nil, err
	}
	t := &Tensor{shape: shape, layout: layout, dtype: dtype}
	if dtype == Float32 {
		t.f32 = make([]float32, shape.Len())
	} else {
		t.u16 = make([]uint16, shape.Len())
	}
	return t, nil
}

// FromFloat32 wraps data, which must hold exactly shape.Len() elements in the
// given layout. The tensor shares data with the caller.
func FromFloat32(layout Layout, shape Shape, data []float32) (*Tensor, error) {
	if err := checkHeader(Float32, layout, shape); err != nil {
		return nil, err
	}
	if len(data) != shape.Len() {
		return nil, fmt.Errorf("%w: %v needs %d elements, got %d", ErrShape, shape, shape.Len(), len(data))
	}
	return &Tensor{shape: shape, layout: layout, dtype: Float32, f32: data}, nil
}

// FromBits16 wraps raw float16 or bfloat16 bit patterns, which must hold
// exactly shape.Len() elements in the given layout. The tensor shares bits
// with the caller.
func FromBits16(dtype DType, layout Layout, shape Shape, bits []uint16) (*Tensor, error) {
	if dtype != Float16 && dtype != BFloat16 {
		return nil, fmt.Errorf("%w: FromBits16 takes float16 or bfloat16, not %v", ErrDType, dtype)
	}
	if err := checkHeader(dtype, layout, shape); err != nil {
		return nil, err
	}
	if len(bits) != shape.Len() {
		return nil, fmt.Errorf("%w: %v needs %d elements, got %d", ErrShape, shape, shape.Len(), len(bits))
	}
	return &Tensor{shape: shape, layout: layout, dtype: dtype, u16: bits}, nil
}

func checkHeader(dtype DType, layout Layout, shape Shape) error {
	if !dtype.Valid() {
		return fmt.Errorf("%w: %v", ErrDType, dtype)
	}
	if layout != BHND && layout != BNHD {
		return fmt.Errorf("%w: %v", ErrShape, layout)
	}
	return shape.Validate()
}

// Shape returns the logical shape.
func (t *Tensor) Shape() Shape { return t.shape }

// DType returns the storage type.
func (t *Tensor) DType() DType { return t.dtype }

// Layout returns the memory order.
func (t *Tensor) Layout() Layout { return t.layout }

// Float32s returns the backing slice of a float32 tensor, in its layout, or
// nil for other storage types.
func (t *Tensor) Float32s() []float32 { return t.f32 }

// Bits16 returns the backing bit patterns of a float16 or bfloat16 tensor,
// in its layout, or nil for float32.
func (t *Tensor) Bits16() []uint16 { return t.u16 }

// RowOffset is the index in the backing slice of element [b, h, n, 0]. The
// D elements of a row are always contiguous.
func (t *Tensor) RowOffset(b, h, n int) int {
	s := t.shape
	if t.layout == BNHD {
		return ((b*s.N+n)*s.H + h) * s.D
	}
	return ((b*s.H+h)*s.N + n) * s.D
}

// RowStride is the distance in the backing slice between rows [b, h, n]
// and [b, h, n+1]: D for BHND, H·D for BNHD.
func (t *Tensor) RowStride() int {
	if t.layout == BNHD {
		return t.shape.H * t.shape.D
	}
	return t.shape.D
}

// ReadRow converts row [b, h, n, :] to float32 into dst[:D].
func (t *Tensor) ReadRow(b, h, n int, dst []float32) {
	off := t.RowOffset(b, h, n)
	d := t.shape.D
	dst = dst[:d]
	switch t.dtype {
	case Float32:
		copy(dst, t.f32[off:off+d])
	case BFloat16:
		for i, x := range t.u16[off : off+d] {
			dst[i] = BF16ToFloat32(x)
		}
	case Float16:
		for i, x := range t.u16[off : off+d] {
			dst[i] = F16ToFloat32(x)
		}
	}
}

// WriteRow stores src[:D] into row [b, h, n, :], rounding to the storage
// type with round-to-nearest-even.
func (t *Tensor) WriteRow(b, h, n int, src []float32) {
	off := t.RowOffset(b, h, n)
	d := t.shape.D
	src = src[:d]
	switch t.dtype {
	case Float32:
		copy(t.f32[off:off+d], src)
	case BFloat16:
		for i, x := range src {
			t.u16[off+i] = Float32ToBF16(x)
		}
	case Float16:
		for i, x := range src {
			t.u16[off+i] = Float32ToF16(x)
		}
	}
}

// At returns element [b, h, n, d] as float32.
func (t *Tensor) At(b, h, n, d int) float32 {
	i := t.RowOffset(b, h, n) + d
	switch t.dtype {
	case BFloat16:
		return BF16ToFloat32(t.u16[i])
	case Float16:
		return F16ToFloat32(t.u16[i])
	}
	return t.f32[i]
}

// Set stores v at [b, h, n, d], rounding to the storage type.
func (t *Tensor) Set(b, h, n, d int, v float32) {
	i := t.RowOffset(b, h, n) + d
	switch t.dtype {
	case BFloat16:
		t.u16[i] = Float32ToBF16(v)
	case Float16:
		t.u16[i] = Float32ToF16(v)
	default:
		t.f32[i] = v
	}
}

// Convert returns a copy of t with the given storage type and layout.
// Narrowing rounds to nearest even; widening is exact.
func (t *Tensor) Convert(dtype DType, layout Layout) (*Tensor, error) {
	out, err := New(dtype, layout, t.shape)
	if err != nil {
		return nil, err
	}
	if dtype == t.dtype && layout == t.layout {
		copy(out.f32, t.f32)
		copy(out.u16, t.u16)
		return out, nil
	}
	row := make([]float32, t.shape.D)
	s := t.shape
	for b := 0; b < s.B; b++ {
		for h := 0; h < s.H; h++ {
			for n := 0; n < s.N; n++ {
				t.ReadRow(b, h, n, row)
				out.WriteRow(b, h, n, row)
			}
		}
	}
	return out, nil
}

// Clone returns a deep copy, or nil for a Tensor not built by New,
// FromFloat32 or FromBits16.
func (t *Tensor) Clone() *Tensor {
	out, _ := t.Convert(t.dtype, t.layout) // t's header was validated when t was built
	return out
}
