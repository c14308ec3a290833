package cuda

import (
	"runtime"
	"sync"

	"github.com/sparseattn/sparseattn/tensor"
)

// staged is a tensor as the kernel reads it: 16-bit rows of headDim
// elements, addressed by element strides for batch, head and token.
type staged struct {
	bits       []uint16
	sb, sh, sn int64
}

// stage returns t's storage as is when it already holds dt rows of headDim
// elements, in either layout; otherwise a BHND copy converted to dt and
// zero-padded to headDim (zero columns change neither QKᵀ nor the kept
// output columns).
func stage(t *tensor.Tensor, dt tensor.DType, headDim int) (staged, error) {
	s := t.Shape()
	if t.DType() == dt && s.D == headDim {
		st := staged{bits: t.Bits16()}
		if t.Layout() == tensor.BNHD {
			st.sn, st.sh, st.sb = int64(s.H*s.D), int64(s.D), int64(s.N*s.H*s.D)
		} else {
			st.sn, st.sh, st.sb = int64(s.D), int64(s.N*s.D), int64(s.H*s.N*s.D)
		}
		return st, nil
	}
	st := staged{
		bits: make([]uint16, s.B*s.H*s.N*headDim),
		sn:   int64(headDim), sh: int64(s.N * headDim), sb: int64(s.H * s.N * headDim),
	}
	conv := tensor.Float32ToBF16
	if dt == tensor.Float16 {
		conv = tensor.Float32ToF16
	}
	heads := s.B * s.H
	workers := min(runtime.GOMAXPROCS(0), heads)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, s.D)
			for bh := w; bh < heads; bh += workers {
				b, h := bh/s.H, bh%s.H
				for n := range s.N {
					t.ReadRow(b, h, n, row)
					dst := st.bits[(bh*s.N+n)*headDim:]
					for d, x := range row {
						dst[d] = conv(x)
					}
				}
			}
		}()
	}
	wg.Wait()
	return st, nil
}
