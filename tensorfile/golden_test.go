package tensorfile

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

// stFile assembles a safetensors file by hand, following the format
// description: an 8-byte little-endian header length, the JSON header, then
// the data buffer.
func stFile(header string, data ...byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// le32 returns the little-endian bytes of float32 values.
func le32(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// le16 returns the little-endian bytes of 16-bit patterns.
func le16(vs ...uint16) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

func TestSafetensorsGoldenWrite(t *testing.T) {
	arrays := map[string]*Array{
		"b": {DType: tensor.BFloat16, Shape: []int{1, 2}, U16: []uint16{0x3f80, 0xc000}},
		"a": {DType: tensor.Float32, Shape: []int{2}, F32: []float32{1, -2}},
	}
	got := mustSafetensors(t, arrays, map[string]string{"format": "pt"})
	header := `{"__metadata__":{"format":"pt"},` +
		`"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}}`
	header += strings.Repeat(" ", (8-len(header)%8)%8)
	want := stFile(header, slices.Concat(le32(1, -2), le16(0x3f80, 0xc000))...)
	if !bytes.Equal(got, want) {
		t.Fatalf("writer output\n%q\nwant\n%q", got, want)
	}
	if (8+len(header))%8 != 0 {
		t.Fatal("header not padded to 8 bytes")
	}
}

func TestSafetensorsGoldenRead(t *testing.T) {
	// Laid out the way safetensors.torch.save_file does it: spaces in the
	// JSON, tensors not in name order, and F64 and F16 present.
	header := `{"v": {"dtype": "F16", "shape": [3], "data_offsets": [16, 22]}, ` +
		`"k": {"dtype": "F64", "shape": [2, 1], "data_offsets": [0, 16]}, ` +
		`"__metadata__": {"format": "pt", "note": "\u00e9\"x\""}}   `
	var data []byte
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(0.1))
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(-1e300))
	data = append(data, le16(0x3c00, 0x8000, 0x7c00)...)
	arrays, md, err := readST(stFile(header, data...))
	if err != nil {
		t.Fatal(err)
	}
	if md["format"] != "pt" || md["note"] != "é\"x\"" || len(md) != 2 {
		t.Fatalf("metadata %q", md)
	}
	want := map[string]*Array{
		"k": {DType: tensor.Float32, Shape: []int{2, 1}, F32: []float32{float32(0.1), float32(math.Inf(-1))}},
		"v": {DType: tensor.Float16, Shape: []int{3}, U16: []uint16{0x3c00, 0x8000, 0x7c00}},
	}
	sameArrays(t, want, arrays)
}

// npyFile assembles an .npy file by hand: magic, version, little-endian
// header length (2 bytes for 1.0, 4 for 2.0 and 3.0), header, data.
func npyFile(major byte, header string, data []byte) []byte {
	b := []byte("\x93NUMPY")
	b = append(b, major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(header)))
	}
	b = append(b, header...)
	return append(b, data...)
}

func TestNpyGoldenWrite(t *testing.T) {
	a := &Array{DType: tensor.Float32, Shape: []int{2, 3}, F32: []float32{0, 1, 2, 3, 4, 5}}
	got := mustNpy(t, a)
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	header := dict + strings.Repeat(" ", 128-10-len(dict)-1) + "\n"
	want := npyFile(1, header, le32(0, 1, 2, 3, 4, 5))
	if !bytes.Equal(got, want) {
		t.Fatalf("writer output\n%q\nwant\n%q", got, want)
	}
	for _, shape := range [][]int{{}, {5}, {1, 2, 3, 4}, {100000, 3}, slices.Repeat([]int{1}, MaxDims)} {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16} {
			b := mustNpy(t, (&Array{DType: dt, Shape: shape}).fill())
			if !bytes.HasPrefix(b, []byte("\x93NUMPY\x01\x00")) {
				t.Fatalf("%v: header starts %q", shape, b[:8])
			}
			hlen := int(binary.LittleEndian.Uint16(b[8:10]))
			if (10+hlen)%64 != 0 || b[10+hlen-1] != '\n' {
				t.Fatalf("%v: header length %d+10 is not a multiple of 64 ending in a newline", shape, hlen)
			}
		}
	}
	// A header over 64 KiB needs version 2.0 (only reachable with more axes
	// than MaxDims, so the helper is called directly).
	big, err := npyHeaderBytes(&Array{DType: tensor.Float32, Shape: make([]int, 30000)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(big, []byte("\x93NUMPY\x02\x00")) || len(big)%64 != 0 ||
		int(binary.LittleEndian.Uint32(big[8:12]))+12 != len(big) || big[len(big)-1] != '\n' {
		t.Fatalf("version 2.0 header of %d bytes starts %q", len(big), big[:12])
	}
	one := mustNpy(t, &Array{DType: tensor.Float16, Shape: []int{7}, U16: make([]uint16, 7)})
	if !bytes.Contains(one, []byte("'descr': '<f2'")) || !bytes.Contains(one, []byte("'shape': (7,)")) {
		t.Fatalf("1-D float16 header %q", one)
	}
	scalar := mustNpy(t, &Array{DType: tensor.Float32, F32: []float32{1}})
	if !bytes.Contains(scalar, []byte("'shape': ()")) {
		t.Fatalf("scalar header %q", scalar)
	}
}

// fill sizes a test array's element slices to its shape.
func (a *Array) fill() *Array {
	n := a.Len()
	if a.DType == tensor.Float32 {
		a.F32, a.U16 = make([]float32, n), nil
	} else {
		a.F32, a.U16 = nil, make([]uint16, n)
	}
	return a
}

func TestNpyGoldenRead(t *testing.T) {
	f64 := binary.LittleEndian.AppendUint64(nil, math.Float64bits(1.5))
	f64 = binary.LittleEndian.AppendUint64(f64, math.Float64bits(math.Copysign(0, -1)))
	be32 := binary.BigEndian.AppendUint32(nil, math.Float32bits(3.25))
	be32 = binary.BigEndian.AppendUint32(be32, 0x7fc00001)
	be16 := binary.BigEndian.AppendUint16(nil, 0x3c00)
	be64 := binary.BigEndian.AppendUint64(nil, math.Float64bits(1e-40)) // a float32 subnormal
	tests := []struct {
		name string
		file []byte
		want *Array
	}{
		{"v1 16-byte aligned (old numpy)", npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }    \n", le32(1, 2)),
			&Array{DType: tensor.Float32, Shape: []int{2}, F32: []float32{1, 2}}},
		{"v2", npyFile(2, "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2), }\n", le16(0x3c00, 0xfc00)),
			&Array{DType: tensor.Float16, Shape: []int{1, 2}, U16: []uint16{0x3c00, 0xfc00}}},
		{"v3 utf-8", npyFile(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", le32(-7)),
			&Array{DType: tensor.Float32, Shape: []int{}, F32: []float32{-7}}},
		{"f8 rounded", npyFile(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", f64),
			&Array{DType: tensor.Float32, Shape: []int{2}, F32: []float32{1.5, float32(math.Copysign(0, -1))}}},
		{"big-endian f4", npyFile(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", be32),
			&Array{DType: tensor.Float32, Shape: []int{2}, F32: []float32{3.25, math.Float32frombits(0x7fc00001)}}},
		{"big-endian f2", npyFile(1, "{'descr': '>f2', 'fortran_order': False, 'shape': (1,), }\n", be16),
			&Array{DType: tensor.Float16, Shape: []int{1}, U16: []uint16{0x3c00}}},
		{"big-endian f8", npyFile(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }\n", be64),
			&Array{DType: tensor.Float32, Shape: []int{1}, F32: []float32{float32(1e-40)}}},
		{"python 2 style", npyFile(1, "{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"<f4\"}", le32(5, 6)),
			&Array{DType: tensor.Float32, Shape: []int{1, 2}, F32: []float32{5, 6}}},
		{"zero-size", npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }\n", nil),
			&Array{DType: tensor.Float32, Shape: []int{0, 4}, F32: []float32{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readNpy(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !sameArray(tc.want, got) {
				t.Fatalf("got %v %v %v %x, want %v %v %v %x", got.DType, got.Shape, got.F32, got.U16, tc.want.DType, tc.want.Shape, tc.want.F32, tc.want.U16)
			}
		})
	}
}

func TestNpzGoldenRead(t *testing.T) {
	// As numpy.savez_compressed writes it: deflated members; plus a member
	// that is not an array and a directory, which are skipped.
	q := &Array{DType: tensor.Float32, Shape: []int{2, 2}, F32: []float32{1, 2, 3, 4}}
	k := &Array{DType: tensor.Float16, Shape: []int{3}, U16: []uint16{1, 2, 3}}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, m := range []struct {
		name   string
		method uint16
		data   []byte
	}{
		{"q.npy", zip.Deflate, mustNpy(t, q)},
		{"sub/k.npy", zip.Store, mustNpy(t, k)},
		{"README.txt", zip.Deflate, []byte("not an array")},
		{"dir.npy/", zip.Store, nil},
	} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: m.method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(m.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readNpz(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	sameArrays(t, map[string]*Array{"q": q, "sub/k": k}, got)
}
