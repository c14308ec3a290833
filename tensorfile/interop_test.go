package tensorfile

import (
	"path/filepath"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

// interopValue is element i of the tensors scripts/make_testdata.py wrote
// with the real torch, safetensors and NumPy writers.
func interopValue(i, seed int) float32 {
	return float32(((i*7919+seed)%1000)-500) / 64
}

// TestReadsFilesFromRealWriters reads files written by PyTorch 2.11,
// safetensors and NumPy 2.5 (testdata/interop) and checks every element.
func TestReadsFilesFromRealWriters(t *testing.T) {
	shapes := map[string]tensor.Shape{"q": {B: 1, H: 4, N: 9, D: 8}, "k": {B: 1, H: 2, N: 9, D: 8}, "v": {B: 1, H: 2, N: 9, D: 8}}
	seeds := map[string]int{"q": 1, "k": 2, "v": 3}
	round := map[tensor.DType]func(float32) float32{
		tensor.Float32:  func(x float32) float32 { return x },
		tensor.Float16:  func(x float32) float32 { return tensor.F16ToFloat32(tensor.Float32ToF16(x)) },
		tensor.BFloat16: func(x float32) float32 { return tensor.BF16ToFloat32(tensor.Float32ToBF16(x)) },
	}
	check := func(t *testing.T, name string, x *tensor.Tensor, dtype tensor.DType) {
		t.Helper()
		s := shapes[name]
		if x.Shape() != s || x.DType() != dtype {
			t.Fatalf("%s: %v %v, want %v %v", name, x.Shape(), x.DType(), s, dtype)
		}
		for h := range s.H {
			for n := range s.N {
				for d := range s.D {
					i := (h*s.N+n)*s.D + d // row-major index in torch's [B, H, N, D]
					if got, want := x.At(0, h, n, d), round[dtype](interopValue(i, seeds[name])); got != want {
						t.Fatalf("%s[0,%d,%d,%d] = %v, want %v", name, h, n, d, got, want)
					}
				}
			}
		}
	}
	dir := filepath.Join("testdata", "interop")
	for _, tc := range []struct {
		file   string
		dtype  tensor.DType
		layout tensor.Layout
	}{
		{"torch_qkv_f32.safetensors", tensor.Float32, tensor.BHND},
		{"torch_qkv_f16.safetensors", tensor.Float16, tensor.BHND},
		{"torch_qkv_bf16.safetensors", tensor.BFloat16, tensor.BHND},
		{"numpy_qkv_f16.npz", tensor.Float16, tensor.BHND},
	} {
		t.Run(tc.file, func(t *testing.T) {
			arrays, err := Load(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			ts, err := Pick(arrays, tc.layout, "q", "k", "v")
			if err != nil {
				t.Fatal(err)
			}
			for i, name := range []string{"q", "k", "v"} {
				check(t, name, ts[i], tc.dtype)
			}
		})
	}
	t.Run("numpy-bnhd-npy", func(t *testing.T) {
		for _, name := range []string{"q", "k", "v"} {
			arrays, err := Load(filepath.Join(dir, "numpy_"+name+"_bnhd.npy"))
			if err != nil {
				t.Fatal(err)
			}
			ts, err := Pick(arrays, tensor.BNHD, "numpy_"+name+"_bnhd")
			if err != nil {
				t.Fatal(err)
			}
			check(t, name, ts[0], tensor.Float32)
		}
	})
	t.Run("numpy-f64", func(t *testing.T) {
		arrays, err := Load(filepath.Join(dir, "numpy_f64.npy"))
		if err != nil {
			t.Fatal(err)
		}
		a := arrays["numpy_f64"]
		if a == nil || len(a.Shape) != 2 || a.Shape[0] != 3 || a.Shape[1] != 5 || a.DType != tensor.Float32 {
			t.Fatalf("numpy_f64: %+v", a)
		}
		for i, x := range a.F32 {
			if x != interopValue(i, 4) {
				t.Fatalf("element %d = %v, want %v", i, x, interopValue(i, 4))
			}
		}
	})
}
