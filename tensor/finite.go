package tensor

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sparseattn/sparseattn/internal/kernel"
)

// Named is a tensor with the name its NonFiniteError gives it, for
// CheckFiniteAll. A nil T is skipped.
type Named struct {
	Name string
	T    *Tensor
}

// finiteChunk is the number of elements one worker scans at a time: 256
// KiB of float32, small enough to balance, large enough that handing out
// chunks costs nothing measurable.
const finiteChunk = 1 << 16

// CheckFinite returns a *NonFiniteError naming the first NaN or Inf in
// logical (b, h, n, d) order, or nil. name labels the tensor in the
// message. It is CheckFiniteAll on this tensor alone: parallel, and in the
// storage type.
func (t *Tensor) CheckFinite(name string) error {
	return CheckFiniteAll(context.Background(), Named{Name: name, T: t})
}

// CheckFiniteAll checks every element of the tensors in one parallel pass
// on all CPUs (GOMAXPROCS goroutines), reading the storage in place and in
// its own type: the exponent bits of each float32, float16 or bfloat16
// element are tested directly, with no conversion and no copy. It returns a
// *NonFiniteError for the first tensor, in argument order, that holds a NaN
// or an infinity, naming its first such element in logical (b, h, n, d)
// order whatever the layout; ctx's error if ctx is canceled first; or nil.
//
// It reads at about the machine's memory bandwidth, so checking inputs
// that are read only once afterwards (a decode step's K and V) costs about
// as much as that read.
func CheckFiniteAll(ctx context.Context, ts ...Named) error {
	// starts[i] is the first chunk of ts[i]; chunks never span tensors.
	starts := make([]int, len(ts)+1)
	for i, x := range ts {
		n := 0
		if x.T != nil {
			n = (x.T.shape.Len() + finiteChunk - 1) / finiteChunk
		}
		starts[i+1] = starts[i] + n
	}
	chunks := starts[len(ts)]
	var bad atomic.Int64 // the lowest index of a tensor found to hold a non-finite element
	bad.Store(int64(len(ts)))
	scan := func(c int) {
		i := 0
		for starts[i+1] <= c {
			i++
		}
		if int64(i) > bad.Load() { // an earlier tensor already fails
			return
		}
		t := ts[i].T
		lo := (c - starts[i]) * finiteChunk
		hi := min(lo+finiteChunk, t.shape.Len())
		if t.firstNonFinite(lo, hi) < 0 {
			return
		}
		for {
			cur := bad.Load()
			if int64(i) >= cur || bad.CompareAndSwap(cur, int64(i)) {
				return
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), chunks)
	if workers <= 1 {
		for c := range chunks {
			if c%16 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			scan(c)
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c := int(next.Add(1) - 1)
					if c >= chunks || ctx.Err() != nil {
						return
					}
					scan(c)
				}
			}()
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if i := int(bad.Load()); i < len(ts) {
		return ts[i].T.locateNonFinite(ts[i].Name)
	}
	return nil
}

// firstNonFinite returns the storage index of the first non-finite element
// in storage[lo:hi], or -1.
func (t *Tensor) firstNonFinite(lo, hi int) int {
	var j int
	switch t.dtype {
	case Float32:
		j = kernel.FirstNonFinite32(t.f32[lo:hi])
	case Float16:
		j = kernel.FirstNonFinite16(t.u16[lo:hi], kernel.F16ExpMask)
	case BFloat16:
		j = kernel.FirstNonFinite16(t.u16[lo:hi], kernel.BF16ExpMask)
	}
	if j < 0 {
		return -1
	}
	return lo + j
}

// locateNonFinite returns the *NonFiniteError of the first non-finite
// element in logical order, or nil. It runs only once a scan has found
// one, so it is sequential: in BHND the storage order is the logical
// order, and in BNHD it goes row by row.
func (t *Tensor) locateNonFinite(name string) error {
	s := t.shape
	at := func(b, h, n, d int) error {
		return &NonFiniteError{Name: name, B: b, H: h, N: n, D: d, Value: t.At(b, h, n, d)}
	}
	if t.layout == BHND {
		i := t.firstNonFinite(0, s.Len())
		if i < 0 {
			return nil
		}
		d, r := i%s.D, i/s.D
		return at(r/(s.H*s.N), r/s.N%s.H, r%s.N, d)
	}
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				off := t.RowOffset(b, h, n)
				if i := t.firstNonFinite(off, off+s.D); i >= 0 {
					return at(b, h, n, i-off)
				}
			}
		}
	}
	return nil
}
