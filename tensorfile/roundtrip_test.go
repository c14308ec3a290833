package tensorfile

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

var (
	allDTypes   = []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16}
	testShapes  = [][]int{{}, {7}, {13}, {3, 5}, {1, 9}, {3, 5, 7}, {1, 3, 5, 7}, {2, 3, 5, 11}, {0}, {3, 0, 5}}
	testFormats = []string{"safetensors", "npy", "npz"}
)

// roundTrip writes a under the name "x" in format and reads it back.
func roundTrip(format string, a *Array) (*Array, error) {
	var b bytes.Buffer
	switch format {
	case "safetensors":
		if err := WriteSafetensors(&b, map[string]*Array{"x": a}, map[string]string{"format": "pt"}); err != nil {
			return nil, err
		}
		got, md, err := readST(b.Bytes())
		if err != nil {
			return nil, err
		}
		if md["format"] != "pt" || len(md) != 1 {
			return nil, fmt.Errorf("metadata %v", md)
		}
		return got["x"], nil
	case "npy":
		if err := WriteNpy(&b, a); err != nil {
			return nil, err
		}
		return readNpy(b.Bytes())
	default:
		if err := WriteNpz(&b, map[string]*Array{"x": a}); err != nil {
			return nil, err
		}
		got, err := readNpz(b.Bytes())
		if err != nil {
			return nil, err
		}
		return got["x"], nil
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, format := range testFormats {
		for _, dt := range allDTypes {
			for _, shape := range testShapes {
				t.Run(fmt.Sprintf("%s/%v/%v", format, dt, shape), func(t *testing.T) {
					a := randomArray(rng, dt, shape...)
					got, err := roundTrip(format, a)
					if format != "safetensors" && dt == tensor.BFloat16 {
						if !errors.Is(err, ErrUnsupported) {
							t.Fatalf("bfloat16 to %s: got %v, want ErrUnsupported", format, err)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if !sameArray(a, got) {
						t.Fatalf("round trip changed the array: got %v %v", got.DType, got.Shape)
					}
				})
			}
		}
	}
}

func TestRoundTripManyArrays(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	arrays := map[string]*Array{
		"q":      randomArray(rng, tensor.Float16, 1, 4, 9, 8),
		"k":      randomArray(rng, tensor.Float32, 1, 2, 9, 8),
		"v":      randomArray(rng, tensor.Float16, 1, 2, 9, 8),
		"empty":  randomArray(rng, tensor.Float32, 0, 8),
		"ünï":    randomArray(rng, tensor.Float32, 3),
		"a<b>&c": randomArray(rng, tensor.Float16, 5),
	}
	t.Run("safetensors", func(t *testing.T) {
		all := map[string]*Array{"bf": randomArray(rng, tensor.BFloat16, 2, 3)}
		for k, v := range arrays {
			all[k] = v
		}
		data := mustSafetensors(t, all, nil)
		if !bytes.Equal(data, mustSafetensors(t, all, nil)) {
			t.Fatal("writer is not deterministic")
		}
		got, md, err := readST(data)
		if err != nil {
			t.Fatal(err)
		}
		if len(md) != 0 {
			t.Fatalf("metadata %v, want none", md)
		}
		sameArrays(t, all, got)
	})
	t.Run("npz", func(t *testing.T) {
		data := mustNpz(t, arrays)
		if !bytes.Equal(data, mustNpz(t, arrays)) {
			t.Fatal("writer is not deterministic")
		}
		got, err := readNpz(data)
		if err != nil {
			t.Fatal(err)
		}
		sameArrays(t, arrays, got)
	})
}

func TestSaveLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	dir := t.TempDir()
	qkv := map[string]*Array{
		"q": randomArray(rng, tensor.Float16, 1, 2, 5, 4),
		"k": randomArray(rng, tensor.Float16, 1, 2, 5, 4),
		"v": randomArray(rng, tensor.Float32, 1, 2, 5, 4),
	}
	for _, name := range []string{"qkv.safetensors", "qkv.npz", "QKV.NPZ"} {
		path := filepath.Join(dir, name)
		if err := Save(path, qkv); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		sameArrays(t, qkv, got)
	}
	path := filepath.Join(dir, "query.npy")
	if err := Save(path, map[string]*Array{"ignored": qkv["q"]}); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sameArrays(t, map[string]*Array{"query": qkv["q"]}, got)

	if err := Save(filepath.Join(dir, "two.npy"), qkv); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Save of 3 arrays to .npy: got %v, want ErrUnsupported", err)
	}
	if err := Save(filepath.Join(dir, "x.pt"), qkv); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Save to .pt: got %v, want ErrUnsupported", err)
	}
	if _, err := Load(filepath.Join(dir, "x.pt")); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Load of .pt: got %v, want ErrUnsupported", err)
	}
	bf := filepath.Join(dir, "bf.npz")
	if err := Save(bf, map[string]*Array{"q": randomArray(rng, tensor.BFloat16, 3)}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Save of bfloat16 to .npz: got %v, want ErrUnsupported", err)
	}
	if _, err := Load(bf); err == nil {
		t.Fatal("a failed Save left its file behind")
	}
	if _, err := Load(filepath.Join(dir, "missing.npy")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

func TestWriteRejectsInvalidArrays(t *testing.T) {
	bad := map[string]*Array{
		"nil":       nil,
		"dtype":     {DType: 0, Shape: []int{1}, F32: []float32{1}},
		"short":     {DType: tensor.Float32, Shape: []int{2, 3}, F32: make([]float32, 5)},
		"wrongkind": {DType: tensor.Float16, Shape: []int{2}, F32: make([]float32, 2)},
		"negative":  {DType: tensor.Float32, Shape: []int{-1}},
	}
	for name, a := range bad {
		m := map[string]*Array{name: a}
		var b bytes.Buffer
		if err := WriteSafetensors(&b, m, nil); err == nil {
			t.Errorf("WriteSafetensors(%s) succeeded", name)
		}
		if err := WriteNpy(&b, a); err == nil {
			t.Errorf("WriteNpy(%s) succeeded", name)
		}
		if err := WriteNpz(&b, m); err == nil {
			t.Errorf("WriteNpz(%s) succeeded", name)
		}
	}
	ok := &Array{DType: tensor.Float32, Shape: []int{1}, F32: []float32{1}}
	var b bytes.Buffer
	if err := WriteSafetensors(&b, map[string]*Array{"__metadata__": ok}, nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("tensor named __metadata__: got %v", err)
	}
	if err := WriteSafetensors(&b, map[string]*Array{"\xff": ok}, nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("non-UTF-8 name: got %v", err)
	}
	if err := WriteSafetensors(&b, map[string]*Array{"x": ok}, map[string]string{"k": "\xfe"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("non-UTF-8 metadata: got %v", err)
	}
	if err := WriteNpy(&b, &Array{DType: tensor.BFloat16, Shape: []int{1}, U16: []uint16{1}}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("bfloat16 npy: got %v", err)
	}
}
