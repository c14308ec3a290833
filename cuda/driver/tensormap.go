package driver

import "fmt"

// TensorMap is an encoded CUtensorMap: the 128-byte descriptor through
// which the Hopper bulk tensor copy engine (TMA) reads a tile of a tensor
// in global memory into shared memory. Kernels take it by value, as a
// __grid_constant__ parameter.
type TensorMap [16]uint64

// TiledMap describes a tensor of 16-bit or 32-bit elements and the box
// one copy moves, innermost dimension first.
type TiledMap struct {
	Addr Ptr // base address, 16-byte aligned
	// ElemBytes is the element size: 2 (or 0) or 4. A copy moves bits, so
	// the element type does not matter beyond its size.
	ElemBytes int
	// Dims are the tensor's sizes (up to 5 dimensions). Strides are the
	// byte strides of dimensions 1..rank-1 (dimension 0 is contiguous),
	// each a multiple of 16.
	Dims    []uint64
	Strides []uint64
	// Box is the tile one copy moves, per dimension; Box[0]·ElemBytes
	// bytes must be at most the swizzle span (128 bytes).
	Box []uint32
}

// cuTensorMapEncodeTiled enums (cuda.h).
const (
	tmapUint16      = 1 // CU_TENSOR_MAP_DATA_TYPE_UINT16: a copy moves bits
	tmapUint32      = 2 // CU_TENSOR_MAP_DATA_TYPE_UINT32
	tmapSwizzle128B = 3 // CU_TENSOR_MAP_SWIZZLE_128B
	tmapL2Promo256B = 3 // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
)

// EncodeTiled encodes m for copies between global memory and shared
// memory in the 128-byte swizzled layout (16-byte chunk c of row r at chunk c ^ (r mod 8)), with
// elements outside the tensor read as zeros. The error wraps
// ErrUnsupportedDevice when the driver has no tensor maps (before CUDA 12),
// and ErrDriver when it rejects m.
func (c *Ctx) EncodeTiled(m TiledMap) (TensorMap, error) {
	var t TensorMap
	enc := c.d.api.cuTensorMapEncodeTiled
	if enc == nil {
		return t, fmt.Errorf("%w: the driver has no cuTensorMapEncodeTiled (CUDA 12 or newer needed)", ErrUnsupportedDevice)
	}
	rank := len(m.Dims)
	if rank < 1 || rank > 5 || len(m.Strides) != rank-1 || len(m.Box) != rank {
		return t, fmt.Errorf("%w: tensor map of rank %d with %d strides and %d box sizes", ErrDriver, rank, len(m.Strides), len(m.Box))
	}
	dtype := int32(tmapUint16)
	switch m.ElemBytes {
	case 0, 2:
	case 4:
		dtype = tmapUint32
	default:
		return t, fmt.Errorf("%w: tensor map of %d-byte elements; 2 or 4 are supported", ErrDriver, m.ElemBytes)
	}
	elem := make([]uint32, rank)
	for i := range elem {
		elem[i] = 1
	}
	strides := append([]uint64(nil), m.Strides...)
	if len(strides) == 0 {
		strides = []uint64{0} // never read for rank 1; keeps the pointer valid
	}
	res := enc(&t, dtype, uint32(rank), uint64(m.Addr), &m.Dims[0], &strides[0], &m.Box[0], &elem[0], 0, tmapSwizzle128B, tmapL2Promo256B, 0)
	if err := c.check("cuTensorMapEncodeTiled", res); err != nil {
		return t, fmt.Errorf("tensor map %v box %v strides %v: %w", m.Dims, m.Box, m.Strides, err)
	}
	return t, nil
}

// TensorMaps reports whether the driver encodes tensor maps (CUDA 12 and
// newer), which the Hopper bulk tensor copy engine needs.
func (d *Device) TensorMaps() bool { return d.api.cuTensorMapEncodeTiled != nil }
