package tensorfile

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

// special32 and special16 are bit patterns every random array includes:
// zeros of both signs, infinities, NaNs (with payloads), subnormals and
// extremes.
var (
	special32 = []uint32{0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc12345,
		0x00000001, 0x807fffff, 0x00400000, 0x7f7fffff, 0xff7fffff, 0x3f800000}
	special16 = []uint16{0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x0001, 0x83ff, 0x7bff, 0x7f80, 0xff80, 0x0080}
)

// randomArray returns an array of the given dtype and shape whose first
// elements are the special patterns and the rest random bits.
func randomArray(rng *rand.Rand, dt tensor.DType, shape ...int) *Array {
	a := &Array{DType: dt, Shape: slices.Clone(shape)}
	n := a.Len()
	if dt == tensor.Float32 {
		a.F32 = make([]float32, n)
		for i := range a.F32 {
			b := rng.Uint32()
			if i < len(special32) {
				b = special32[i]
			}
			a.F32[i] = math.Float32frombits(b)
		}
	} else {
		a.U16 = make([]uint16, n)
		for i := range a.U16 {
			b := uint16(rng.Uint32())
			if i < len(special16) {
				b = special16[i]
			}
			a.U16[i] = b
		}
	}
	return a
}

// sameArray reports whether a and b have the same dtype, shape and stored
// bits.
func sameArray(a, b *Array) bool {
	if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || len(a.F32) != len(b.F32) || !slices.Equal(a.U16, b.U16) {
		return false
	}
	for i := range a.F32 {
		if math.Float32bits(a.F32[i]) != math.Float32bits(b.F32[i]) {
			return false
		}
	}
	return true
}

func sameArrays(t testing.TB, want, got map[string]*Array) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("got %d arrays %v, want %d %v", len(got), sortedNames(got), len(want), sortedNames(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Fatalf("array %q missing; got %v", name, sortedNames(got))
		}
		if !sameArray(w, g) {
			t.Fatalf("array %q differs: got %v %v, want %v %v", name, g.DType, g.Shape, w.DType, w.Shape)
		}
	}
}

// sentinels are the errors a reader may wrap for a bad file.
var sentinels = []error{ErrFormat, ErrTruncated, ErrUnsupported}

// typedErr reports whether err wraps one of the reader sentinels.
func typedErr(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func mustSafetensors(t testing.TB, arrays map[string]*Array, md map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSafetensors(&b, arrays, md); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mustNpy(t testing.TB, a *Array) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteNpy(&b, a); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mustNpz(t testing.TB, arrays map[string]*Array) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteNpz(&b, arrays); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readST(data []byte) (map[string]*Array, map[string]string, error) {
	return ReadSafetensors(bytes.NewReader(data), int64(len(data)))
}

func readNpy(data []byte) (*Array, error) { return ReadNpy(bytes.NewReader(data), int64(len(data))) }

func readNpz(data []byte) (map[string]*Array, error) {
	return ReadNpz(bytes.NewReader(data), int64(len(data)))
}
