package tensorfile

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

// hostileCase is a malformed file and the sentinel its error must wrap;
// want, if set, must appear in the message.
type hostileCase struct {
	name     string
	file     []byte
	sentinel error
	want     string
}

func checkHostile(t *testing.T, tc hostileCase, read func([]byte) error) {
	t.Helper()
	t.Run(tc.name, func(t *testing.T) {
		err := read(tc.file)
		if !errors.Is(err, tc.sentinel) {
			t.Fatalf("got error %v, want one wrapping %v", err, tc.sentinel)
		}
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v is not a *FormatError", err)
		}
		if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("error %q does not mention %q", err, tc.want)
		}
	})
}

func TestSafetensorsHostile(t *testing.T) {
	f32x2 := le32(1, 2)
	entry := func(name, dtype, shape, offsets string) string {
		return fmt.Sprintf(`%q:{"dtype":%q,"shape":%s,"data_offsets":%s}`, name, dtype, shape, offsets)
	}
	one := func(dtype, shape, offsets string) string { return "{" + entry("a", dtype, shape, offsets) + "}" }
	hugeLen := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	cases := []hostileCase{
		{"empty", nil, ErrTruncated, "too short"},
		{"7 bytes", []byte{1, 2, 3, 4, 5, 6, 7}, ErrTruncated, ""},
		{"header length 2^63", append(hugeLen(1<<63), "{}"...), ErrFormat, "limit"},
		{"header length 2^64-1", append(hugeLen(1<<64-1), "{}"...), ErrFormat, "limit"},
		{"header length just over the cap", append(hugeLen(MaxSafetensorsHeader+1), "{}"...), ErrFormat, "limit"},
		{"header larger than file", append(hugeLen(1000), `{"a":1}`...), ErrTruncated, "only 7 bytes"},
		{"zero header", stFile(""), ErrFormat, ""},
		{"not JSON", stFile("hello world"), ErrFormat, ""},
		{"JSON array", stFile("[1,2]"), ErrFormat, ""},
		{"leading space", stFile(" {}"), ErrFormat, "'{'"},
		{"unterminated", stFile(`{"a":{"dtype":"F32"`), ErrFormat, ""},
		{"invalid UTF-8", stFile("{\"\xff\":1}"), ErrFormat, "UTF-8"},
		{"trailing garbage", stFile(one("F32", "[2]", "[0,8]")+"x", f32x2...), ErrFormat, "after the JSON"},
		{"two objects", stFile(one("F32", "[2]", "[0,8]")+"{}", f32x2...), ErrFormat, ""},
		{"entry not an object", stFile(`{"a":5}`), ErrFormat, ""},
		{"unknown dtype I64", stFile(one("I64", "[1]", "[0,8]"), f32x2...), ErrUnsupported, `"I64"`},
		{"unknown dtype F8", stFile(one("F8_E4M3", "[8]", "[0,8]"), f32x2...), ErrUnsupported, "F32, F16 or BF16"},
		{"dtype not a string", stFile(`{"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}`, f32x2...), ErrFormat, ""},
		{"negative dim", stFile(one("F32", "[-2]", "[0,8]"), f32x2...), ErrFormat, "negative"},
		{"negative dim with zero", stFile(one("F32", "[0,-2]", "[0,0]")), ErrFormat, "negative"},
		{"overflowing dims", stFile(one("F32", "[4294967296,4294967296,4]", "[0,8]"), f32x2...), ErrFormat, "2^40"},
		{"overflow hidden by zero", stFile(one("F32", "[0,4294967296,4294967296]", "[0,0]")), ErrFormat, "2^40"},
		{"dim beyond int64", stFile(one("F32", "[99999999999999999999]", "[0,8]"), f32x2...), ErrFormat, "not an integer"},
		{"fractional dim", stFile(one("F32", "[2.5]", "[0,8]"), f32x2...), ErrFormat, "not an integer"},
		{"exponent dim", stFile(one("F32", "[2e0]", "[0,8]"), f32x2...), ErrFormat, ""},
		{"string dim", stFile(one("F32", `["2"]`, "[0,8]"), f32x2...), ErrFormat, "integers"},
		{"too many dims", stFile(one("F32", "["+strings.Repeat("1,", MaxDims)+"1]", "[0,4]"), f32x2[:4]...), ErrFormat, "more than 64"},
		{"shape disagrees with data", stFile(one("F32", "[3]", "[0,8]"), f32x2...), ErrFormat, "needs 12 bytes"},
		{"F16 size disagrees", stFile(one("F16", "[2]", "[0,8]"), f32x2...), ErrFormat, "needs 4 bytes"},
		{"offsets past end", stFile(one("F32", "[4]", "[0,16]"), f32x2...), ErrTruncated, "run past"},
		{"offsets near 2^64", stFile(one("F32", "[1]", "[18446744073709551612,18446744073709551615]"), f32x2...), ErrFormat, "needs 4 bytes"},
		{"offsets far past end", stFile(one("F32", "[1]", "[18446744073709551611,18446744073709551615]"), f32x2...), ErrTruncated, "run past"},
		{"offsets reversed", stFile(one("F32", "[0]", "[8,0]"), f32x2...), ErrFormat, "end before"},
		{"negative offset", stFile(one("F32", "[2]", "[-8,0]"), f32x2...), ErrFormat, ""},
		{"three offsets", stFile(one("F32", "[2]", "[0,4,8]"), f32x2...), ErrFormat, "more than 2"},
		{"one offset", stFile(one("F32", "[2]", "[8]"), f32x2...), ErrFormat, "[begin, end]"},
		{"overlap", stFile("{"+entry("a", "F32", "[2]", "[0,8]")+","+entry("b", "F32", "[1]", "[4,8]")+"}", f32x2...), ErrFormat, "overlap"},
		{"same region twice", stFile("{"+entry("a", "F32", "[2]", "[0,8]")+","+entry("b", "F32", "[2]", "[0,8]")+"}", f32x2...), ErrFormat, "overlap"},
		{"empty tensor inside another", stFile("{"+entry("a", "F32", "[2]", "[0,8]")+","+entry("b", "F32", "[0]", "[4,4]")+"}", f32x2...), ErrFormat, "overlap"},
		{"hole between", stFile("{"+entry("a", "F32", "[1]", "[0,4]")+","+entry("b", "F32", "[1]", "[8,12]")+"}", le32(1, 2, 3)...), ErrFormat, "hole"},
		{"hole at start", stFile(one("F32", "[1]", "[4,8]"), f32x2...), ErrFormat, "hole"},
		{"extra bytes at end", stFile(one("F32", "[1]", "[0,4]"), f32x2...), ErrFormat, "after the last tensor"},
		{"duplicate names", stFile("{"+entry("a", "F32", "[1]", "[0,4]")+","+entry("a", "F32", "[1]", "[4,8]")+"}", f32x2...), ErrFormat, "twice"},
		{"duplicate field", stFile(`{"a":{"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]}}`, f32x2...), ErrFormat, "twice"},
		{"unknown field", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}}`, f32x2...), ErrFormat, "unknown field"},
		{"missing field", stFile(`{"a":{"dtype":"F32","shape":[2]}}`, f32x2...), ErrFormat, "needs dtype"},
		{"duplicate metadata", stFile(`{"__metadata__":{},"__metadata__":{}}`), ErrFormat, "twice"},
		{"duplicate metadata key", stFile(`{"__metadata__":{"k":"1","k":"2"}}`), ErrFormat, "twice"},
		{"metadata value not a string", stFile(`{"__metadata__":{"k":1}}`), ErrFormat, "string"},
		{"metadata not an object", stFile(`{"__metadata__":"x"}`), ErrFormat, ""},
	}
	for _, tc := range cases {
		checkHostile(t, tc, func(b []byte) error { _, _, err := readST(b); return err })
	}
}

func TestSafetensorsTruncatedAnywhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	file := mustSafetensors(t, map[string]*Array{
		"q": randomArray(rng, tensor.Float16, 2, 3),
		"k": randomArray(rng, tensor.Float32, 3),
	}, map[string]string{"m": "v"})
	for n := range len(file) {
		_, _, err := readST(file[:n])
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("file cut to %d of %d bytes: got %v, want ErrTruncated", n, len(file), err)
		}
	}
}

func TestNpyHostile(t *testing.T) {
	hdr := func(descr, fortran, shape string) string {
		return fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }\n", descr, fortran, shape)
	}
	f32x2 := le32(1, 2)
	cases := []hostileCase{
		{"empty", nil, ErrTruncated, ""},
		{"bad magic", []byte("PK\x03\x04 not numpy at all"), ErrFormat, "magic"},
		{"short bad magic", []byte("\x93NUMPx"), ErrFormat, "magic"},
		{"version 4.0", npyFile(4, hdr("<f4", "False", "(2,)"), f32x2), ErrUnsupported, "version 4.0"},
		{"version 1.1", append([]byte("\x93NUMPY\x01\x01"), 0, 0), ErrUnsupported, "version 1.1"},
		{"header longer than file", append([]byte("\x93NUMPY\x01\x00\xff\xff"), "{}"...), ErrTruncated, ""},
		{"v2 header length 2^32-1", append([]byte("\x93NUMPY\x02\x00\xff\xff\xff\xff"), "{}"...), ErrFormat, "limit"},
		{"v3 header just over the cap", npyFile(3, strings.Repeat(" ", MaxNpyHeader+1), nil), ErrFormat, "limit"},
		{"not a dict", npyFile(1, "hello", f32x2), ErrFormat, "start with '{'"},
		{"JSON not Python", npyFile(1, `{"descr": "<f4", "fortran_order": false, "shape": [2]}`, f32x2), ErrFormat, "True or False"},
		{"missing key", npyFile(1, "{'descr': '<f4', 'shape': (2,)}", f32x2), ErrFormat, "missing"},
		{"extra key", npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", f32x2), ErrFormat, "unexpected key"},
		{"duplicate key", npyFile(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", f32x2), ErrFormat, "twice"},
		{"unterminated string", npyFile(1, "{'descr: '<f4'", f32x2), ErrFormat, ""},
		{"escaped string", npyFile(1, "{'des\\cr': '<f4', 'fortran_order': False, 'shape': (2,)}", f32x2), ErrFormat, ""},
		{"missing close", npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", f32x2), ErrFormat, ""},
		{"trailing data", npyFile(1, hdr("<f4", "False", "(2,)")+"x", f32x2), ErrFormat, "after the dict"},
		{"(n) is not a tuple", npyFile(1, hdr("<f4", "False", "(2)"), f32x2), ErrFormat, "not a tuple"},
		{"shape as list", npyFile(1, hdr("<f4", "False", "[2]"), f32x2), ErrFormat, "tuple"},
		{"negative dim", npyFile(1, hdr("<f4", "False", "(-2,)"), f32x2), ErrFormat, "negative"},
		{"huge dim", npyFile(1, hdr("<f4", "False", "(99999999999999999999,)"), f32x2), ErrFormat, "not an integer"},
		{"empty dim", npyFile(1, hdr("<f4", "False", "(,)"), f32x2), ErrFormat, "not an integer"},
		{"leading zero", npyFile(1, hdr("<f4", "False", "(02,)"), f32x2), ErrFormat, "leading zero"},
		{"nested tuple", npyFile(1, hdr("<f4", "False", "((2,),)"), f32x2), ErrFormat, ""},
		{"overflowing dims", npyFile(1, hdr("<f4", "False", "(4294967296, 4294967296, 4)"), f32x2), ErrFormat, "2^40"},
		{"overflow hidden by zero", npyFile(1, hdr("<f4", "False", "(0, 4294967296, 4294967296)"), nil), ErrFormat, "2^40"},
		{"too many dims", npyFile(1, hdr("<f4", "False", "("+strings.Repeat("1, ", MaxDims+1)+")"), le32(1)), ErrFormat, "more than 64"},
		{"int dtype", npyFile(1, hdr("<i4", "False", "(2,)"), f32x2), ErrUnsupported, `"<i4"`},
		{"native-order dtype", npyFile(1, hdr("=f4", "False", "(2,)"), f32x2), ErrUnsupported, "'<f4'"},
		{"bfloat16 from ml_dtypes", npyFile(1, hdr("|V2", "False", "(4,)"), f32x2), ErrUnsupported, "bfloat16"},
		{"<V2", npyFile(1, hdr("<V2", "False", "(4,)"), f32x2), ErrUnsupported, "safetensors"},
		{"structured", npyFile(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", f32x2), ErrUnsupported, "structured"},
		{"fortran order", npyFile(1, hdr("<f4", "True", "(1, 2)"), f32x2), ErrUnsupported, "np.ascontiguousarray"},
		{"fortran_order not bool", npyFile(1, hdr("<f4", "0", "(2,)"), f32x2), ErrFormat, "True or False"},
		{"data too short", npyFile(1, hdr("<f4", "False", "(3,)"), f32x2), ErrTruncated, "needs 12"},
		{"data far too short", npyFile(1, hdr("<f4", "False", "(1099511627776,)"), f32x2), ErrTruncated, ""},
		{"data too long", npyFile(1, hdr("<f4", "False", "(1,)"), f32x2), ErrFormat, "after the"},
	}
	for _, tc := range cases {
		checkHostile(t, tc, func(b []byte) error { _, err := readNpy(b); return err })
	}
}

func TestNpyTruncatedAnywhere(t *testing.T) {
	file := mustNpy(t, randomArray(rand.New(rand.NewPCG(9, 10)), tensor.Float32, 3, 4))
	for n := range len(file) {
		if _, err := readNpy(file[:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("file cut to %d of %d bytes: got %v, want ErrTruncated", n, len(file), err)
		}
	}
}

// rawMember is one member of a zip archive assembled byte by byte, so that
// its declared sizes, CRC and offsets can lie.
type rawMember struct {
	name   string
	method uint16
	data   []byte // the bytes stored (compressed if method is deflate)
	crc    uint32
	usize  uint64 // declared uncompressed size
	shares int    // 1+index of an earlier member whose local header and data this entry reuses; 0 for none
}

// storedMember is a truthful stored member.
func storedMember(name string, data []byte) rawMember {
	return rawMember{name: name, method: 0, data: data, crc: crc32.ChecksumIEEE(data), usize: uint64(len(data))}
}

// deflatedMember is a truthful deflated member.
func deflatedMember(name string, data []byte) rawMember {
	return rawMember{name: name, method: 8, data: deflate(data), crc: crc32.ChecksumIEEE(data), usize: uint64(len(data))}
}

func deflate(data []byte) []byte {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// rawZip assembles a zip archive: local headers with data, the central
// directory, and the end-of-central-directory record.
func rawZip(members ...rawMember) []byte {
	le := binary.LittleEndian
	var out []byte
	offsets := make([]uint32, len(members))
	for i, m := range members {
		if m.shares > 0 {
			offsets[i] = offsets[m.shares-1]
			continue
		}
		offsets[i] = uint32(len(out))
		out = le.AppendUint32(out, 0x04034b50)
		out = le.AppendUint16(out, 20)
		out = le.AppendUint16(out, 0)
		out = le.AppendUint16(out, m.method)
		out = le.AppendUint32(out, 0) // time, date
		out = le.AppendUint32(out, m.crc)
		out = le.AppendUint32(out, uint32(len(m.data)))
		out = le.AppendUint32(out, uint32(m.usize))
		out = le.AppendUint16(out, uint16(len(m.name)))
		out = le.AppendUint16(out, 0)
		out = append(out, m.name...)
		out = append(out, m.data...)
	}
	cd := len(out)
	for i, m := range members {
		if m.shares > 0 {
			s := members[m.shares-1]
			m.data, m.crc, m.usize, m.method = s.data, s.crc, s.usize, s.method
		}
		out = le.AppendUint32(out, 0x02014b50)
		out = le.AppendUint16(out, 20)
		out = le.AppendUint16(out, 20)
		out = le.AppendUint16(out, 0)
		out = le.AppendUint16(out, m.method)
		out = le.AppendUint32(out, 0)
		out = le.AppendUint32(out, m.crc)
		out = le.AppendUint32(out, uint32(len(m.data)))
		out = le.AppendUint32(out, uint32(m.usize))
		out = le.AppendUint16(out, uint16(len(m.name)))
		out = append(out, make([]byte, 12)...) // extra, comment, disk, attributes
		out = le.AppendUint32(out, offsets[i])
		out = append(out, m.name...)
	}
	end := len(out)
	out = le.AppendUint32(out, 0x06054b50)
	out = le.AppendUint32(out, 0)
	out = le.AppendUint16(out, uint16(len(members)))
	out = le.AppendUint16(out, uint16(len(members)))
	out = le.AppendUint32(out, uint32(end-cd))
	out = le.AppendUint32(out, uint32(cd))
	return le.AppendUint16(out, 0)
}

func TestRawZipIsValid(t *testing.T) {
	q := mustNpy(t, &Array{DType: tensor.Float32, Shape: []int{2}, F32: []float32{1, 2}})
	got, err := readNpz(rawZip(storedMember("q.npy", q), deflatedMember("k.npy", q)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["q"].F32[1] != 2 || got["k"].F32[0] != 1 {
		t.Fatalf("got %v", got)
	}
}

func TestNpzHostile(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	q := mustNpy(t, randomArray(rng, tensor.Float32, 4, 8))
	lie := func(m rawMember, f func(*rawMember)) rawMember { f(&m); return m }
	badNpy := []byte("\x93NUMPY\x01\x00\x06\x00{'x':}")
	cases := []hostileCase{
		{"not a zip", []byte("hello, this is not a zip archive at all"), ErrFormat, ""},
		{"empty", nil, ErrFormat, ""},
		{"stored size lies", rawZip(lie(storedMember("q.npy", q), func(m *rawMember) { m.usize = 1 << 30 })), ErrFormat, "declares"},
		{"deflate size beyond ratio", rawZip(lie(deflatedMember("q.npy", q), func(m *rawMember) { m.usize = 1 << 31 })), ErrFormat, "more than DEFLATE"},
		{"deflate size larger than content", rawZip(lie(deflatedMember("q.npy", q), func(m *rawMember) { m.usize += 4 })), ErrFormat, "describes"},
		{"deflate size smaller than content", rawZip(lie(deflatedMember("q.npy", q), func(m *rawMember) { m.usize -= 4 })), ErrFormat, "describes"},
		{"trailing bytes in member", rawZip(deflatedMember("q.npy", append(bytes.Clone(q), 0, 0, 0, 0))), ErrFormat, "describes"},
		{"bad CRC", rawZip(lie(storedMember("q.npy", q), func(m *rawMember) { m.crc ^= 1 })), ErrFormat, "checksum"},
		{"corrupt deflate", rawZip(lie(deflatedMember("q.npy", q), func(m *rawMember) { m.data = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} })), ErrFormat, ""},
		{"unknown method", rawZip(lie(storedMember("q.npy", q), func(m *rawMember) { m.method = 12 })), ErrUnsupported, "method 12"},
		{"duplicate names", rawZip(storedMember("q.npy", q), storedMember("q.npy", q)), ErrFormat, "two members"},
		{"overlapping members", rawZip(storedMember("q.npy", q), rawMember{name: "k.npy", shares: 1}), ErrFormat, "overlaps"},
		{"bad npy member", rawZip(storedMember("q.npy", badNpy)), ErrFormat, `npz: "q.npy"`},
		{"npy member truncated by its header", rawZip(storedMember("q.npy", q[:len(q)-4])), ErrFormat, "describes"},
		{"unsupported npy member", rawZip(storedMember("q.npy", npyFile(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,)}", make([]byte, 8)))), ErrUnsupported, "<i8"},
	}
	for _, tc := range cases {
		checkHostile(t, tc, func(b []byte) error { _, err := readNpz(b); return err })
	}
}

func TestNpzTruncatedAnywhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	file := mustNpz(t, map[string]*Array{"q": randomArray(rng, tensor.Float32, 3, 4), "k": randomArray(rng, tensor.Float16, 5)})
	// The zip directory is at the end of the archive, so a cut-off .npz
	// usually reads as "not a zip archive" (ErrFormat) rather than
	// ErrTruncated; either is a typed error.
	for n := range len(file) {
		if _, err := readNpz(file[:n]); !typedErr(err) {
			t.Fatalf("file cut to %d of %d bytes: got %v, want a typed error", n, len(file), err)
		}
	}
}

// allocated returns the bytes allocated while f runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHostileSizesAllocateLittle(t *testing.T) {
	// Each file claims a 1 GiB tensor but holds about 1 MiB.
	const claimed = 1 << 28 // float32 elements
	filler := make([]byte, 1<<20)
	for i := range filler {
		filler[i] = byte(rand.Uint32())
	}
	st := stFile(fmt.Sprintf(`{"a":{"dtype":"F32","shape":[%d],"data_offsets":[0,%d]}}`, claimed, 4*claimed), filler...)
	npyHdr := npyFile(1, fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }\n", claimed), nil)
	npy := append(bytes.Clone(npyHdr), filler...)
	// A deflated member that declares the full size (plausible for its
	// compressed size) but whose stream ends after 1 MiB.
	member := append(bytes.Clone(npyHdr), filler...)
	npz := rawZip(rawMember{name: "q.npy", method: 8, data: deflate(member), usize: uint64(len(npyHdr)) + 4*claimed})

	for _, tc := range []struct {
		name     string
		read     func() error
		sentinel error
	}{
		{"safetensors", func() error { _, _, err := readST(st); return err }, ErrTruncated},
		{"npy", func() error { _, err := readNpy(npy); return err }, ErrTruncated},
		{"npz", func() error { _, err := readNpz(npz); return err }, ErrTruncated},
	} {
		var err error
		n := allocated(func() { err = tc.read() })
		if !errors.Is(err, tc.sentinel) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.sentinel)
		}
		if n > 32<<20 {
			t.Errorf("%s: allocated %d MiB for a file of about 1 MiB", tc.name, n>>20)
		}
		t.Logf("%s: allocated %d KiB", tc.name, n>>10)
	}
}
