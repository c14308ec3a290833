package tensorfile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sparseattn/sparseattn/tensor"
)

// MaxDims is the largest number of axes an array may have (NumPy's limit).
const MaxDims = 64

// Array is an n-dimensional array as stored in a file (row-major / C order).
// Exactly one of F32 and U16 holds the elements, chosen by DType. A Shape of
// length 0 is a scalar with one element.
type Array struct {
	DType tensor.DType
	Shape []int
	F32   []float32 // when DType == Float32
	U16   []uint16  // float16/bfloat16 bit patterns
}

// Len returns the number of elements, the product of Shape (1 for a
// scalar). It returns -1 if an axis is negative or the product exceeds
// tensor.MaxElements.
func (a *Array) Len() int {
	n, err := shapeLen(a.Shape)
	if err != nil {
		return -1
	}
	return int(n)
}

// shapeLen returns the element count of shape, rejecting negative axes,
// more than MaxDims axes, and shapes whose non-zero axes multiply to more
// than tensor.MaxElements (so no later size arithmetic can overflow).
func shapeLen(shape []int) (int64, error) {
	if len(shape) > MaxDims {
		return 0, fmt.Errorf("%d axes is more than the %d supported", len(shape), MaxDims)
	}
	nz, zero := int64(1), false
	for i, d := range shape {
		switch {
		case d < 0:
			return 0, fmt.Errorf("axis %d of shape %v is negative", i, shape)
		case d == 0:
			zero = true
		case int64(d) > tensor.MaxElements/nz:
			return 0, fmt.Errorf("shape %v has more than 2^40 elements", shape)
		default:
			nz *= int64(d)
		}
	}
	if zero {
		return 0, nil
	}
	return nz, nil
}

// check reports whether a is internally consistent: a valid dtype, a valid
// shape, and the matching slice holding exactly Len elements.
func (a *Array) check() error {
	if a == nil {
		return fmt.Errorf("%w: nil array", tensor.ErrShape)
	}
	if !a.DType.Valid() {
		return fmt.Errorf("%w: %v (want float32, float16 or bfloat16)", tensor.ErrDType, a.DType)
	}
	n, err := shapeLen(a.Shape)
	if err != nil {
		return fmt.Errorf("%w: %s", tensor.ErrShape, err)
	}
	have := len(a.U16)
	if a.DType == tensor.Float32 {
		have = len(a.F32)
	}
	if int64(have) != n {
		return fmt.Errorf("%w: shape %v needs %d %v elements, the array holds %d", tensor.ErrShape, a.Shape, n, a.DType, have)
	}
	return nil
}

// Tensor interprets the array as an attention tensor, sharing its memory.
// A 4-D array is [B,H,N,D] if layout is tensor.BHND or [B,N,H,D] if it is
// tensor.BNHD; a 3-D array is [H,N,D] (BHND) or [N,H,D] (BNHD) with B=1; a
// 2-D array is [N,D] with B=H=1. Other ranks give an error wrapping
// tensor.ErrShape, as do zero-sized axes.
func (a *Array) Tensor(layout tensor.Layout) (*tensor.Tensor, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if layout != tensor.BHND && layout != tensor.BNHD {
		return nil, fmt.Errorf("%w: unknown layout %v (want BHND or BNHD)", tensor.ErrShape, layout)
	}
	s := a.Shape
	var sh tensor.Shape
	switch len(s) {
	case 4:
		sh = tensor.Shape{B: s[0], H: s[1], N: s[2], D: s[3]}
		if layout == tensor.BNHD {
			sh.H, sh.N = s[2], s[1]
		}
	case 3:
		sh = tensor.Shape{B: 1, H: s[0], N: s[1], D: s[2]}
		if layout == tensor.BNHD {
			sh.H, sh.N = s[1], s[0]
		}
	case 2:
		sh = tensor.Shape{B: 1, H: 1, N: s[0], D: s[1]}
	default:
		order := "[B,H,N,D], [H,N,D]"
		if layout == tensor.BNHD {
			order = "[B,N,H,D], [N,H,D]"
		}
		return nil, fmt.Errorf("%w: array of shape %v has %d axes; %v attention tensors must be %s or [N,D]",
			tensor.ErrShape, s, len(s), layout, order)
	}
	if a.DType == tensor.Float32 {
		return tensor.FromFloat32(layout, sh, a.F32)
	}
	return tensor.FromBits16(a.DType, layout, sh, a.U16)
}

// FromTensor returns t as a 4-D array in the tensor's own memory order
// ([B,H,N,D] for BHND, [B,N,H,D] for BNHD), sharing its memory.
func FromTensor(t *tensor.Tensor) *Array {
	s := t.Shape()
	a := &Array{DType: t.DType(), Shape: []int{s.B, s.H, s.N, s.D}}
	if t.Layout() == tensor.BNHD {
		a.Shape[1], a.Shape[2] = s.N, s.H
	}
	if t.DType() == tensor.Float32 {
		a.F32 = t.Float32s()
	} else {
		a.U16 = t.Bits16()
	}
	return a
}

// Pick returns the named arrays (for example "q", "k", "v") as tensors in
// the given layout, sharing memory with the arrays. A missing name gives an
// error wrapping ErrNotFound that lists the names present; an array of the
// wrong rank gives one wrapping tensor.ErrShape.
func Pick(arrays map[string]*Array, layout tensor.Layout, names ...string) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, 0, len(names))
	for _, name := range names {
		a, ok := arrays[name]
		if !ok {
			return nil, fmt.Errorf("tensorfile: %w: no array named %q; the file has %s", ErrNotFound, name, listNames(arrays))
		}
		t, err := a.Tensor(layout)
		if err != nil {
			return nil, fmt.Errorf("tensorfile: array %q: %w", name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// listNames formats the sorted names of arrays for an error message.
func listNames(arrays map[string]*Array) string {
	if len(arrays) == 0 {
		return "no arrays"
	}
	const most = 32
	names := sortedNames(arrays)
	more := ""
	if len(names) > most {
		more = fmt.Sprintf(" and %d more", len(names)-most)
		names = names[:most]
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(quoted, ", ") + more
}

// sortedNames returns the keys of arrays in byte order.
func sortedNames(arrays map[string]*Array) []string {
	names := make([]string, 0, len(arrays))
	for n := range arrays {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
