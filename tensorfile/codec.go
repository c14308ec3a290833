package tensorfile

import (
	"encoding/binary"
	"io"
	"math"

	"github.com/sparseattn/sparseattn/tensor"
)

// chunkBytes is the size of the scratch buffer used to convert between file
// bytes and elements, and the initial capacity granted to a buffer whose
// final size is not yet backed by bytes actually read.
const chunkBytes = 64 << 10

// elemType is an element encoding found in a file.
type elemType struct {
	dtype     tensor.DType // what the elements become in memory
	size      int          // bytes per element in the file: 2, 4 or 8
	bigEndian bool         // file bytes are big-endian
	f64       bool         // file holds float64, rounded to float32 on read
}

// readElems reads count elements of type et from r. If prealloc is true the
// caller has already proved that count elements' worth of bytes exist, and
// the result is allocated once; otherwise the result grows with the bytes
// actually read, so a lying size costs at most what was really delivered.
func readElems(r io.Reader, et elemType, count int64, prealloc bool) (f32 []float32, u16 []uint16, err error) {
	capacity := count
	if !prealloc {
		capacity = min(count, chunkBytes/int64(et.size))
	}
	if et.dtype == tensor.Float32 {
		f32 = make([]float32, 0, capacity)
	} else {
		u16 = make([]uint16, 0, capacity)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if et.bigEndian {
		order = binary.BigEndian
	}
	buf := make([]byte, min(chunkBytes, count*int64(et.size)))
	for left := count * int64(et.size); left > 0; {
		b := buf[:min(int64(len(buf)), left)]
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, nil, err
		}
		left -= int64(len(b))
		switch {
		case et.f64:
			for i := 0; i+8 <= len(b); i += 8 {
				f32 = append(f32, float32(math.Float64frombits(order.Uint64(b[i:]))))
			}
		case et.size == 4:
			for i := 0; i+4 <= len(b); i += 4 {
				f32 = append(f32, math.Float32frombits(order.Uint32(b[i:])))
			}
		default:
			for i := 0; i+2 <= len(b); i += 2 {
				u16 = append(u16, order.Uint16(b[i:]))
			}
		}
	}
	return f32, u16, nil
}

// writeElems writes a's elements to w little-endian, a chunk at a time.
// a must have passed check.
func writeElems(w io.Writer, a *Array) error {
	size := a.DType.Size()
	n := a.Len()
	buf := make([]byte, min(chunkBytes, n*size))
	for i := 0; i < n; {
		m := min(n-i, len(buf)/size)
		b := buf[:m*size]
		if a.DType == tensor.Float32 {
			for j, v := range a.F32[i : i+m] {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v))
			}
		} else {
			for j, v := range a.U16[i : i+m] {
				binary.LittleEndian.PutUint16(b[2*j:], v)
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		i += m
	}
	return nil
}
