package tensorfile

import (
	"archive/zip"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sparseattn/sparseattn/tensor"
)

const npzFormat = "npz"

// maxDeflateRatio bounds how much a deflated member may expand: DEFLATE
// cannot exceed about 1032:1, so a member that declares more than this
// relative to its compressed size is lying.
const maxDeflateRatio = 1040

// npzMember is one .npy member of an .npz archive.
type npzMember struct {
	f    *zip.File
	name string // array name: the member name without ".npy"
	off  int64  // offset of its compressed data in the archive
}

// ReadNpz parses an .npz archive of the given size, as written by
// numpy.savez or numpy.savez_compressed. A member "q.npy" becomes the array
// "q"; members whose names do not end in ".npy" are skipped. Each member is
// read through a limit, its buffers growing with the bytes actually
// decompressed; members whose compressed data overlap are rejected.
func ReadNpz(r io.ReaderAt, size int64) (map[string]*Array, error) {
	if size < 0 {
		return nil, &FormatError{Format: npzFormat, Reason: fmt.Sprintf("negative size %d", size), Err: ErrFormat}
	}
	zr, err := zip.NewReader(boundedReaderAt{r, size}, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // paths are never used to touch the file system
		return nil, readErr(npzFormat, "", "not a readable zip archive", err)
	}
	var members []npzMember
	seen := map[string]bool{}
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, ".npy") || strings.HasSuffix(f.Name, "/") {
			continue
		}
		name := strings.TrimSuffix(f.Name, ".npy")
		if seen[name] {
			return nil, &FormatError{Format: npzFormat, Name: f.Name, Reason: "archive has two members of this name", Err: ErrFormat}
		}
		seen[name] = true
		if f.Method != zip.Store && f.Method != zip.Deflate {
			return nil, &FormatError{Format: npzFormat, Name: f.Name,
				Reason: fmt.Sprintf("compression method %d is not supported (want stored or deflate, as numpy.savez and savez_compressed write)", f.Method),
				Err:    ErrUnsupported}
		}
		off, err := f.DataOffset()
		if err != nil {
			return nil, readErr(npzFormat, f.Name, "reading local header", err)
		}
		if off < 0 || off > size || f.CompressedSize64 > uint64(size-off) {
			return nil, &FormatError{Format: npzFormat, Name: f.Name,
				Reason: fmt.Sprintf("member data [%d, +%d) runs past the %d-byte archive", off, f.CompressedSize64, size), Err: ErrTruncated}
		}
		if f.Method == zip.Store && f.UncompressedSize64 != f.CompressedSize64 {
			return nil, &FormatError{Format: npzFormat, Name: f.Name,
				Reason: fmt.Sprintf("stored member declares %d bytes but holds %d", f.UncompressedSize64, f.CompressedSize64), Err: ErrFormat}
		}
		if f.Method == zip.Deflate && f.UncompressedSize64/maxDeflateRatio > f.CompressedSize64 {
			return nil, &FormatError{Format: npzFormat, Name: f.Name,
				Reason: fmt.Sprintf("declares %d bytes from %d compressed bytes, more than DEFLATE can expand", f.UncompressedSize64, f.CompressedSize64), Err: ErrFormat}
		}
		members = append(members, npzMember{f: f, name: name, off: off})
	}

	// No two members may share compressed bytes (an overlapping zip bomb
	// would otherwise multiply the output of a small archive).
	byOffset := slices.Clone(members)
	slices.SortFunc(byOffset, func(a, b npzMember) int { return cmp.Compare(a.off, b.off) })
	for i := 1; i < len(byOffset); i++ {
		prev, cur := byOffset[i-1], byOffset[i]
		if uint64(cur.off-prev.off) < prev.f.CompressedSize64 {
			return nil, &FormatError{Format: npzFormat, Name: cur.f.Name,
				Reason: fmt.Sprintf("member data overlaps that of %q", prev.f.Name), Err: ErrFormat}
		}
	}

	arrays := make(map[string]*Array, len(members))
	for _, m := range members {
		a, err := readNpzMember(m.f)
		if err != nil {
			return nil, err
		}
		arrays[m.name] = a
	}
	return arrays, nil
}

// boundedReaderAt confines reads to [0, size): the zip layer computes
// offsets from directory fields, and a corrupt archive can make them
// negative or point past the end.
type boundedReaderAt struct {
	r    io.ReaderAt
	size int64
}

// ReadAt reads like io.ReaderAt but rejects offsets outside the file.
func (b boundedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: zip offset %d is negative", ErrFormat, off)
	}
	if off >= b.size {
		return 0, io.EOF
	}
	if rest := b.size - off; int64(len(p)) > rest {
		n, err := b.r.ReadAt(p[:rest], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return b.r.ReadAt(p, off)
}

// readNpzMember decodes one .npy member, trusting none of the sizes in the
// zip directory for allocation.
func readNpzMember(f *zip.File) (*Array, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, readErr(npzFormat, f.Name, "opening member", err)
	}
	defer rc.Close()
	declared := int64(min(f.UncompressedSize64, 1<<62))
	lr := &io.LimitedReader{R: rc, N: declared}
	h, err := readNpyHeader(lr, declared, npzFormat, f.Name)
	if err != nil {
		return nil, err
	}
	if want := h.total + h.dataBytes(); want != declared {
		return nil, &FormatError{Format: npzFormat, Name: f.Name,
			Reason: fmt.Sprintf("member is %d bytes but its .npy header describes %d", declared, want), Err: ErrFormat}
	}
	f32, u16, err := readElems(lr, h.et, h.count, false)
	if err != nil {
		return nil, readErr(npzFormat, f.Name, "reading array data", err)
	}
	// Reading past the end makes the zip layer verify the CRC.
	var one [1]byte
	if n, err := rc.Read(one[:]); n != 0 || !errors.Is(err, io.EOF) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, &FormatError{Format: npzFormat, Name: f.Name, Reason: "member has bytes after the array data", Err: ErrFormat}
		}
		return nil, readErr(npzFormat, f.Name, "finishing member", err)
	}
	return &Array{DType: h.et.dtype, Shape: h.shape, F32: f32, U16: u16}, nil
}

// WriteNpz writes arrays as an .npz archive, one stored (uncompressed)
// member "name.npy" per array, sorted by name, with zero timestamps, so the
// output is deterministic. Every array is validated before anything is
// written; bfloat16 arrays are refused as in WriteNpy.
func WriteNpz(w io.Writer, arrays map[string]*Array) error {
	names := sortedNames(arrays)
	for _, name := range names {
		a := arrays[name]
		if err := a.check(); err != nil {
			return &FormatError{Format: npzFormat, Name: name, Reason: "cannot write array", Err: err}
		}
		if a.DType == tensor.BFloat16 {
			return &FormatError{Format: npzFormat, Name: name,
				Reason: "NumPy has no bfloat16 type; write .safetensors to keep it, or convert to float32", Err: ErrUnsupported}
		}
	}
	zw := zip.NewWriter(w)
	for _, name := range names {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
		if err != nil {
			return &FormatError{Format: npzFormat, Name: name, Reason: "creating member", Err: err}
		}
		if err := WriteNpy(fw, arrays[name]); err != nil {
			return err
		}
	}
	return zw.Close()
}
