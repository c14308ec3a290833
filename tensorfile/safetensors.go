package tensorfile

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/sparseattn/sparseattn/tensor"
)

// MaxSafetensorsHeader is the largest safetensors JSON header accepted
// (100 MiB, the limit of the reference implementation).
const MaxSafetensorsHeader = 100 << 20

const (
	stFormat   = "safetensors"
	stMetadata = "__metadata__"
)

// stEntry is one tensor as described by a safetensors header.
type stEntry struct {
	name       string
	dtype      string
	shape      []int
	begin, end uint64
	et         elemType
	count      int64
}

// stDTypes maps the safetensors dtypes this package reads to their element
// encodings.
func stDType(s string) (elemType, bool) {
	switch s {
	case "F32":
		return elemType{dtype: tensor.Float32, size: 4}, true
	case "F16":
		return elemType{dtype: tensor.Float16, size: 2}, true
	case "BF16":
		return elemType{dtype: tensor.BFloat16, size: 2}, true
	case "F64":
		return elemType{dtype: tensor.Float32, size: 8, f64: true}, true
	}
	return elemType{}, false
}

// stName is the safetensors dtype string of a supported DType.
func stName(d tensor.DType) string {
	switch d {
	case tensor.Float32:
		return "F32"
	case tensor.Float16:
		return "F16"
	case tensor.BFloat16:
		return "BF16"
	}
	return ""
}

// ReadSafetensors parses a .safetensors file of the given size. It returns
// the tensors by name and the optional "__metadata__" string map (empty,
// not nil, when absent). F32, F16 and BF16 are read exactly; F64 is rounded
// to float32. The data buffer must be covered exactly by the tensors: holes,
// overlaps and trailing bytes are errors wrapping ErrFormat.
func ReadSafetensors(r io.ReaderAt, size int64) (arrays map[string]*Array, metadata map[string]string, err error) {
	fail := func(name, reason string, sentinel error) (map[string]*Array, map[string]string, error) {
		return nil, nil, &FormatError{Format: stFormat, Name: name, Reason: reason, Err: sentinel}
	}
	if size < 8 {
		return fail("", fmt.Sprintf("file is %d bytes, too short for the 8-byte header length", max(size, 0)), ErrTruncated)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, nil, readErr(stFormat, "", "reading header length", err)
	}
	hlen := binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > MaxSafetensorsHeader {
		return fail("", fmt.Sprintf("header length %d exceeds the %d-byte limit; is this a safetensors file?", hlen, MaxSafetensorsHeader), ErrFormat)
	}
	if hlen > uint64(size-8) {
		return fail("", fmt.Sprintf("header length %d but only %d bytes follow the length field", hlen, size-8), ErrTruncated)
	}
	hdr := make([]byte, hlen)
	if _, err := r.ReadAt(hdr, 8); err != nil && hlen > 0 {
		return nil, nil, readErr(stFormat, "", "reading header", err)
	}
	if len(hdr) == 0 || hdr[0] != '{' {
		return fail("", "header must be a JSON object starting with '{'", ErrFormat)
	}
	if !utf8.Valid(hdr) {
		return fail("", "header is not valid UTF-8", ErrFormat)
	}
	entries, metadata, err := parseSTHeader(hdr)
	if err != nil {
		return nil, nil, err
	}

	dataStart := 8 + int64(hlen)
	dataLen := uint64(size - dataStart)
	for _, e := range entries {
		et, ok := stDType(e.dtype)
		if !ok {
			return fail(e.name, fmt.Sprintf("dtype %q is not supported; use F32, F16 or BF16 (F64 is read as float32)", e.dtype), ErrUnsupported)
		}
		count, err := shapeLen(e.shape)
		if err != nil {
			return fail(e.name, err.Error(), ErrFormat)
		}
		if e.begin > e.end {
			return fail(e.name, fmt.Sprintf("data_offsets [%d, %d] end before they begin", e.begin, e.end), ErrFormat)
		}
		if want := uint64(count) * uint64(et.size); e.end-e.begin != want {
			return fail(e.name, fmt.Sprintf("shape %v of %s needs %d bytes but data_offsets [%d, %d] span %d",
				e.shape, e.dtype, want, e.begin, e.end, e.end-e.begin), ErrFormat)
		}
		if e.end > dataLen {
			return fail(e.name, fmt.Sprintf("data_offsets [%d, %d] run past the %d-byte data buffer (file truncated, or offsets wrong)", e.begin, e.end, dataLen), ErrTruncated)
		}
		e.et, e.count = et, count
	}

	// The tensors must tile the data buffer exactly.
	byOffset := slices.Clone(entries)
	slices.SortFunc(byOffset, func(a, b *stEntry) int {
		if c := cmp.Compare(a.begin, b.begin); c != 0 {
			return c
		}
		return cmp.Compare(a.end, b.end)
	})
	var pos uint64
	prev := ""
	for _, e := range byOffset {
		switch {
		case e.begin < pos:
			return fail(e.name, fmt.Sprintf("data_offsets [%d, %d] overlap tensor %q, which ends at %d", e.begin, e.end, prev, pos), ErrFormat)
		case e.begin > pos:
			return fail(e.name, fmt.Sprintf("data buffer has a hole: bytes [%d, %d) belong to no tensor", pos, e.begin), ErrFormat)
		}
		pos, prev = e.end, e.name
	}
	if pos != dataLen {
		return fail("", fmt.Sprintf("data buffer has %d bytes after the last tensor; the buffer must be covered exactly", dataLen-pos), ErrFormat)
	}

	arrays = make(map[string]*Array, len(entries))
	for _, e := range entries {
		sr := io.NewSectionReader(r, dataStart+int64(e.begin), int64(e.end-e.begin))
		f32, u16, err := readElems(sr, e.et, e.count, true)
		if err != nil {
			return nil, nil, readErr(stFormat, e.name, "reading tensor data", err)
		}
		arrays[e.name] = &Array{DType: e.et.dtype, Shape: e.shape, F32: f32, U16: u16}
	}
	return arrays, metadata, nil
}

// stParser walks a safetensors header token by token, so that duplicate
// names, wrong value types and unknown fields are all caught (a plain
// json.Unmarshal would silently keep the last of two equal keys).
type stParser struct {
	dec  *json.Decoder
	name string // the tensor being parsed, for error messages
}

func (p *stParser) fail(reason string) error {
	return &FormatError{Format: stFormat, Name: p.name, Reason: reason, Err: ErrFormat}
}

func (p *stParser) token() (json.Token, error) {
	t, err := p.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.fail("header JSON ends early")
		}
		return nil, p.fail("header is not valid JSON: " + err.Error())
	}
	return t, nil
}

func (p *stParser) delim(want json.Delim, what string) error {
	t, err := p.token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return p.fail(fmt.Sprintf("%s must start with %q", what, want.String()))
	}
	return nil
}

func (p *stParser) str(what string) (string, error) {
	t, err := p.token()
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", p.fail(what + " must be a JSON string")
	}
	return s, nil
}

// ints parses a JSON array of at most most non-negative or negative
// integers (the sign is checked by the caller).
func (p *stParser) ints(what string, most int, unsigned bool) ([]int, []uint64, error) {
	if err := p.delim('[', what); err != nil {
		return nil, nil, err
	}
	var si []int
	var ui []uint64
	for p.dec.More() {
		if len(si)+len(ui) == most {
			return nil, nil, p.fail(fmt.Sprintf("%s has more than %d entries", what, most))
		}
		t, err := p.token()
		if err != nil {
			return nil, nil, err
		}
		n, ok := t.(json.Number)
		if !ok {
			return nil, nil, p.fail(what + " must hold integers")
		}
		if unsigned {
			v, err := strconv.ParseUint(string(n), 10, 64)
			if err != nil {
				return nil, nil, p.fail(fmt.Sprintf("%s entry %s is not an integer in [0, 2^64)", what, n))
			}
			ui = append(ui, v)
		} else {
			v, err := strconv.Atoi(string(n))
			if err != nil {
				return nil, nil, p.fail(fmt.Sprintf("%s entry %s is not an integer in range", what, n))
			}
			si = append(si, v)
		}
	}
	if err := p.delim(']', what+" end"); err != nil {
		return nil, nil, err
	}
	if si == nil && !unsigned {
		si = []int{}
	}
	return si, ui, nil
}

func parseSTHeader(hdr []byte) ([]*stEntry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	p := &stParser{dec: dec}
	if err := p.delim('{', "header"); err != nil {
		return nil, nil, err
	}
	var entries []*stEntry
	metadata := map[string]string{}
	seen := map[string]bool{}
	for dec.More() {
		p.name = ""
		key, err := p.str("tensor name")
		if err != nil {
			return nil, nil, err
		}
		p.name = key
		if seen[key] {
			return nil, nil, p.fail("name appears twice in the header")
		}
		seen[key] = true
		if key == stMetadata {
			if err := p.metadata(metadata); err != nil {
				return nil, nil, err
			}
			continue
		}
		e, err := p.entry()
		if err != nil {
			return nil, nil, err
		}
		e.name = key
		entries = append(entries, e)
	}
	p.name = ""
	if err := p.delim('}', "header end"); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, p.fail("header has data after the JSON object; only trailing spaces are allowed")
	}
	return entries, metadata, nil
}

func (p *stParser) metadata(m map[string]string) error {
	if err := p.delim('{', stMetadata); err != nil {
		return err
	}
	for p.dec.More() {
		k, err := p.str("metadata key")
		if err != nil {
			return err
		}
		if _, dup := m[k]; dup {
			return p.fail(fmt.Sprintf("metadata key %q appears twice", k))
		}
		v, err := p.str(fmt.Sprintf("metadata value for %q", k))
		if err != nil {
			return err
		}
		m[k] = v
	}
	return p.delim('}', stMetadata+" end")
}

func (p *stParser) entry() (*stEntry, error) {
	if err := p.delim('{', "tensor entry"); err != nil {
		return nil, err
	}
	e := &stEntry{}
	var haveDType, haveShape, haveOffsets bool
	for p.dec.More() {
		k, err := p.str("field name")
		if err != nil {
			return nil, err
		}
		switch k {
		case "dtype":
			if haveDType {
				return nil, p.fail("field \"dtype\" appears twice")
			}
			haveDType = true
			if e.dtype, err = p.str("dtype"); err != nil {
				return nil, err
			}
		case "shape":
			if haveShape {
				return nil, p.fail("field \"shape\" appears twice")
			}
			haveShape = true
			if e.shape, _, err = p.ints("shape", MaxDims, false); err != nil {
				return nil, err
			}
		case "data_offsets":
			if haveOffsets {
				return nil, p.fail("field \"data_offsets\" appears twice")
			}
			haveOffsets = true
			_, off, err := p.ints("data_offsets", 2, true)
			if err != nil {
				return nil, err
			}
			if len(off) != 2 {
				return nil, p.fail("data_offsets must be [begin, end]")
			}
			e.begin, e.end = off[0], off[1]
		default:
			return nil, p.fail(fmt.Sprintf("unknown field %q (want dtype, shape, data_offsets)", k))
		}
	}
	if !haveDType || !haveShape || !haveOffsets {
		return nil, p.fail("tensor entry needs dtype, shape and data_offsets")
	}
	return e, p.delim('}', "tensor entry end")
}

// WriteSafetensors writes arrays and the optional metadata as a
// .safetensors file. The output is deterministic: tensors are sorted by name
// and laid out contiguously in that order, and the header is padded with
// spaces to a multiple of 8 bytes. Names and metadata must be valid UTF-8
// and no tensor may be called "__metadata__".
func WriteSafetensors(w io.Writer, arrays map[string]*Array, metadata map[string]string) error {
	names := sortedNames(arrays)
	var hdr bytes.Buffer
	enc := json.NewEncoder(&hdr)
	enc.SetEscapeHTML(false)
	putString := func(s string) {
		_ = enc.Encode(s) // encoding a string into a bytes.Buffer cannot fail
		hdr.Truncate(hdr.Len() - 1)
	}
	hdr.WriteByte('{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return &FormatError{Format: stFormat, Name: k, Reason: "metadata must be valid UTF-8", Err: ErrUnsupported}
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		putString(stMetadata)
		hdr.WriteString(":{")
		for i, k := range keys {
			if i > 0 {
				hdr.WriteByte(',')
			}
			putString(k)
			hdr.WriteByte(':')
			putString(metadata[k])
		}
		hdr.WriteByte('}')
	}
	var off uint64
	for i, name := range names {
		a := arrays[name]
		if err := a.check(); err != nil {
			return &FormatError{Format: stFormat, Name: name, Reason: "cannot write array", Err: err}
		}
		if name == stMetadata || !utf8.ValidString(name) {
			return &FormatError{Format: stFormat, Name: name, Reason: "tensor names must be valid UTF-8 and not \"__metadata__\"", Err: ErrUnsupported}
		}
		if i > 0 || len(metadata) > 0 {
			hdr.WriteByte(',')
		}
		n := uint64(a.Len()) * uint64(a.DType.Size())
		putString(name)
		hdr.WriteString(`:{"dtype":"` + stName(a.DType) + `","shape":[`)
		for j, d := range a.Shape {
			if j > 0 {
				hdr.WriteByte(',')
			}
			hdr.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&hdr, `],"data_offsets":[%d,%d]}`, off, off+n)
		off += n
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	if hdr.Len() > MaxSafetensorsHeader {
		return &FormatError{Format: stFormat, Reason: fmt.Sprintf("header would be %d bytes, over the %d-byte limit", hdr.Len(), MaxSafetensorsHeader), Err: ErrUnsupported}
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	for _, name := range names {
		if err := writeElems(w, arrays[name]); err != nil {
			return err
		}
	}
	return nil
}
