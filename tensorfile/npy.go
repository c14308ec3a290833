package tensorfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sparseattn/sparseattn/tensor"
)

// MaxNpyHeader is the largest .npy header accepted (1 MiB). NumPy itself
// writes headers of a few hundred bytes.
const MaxNpyHeader = 1 << 20

const (
	npyFormat = "npy"
	npyMagic  = "\x93NUMPY"
	npyAlign  = 64 // NumPy aligns the start of the data to 64 bytes
)

// npyHeader is a parsed .npy header.
type npyHeader struct {
	et    elemType
	shape []int
	count int64 // number of elements
	total int64 // bytes before the data: magic, version, length and header
}

// dataBytes is the size of the array data that follows the header.
func (h *npyHeader) dataBytes() int64 { return h.count * int64(h.et.size) }

// npyDescr maps the NumPy type strings this package reads to element
// encodings.
func npyDescr(format, name, descr string) (elemType, error) {
	switch descr {
	case "<f4":
		return elemType{dtype: tensor.Float32, size: 4}, nil
	case ">f4":
		return elemType{dtype: tensor.Float32, size: 4, bigEndian: true}, nil
	case "<f2":
		return elemType{dtype: tensor.Float16, size: 2}, nil
	case ">f2":
		return elemType{dtype: tensor.Float16, size: 2, bigEndian: true}, nil
	case "<f8":
		return elemType{dtype: tensor.Float32, size: 8, f64: true}, nil
	case ">f8":
		return elemType{dtype: tensor.Float32, size: 8, f64: true, bigEndian: true}, nil
	case "|V2", "<V2", ">V2":
		return elemType{}, &FormatError{Format: format, Name: name,
			Reason: fmt.Sprintf("descr %q is an opaque 2-byte type, not necessarily bfloat16 (NumPy has no bfloat16); save bfloat16 with safetensors or convert to float32", descr),
			Err:    ErrUnsupported}
	}
	return elemType{}, &FormatError{Format: format, Name: name,
		Reason: fmt.Sprintf("descr %q is not supported; save float32 ('<f4'), float16 ('<f2') or float64 ('<f8', read as float32)", descr),
		Err:    ErrUnsupported}
}

// readNpyHeader reads and validates the magic, version and header of an
// .npy stream. avail is the number of bytes the stream can hold at most; a
// header longer than that is reported as truncation before it is allocated.
func readNpyHeader(r io.Reader, avail int64, format, name string) (*npyHeader, error) {
	fail := func(reason string, sentinel error) (*npyHeader, error) {
		return nil, &FormatError{Format: format, Name: name, Reason: reason, Err: sentinel}
	}
	var pre [12]byte
	n, err := io.ReadFull(r, pre[:8])
	if !strings.HasPrefix(npyMagic, string(pre[:min(n, len(npyMagic))])) {
		return fail("missing the \\x93NUMPY magic; not an .npy file", ErrFormat)
	}
	if err != nil {
		return nil, readErr(format, name, "reading .npy magic", err)
	}
	major, minor := pre[6], pre[7]
	var hlen int64
	var prefix int64
	switch {
	case major == 1 && minor == 0:
		prefix = 10
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, readErr(format, name, "reading header length", err)
		}
		hlen = int64(binary.LittleEndian.Uint16(pre[8:10]))
	case (major == 2 || major == 3) && minor == 0:
		prefix = 12
		if _, err := io.ReadFull(r, pre[8:12]); err != nil {
			return nil, readErr(format, name, "reading header length", err)
		}
		hlen = int64(binary.LittleEndian.Uint32(pre[8:12]))
	default:
		return fail(fmt.Sprintf("format version %d.%d is not supported (want 1.0, 2.0 or 3.0)", major, minor), ErrUnsupported)
	}
	if hlen > MaxNpyHeader {
		return fail(fmt.Sprintf("header length %d exceeds the %d-byte limit", hlen, MaxNpyHeader), ErrFormat)
	}
	if prefix+hlen > avail {
		return fail(fmt.Sprintf("header length %d but only %d bytes follow", hlen, max(avail-prefix, 0)), ErrTruncated)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, readErr(format, name, "reading header", err)
	}
	dict := parsePyDict(hdr)
	if dict.err != "" {
		return fail(dict.err, ErrFormat)
	}
	if dict.structured {
		return fail("descr is a list (a structured dtype); save a plain float array", ErrUnsupported)
	}
	et, err := npyDescr(format, name, dict.descr)
	if err != nil {
		return nil, err
	}
	if dict.fortran {
		return fail("array is in Fortran order; save np.ascontiguousarray(x) instead", ErrUnsupported)
	}
	count, err := shapeLen(dict.shape)
	if err != nil {
		return fail(err.Error(), ErrFormat)
	}
	return &npyHeader{et: et, shape: dict.shape, count: count, total: prefix + hlen}, nil
}

// ReadNpy parses an .npy file of the given size (format versions 1.0, 2.0
// and 3.0). '<f4' and '<f2' are read exactly and '<f8' is rounded to
// float32; the big-endian forms are byte-swapped. The file must end where
// the array data ends.
func ReadNpy(r io.ReaderAt, size int64) (*Array, error) {
	sr := io.NewSectionReader(r, 0, max(size, 0))
	h, err := readNpyHeader(sr, size, npyFormat, "")
	if err != nil {
		return nil, err
	}
	want, have := h.dataBytes(), size-h.total
	switch {
	case have < want:
		return nil, &FormatError{Format: npyFormat, Reason: fmt.Sprintf("shape %v needs %d data bytes but the file holds %d", h.shape, want, have), Err: ErrTruncated}
	case have > want:
		return nil, &FormatError{Format: npyFormat, Reason: fmt.Sprintf("file has %d bytes after the %d data bytes of shape %v", have-want, want, h.shape), Err: ErrFormat}
	}
	f32, u16, err := readElems(sr, h.et, h.count, true)
	if err != nil {
		return nil, readErr(npyFormat, "", "reading array data", err)
	}
	return &Array{DType: h.et.dtype, Shape: h.shape, F32: f32, U16: u16}, nil
}

// npyHeaderBytes renders the magic, version, length and header of an .npy
// file for a, padded with spaces and a newline so the data starts at a
// multiple of 64 bytes. It uses version 1.0 unless the header needs more
// than 65535 bytes.
func npyHeaderBytes(a *Array) ([]byte, error) {
	var descr string
	switch a.DType {
	case tensor.Float32:
		descr = "<f4"
	case tensor.Float16:
		descr = "<f2"
	default:
		return nil, &FormatError{Format: npyFormat,
			Reason: fmt.Sprintf("NumPy has no %v type; write .safetensors to keep it, or convert to float32", a.DType),
			Err:    ErrUnsupported}
	}
	var d strings.Builder
	d.WriteString("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (")
	for i, n := range a.Shape {
		if i > 0 {
			d.WriteString(", ")
		}
		d.WriteString(strconv.Itoa(n))
	}
	if len(a.Shape) == 1 {
		d.WriteByte(',')
	}
	d.WriteString("), }")
	dict := d.String()

	prefix := 10
	if len(dict)+1+npyAlign > 0xffff {
		prefix = 12
	}
	pad := (npyAlign - (prefix+len(dict)+1)%npyAlign) % npyAlign
	hlen := len(dict) + pad + 1
	var b bytes.Buffer
	b.Grow(prefix + hlen)
	b.WriteString(npyMagic)
	if prefix == 10 {
		b.Write([]byte{1, 0, byte(hlen), byte(hlen >> 8)})
	} else {
		b.Write([]byte{2, 0})
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(hlen)))
	}
	b.WriteString(dict)
	b.WriteString(strings.Repeat(" ", pad))
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// WriteNpy writes a as an .npy file: version 1.0, little-endian, C order.
// bfloat16 arrays are refused with ErrUnsupported since NumPy has no such
// type; write them with WriteSafetensors or convert them to float32.
func WriteNpy(w io.Writer, a *Array) error {
	if err := a.check(); err != nil {
		return &FormatError{Format: npyFormat, Reason: "cannot write array", Err: err}
	}
	hdr, err := npyHeaderBytes(a)
	if err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	return writeElems(w, a)
}

// pyDict is what parsePyDict extracts from an .npy header.
type pyDict struct {
	descr      string
	structured bool // descr was a list
	fortran    bool
	shape      []int
	err        string // why the header is malformed, if it is
}

// parsePyDict parses the Python dict literal of an .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }. Only the
// subset NumPy writes is accepted: string keys, and string, boolean or
// integer-tuple values; the keys must be exactly descr, fortran_order and
// shape. Malformed headers are reported in pyDict.err; a structured dtype
// (descr given as a list) stops the parse with pyDict.structured set.
func parsePyDict(src []byte) pyDict {
	p := pyParser{src: src}
	var d pyDict
	bad := func(format string, args ...any) pyDict {
		return pyDict{err: "header is not a valid NumPy header dict: " + fmt.Sprintf(format, args...)}
	}
	if !p.eat('{') {
		return bad("it must start with '{'")
	}
	seen := map[string]bool{}
	for {
		if p.eat('}') {
			break
		}
		key, ok := p.str()
		if !ok {
			return bad("expected a quoted key at byte %d", p.pos)
		}
		if seen[key] {
			return bad("key %q appears twice", key)
		}
		seen[key] = true
		if !p.eat(':') {
			return bad("expected ':' after key %q", key)
		}
		switch key {
		case "descr":
			if p.peek() == '[' {
				d.structured = true
				return d
			}
			if d.descr, ok = p.str(); !ok {
				return bad("descr must be a quoted type string such as '<f4'")
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				d.fortran = true
			case p.word("False"):
				d.fortran = false
			default:
				return bad("fortran_order must be True or False")
			}
		case "shape":
			var msg string
			if d.shape, msg = p.tuple(); msg != "" {
				return bad("shape %s", msg)
			}
		default:
			return bad("unexpected key %q (want descr, fortran_order, shape)", key)
		}
		if p.eat('}') {
			break
		}
		if !p.eat(',') {
			return bad("expected ',' or '}' at byte %d", p.pos)
		}
	}
	p.space()
	if p.pos != len(p.src) {
		return bad("unexpected data after the dict at byte %d", p.pos)
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return bad("key %q is missing", k)
		}
	}
	return d
}

// pyParser is a cursor over a Python literal.
type pyParser struct {
	src []byte
	pos int
}

func (p *pyParser) space() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r', '\f':
			p.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *pyParser) peek() byte {
	p.space()
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// eat consumes c if it is the next non-space byte.
func (p *pyParser) eat(c byte) bool {
	if p.peek() == c && c != 0 {
		p.pos++
		return true
	}
	return false
}

// word consumes the identifier w if it comes next as a whole word.
func (p *pyParser) word(w string) bool {
	p.space()
	rest := p.src[p.pos:]
	if !bytes.HasPrefix(rest, []byte(w)) {
		return false
	}
	if len(rest) > len(w) && isIdent(rest[len(w)]) {
		return false
	}
	p.pos += len(w)
	return true
}

func isIdent(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// str consumes a single- or double-quoted string without escapes.
func (p *pyParser) str() (string, bool) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", false
	}
	end := bytes.IndexByte(p.src[p.pos+1:], q)
	if end < 0 {
		return "", false
	}
	s := p.src[p.pos+1 : p.pos+1+end]
	if bytes.ContainsAny(s, "\\\n\r") {
		return "", false
	}
	p.pos += end + 2
	return string(s), true
}

// tuple consumes a tuple of non-negative integers: (), (n,) or (n, m, ...)
// with an optional trailing comma. Python 2's long suffix 'L' is accepted.
func (p *pyParser) tuple() ([]int, string) {
	if !p.eat('(') {
		return nil, "must be a tuple such as (2, 3)"
	}
	shape := []int{}
	for {
		if p.eat(')') { // () or a trailing comma
			return shape, ""
		}
		if len(shape) == MaxDims {
			return nil, fmt.Sprintf("has more than %d axes", MaxDims)
		}
		p.space()
		start := p.pos
		if p.pos < len(p.src) && p.src[p.pos] == '-' {
			p.pos++
		}
		for p.pos < len(p.src) && '0' <= p.src[p.pos] && p.src[p.pos] <= '9' {
			p.pos++
		}
		lit := string(p.src[start:p.pos])
		if p.pos < len(p.src) && p.src[p.pos] == 'L' {
			p.pos++
		}
		n, err := strconv.Atoi(lit)
		if err != nil {
			return nil, fmt.Sprintf("entry %q is not an integer", lit)
		}
		if n < 0 {
			return nil, fmt.Sprintf("entry %d is negative", n)
		}
		if len(lit) > 1 && lit[0] == '0' {
			return nil, fmt.Sprintf("entry %q has a leading zero", lit)
		}
		shape = append(shape, n)
		if p.eat(')') {
			if len(shape) == 1 {
				return nil, "(n) is not a tuple; write (n,)"
			}
			return shape, ""
		}
		if !p.eat(',') {
			return nil, fmt.Sprintf("expected ',' or ')' at byte %d", p.pos)
		}
	}
}
