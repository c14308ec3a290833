package tensorfile_test

import (
	"bytes"
	"fmt"

	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/tensorfile"
)

func ExampleWriteSafetensors() {
	// Q as PyTorch's SDPA holds it: [B=1, H=2, N=3, D=2], float32.
	q := &tensorfile.Array{
		DType: tensor.Float32,
		Shape: []int{1, 2, 3, 2},
		F32:   []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	}
	var buf bytes.Buffer
	err := tensorfile.WriteSafetensors(&buf, map[string]*tensorfile.Array{"q": q}, map[string]string{"format": "pt"})
	if err != nil {
		fmt.Println(err)
		return
	}

	arrays, metadata, err := tensorfile.ReadSafetensors(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		fmt.Println(err)
		return
	}
	ts, err := tensorfile.Pick(arrays, tensor.BHND, "q")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(metadata["format"], ts[0].Shape(), ts[0].At(0, 1, 2, 1))

	_, err = tensorfile.Pick(arrays, tensor.BHND, "k")
	fmt.Println(err)
	// Output:
	// pt [B=1 H=2 N=3 D=2] 11
	// tensorfile: array not found: no array named "k"; the file has "q"
}
