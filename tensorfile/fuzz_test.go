package tensorfile

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

// seedArrays are small arrays of every dtype the writers accept.
func seedArrays(withBF16 bool) map[string]*Array {
	rng := rand.New(rand.NewPCG(31, 32))
	m := map[string]*Array{
		"q":     randomArray(rng, tensor.Float16, 1, 2, 3, 4),
		"k":     randomArray(rng, tensor.Float32, 2, 3),
		"s":     randomArray(rng, tensor.Float32),
		"empty": randomArray(rng, tensor.Float16, 0, 3),
	}
	if withBF16 {
		m["v"] = randomArray(rng, tensor.BFloat16, 3, 1)
	}
	return m
}

// corruptions returns damaged variants of a valid file.
func corruptions(b []byte) [][]byte {
	out := [][]byte{b[:len(b)/2], b[:len(b)-1], append(bytes.Clone(b), 0)}
	for _, i := range []int{0, 8, 9, len(b) / 3, len(b) - 1} {
		if i < len(b) {
			c := bytes.Clone(b)
			c[i] ^= 0x5a
			out = append(out, c)
		}
	}
	return out
}

func FuzzReadSafetensors(f *testing.F) {
	valid := mustSafetensors(f, seedArrays(true), map[string]string{"format": "pt"})
	f.Add(valid)
	f.Add(mustSafetensors(f, map[string]*Array{"x": seedArrays(false)["k"]}, nil))
	f.Add(stFile(`{"k": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}`, make([]byte, 8)...))
	f.Add(stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}`, make([]byte, 6)...))
	for _, c := range corruptions(valid) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		arrays, md, err := readST(data)
		if err != nil {
			if !typedErr(err) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		var b bytes.Buffer
		if err := WriteSafetensors(&b, arrays, md); err != nil {
			t.Fatalf("cannot re-write a file that parsed: %v", err)
		}
		again, md2, err := readST(b.Bytes())
		if err != nil {
			t.Fatalf("cannot re-read what was re-written: %v", err)
		}
		sameArrays(t, arrays, again)
		if !maps.Equal(md, md2) {
			t.Fatalf("metadata changed: %q -> %q", md, md2)
		}
	})
}

func FuzzReadNpy(f *testing.F) {
	for _, a := range seedArrays(false) {
		f.Add(mustNpy(f, a))
	}
	valid := mustNpy(f, seedArrays(false)["q"])
	f.Add(npyFile(2, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }\n", make([]byte, 8)))
	f.Add(npyFile(3, "{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"<f2\"}", make([]byte, 4)))
	f.Add(npyFile(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", nil))
	for _, c := range corruptions(valid) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := readNpy(data)
		if err != nil {
			if !typedErr(err) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		var b bytes.Buffer
		if err := WriteNpy(&b, a); err != nil {
			t.Fatalf("cannot re-write a file that parsed: %v", err)
		}
		again, err := readNpy(b.Bytes())
		if err != nil {
			t.Fatalf("cannot re-read what was re-written: %v", err)
		}
		if !sameArray(a, again) {
			t.Fatalf("array changed: %v %v -> %v %v", a.DType, a.Shape, again.DType, again.Shape)
		}
	})
}

func FuzzReadNpz(f *testing.F) {
	valid := mustNpz(f, seedArrays(false))
	f.Add(valid)
	q := mustNpy(f, seedArrays(false)["q"])
	f.Add(rawZip(deflatedMember("q.npy", q), storedMember("notes.txt", []byte("hi"))))
	f.Add(rawZip(storedMember("q.npy", q), rawMember{name: "k.npy", shares: 1}))
	for _, c := range corruptions(valid) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		arrays, err := readNpz(data)
		if err != nil {
			if !typedErr(err) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		var b bytes.Buffer
		if err := WriteNpz(&b, arrays); err != nil {
			t.Fatalf("cannot re-write a file that parsed: %v", err)
		}
		again, err := readNpz(b.Bytes())
		if err != nil {
			t.Fatalf("cannot re-read what was re-written: %v", err)
		}
		sameArrays(t, arrays, again)
	})
}
