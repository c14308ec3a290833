package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/tensor"
)

// ErrFreed reports a device tensor used after Free (or a view of one).
var ErrFreed = errors.New("cuda: device tensor already freed")

// Strides are a device tensor's element strides for its batch, head and
// token axes; the head dimension is always contiguous (stride 1).
type Strides struct{ B, H, N int64 }

// DenseStrides are the strides of a contiguous tensor of shape s in
// layout l.
func DenseStrides(s tensor.Shape, l tensor.Layout) Strides {
	d := int64(s.D)
	if l == tensor.BNHD {
		return Strides{B: int64(s.N) * int64(s.H) * d, H: d, N: int64(s.H) * d}
	}
	return Strides{B: int64(s.H) * int64(s.N) * d, H: int64(s.N) * d, N: d}
}

// Tensor is a [B, H, N, D] attention tensor in device memory: float32,
// float16 or bfloat16, with element strides for B, H and N, so that it
// can be a view, such as Q, K or V inside one fused QKV buffer. Make one
// with Engine.Alloc, Engine.Upload or Engine.Wrap (memory the caller
// owns, no copy), and views of it with Heads.
//
// A Tensor is safe for concurrent use. Free releases memory the engine
// allocated; every later use of the tensor or of a view of it returns an
// error wrapping ErrFreed.
type Tensor struct {
	e      *Engine
	mem    *allocation // shared with views; nil for wrapped memory
	ptr    driver.Ptr
	shape  tensor.Shape
	dtype  tensor.DType
	stride Strides
	stream driver.Stream
}

// allocation is device memory the engine owns, shared by a tensor and its
// views.
type allocation struct {
	mu    sync.Mutex
	ptr   driver.Ptr
	freed bool
}

// Shape is the tensor's logical shape.
func (t *Tensor) Shape() tensor.Shape { return t.shape }

// DType is the element type.
func (t *Tensor) DType() tensor.DType { return t.dtype }

// Strides are the element strides of the B, H and N axes.
func (t *Tensor) Strides() Strides { return t.stride }

// Ptr is the device address of element [0, 0, 0, 0].
func (t *Tensor) Ptr() uintptr { return uintptr(t.ptr) }

// Layout is BNHD when tokens are further apart than heads, else BHND.
func (t *Tensor) Layout() tensor.Layout {
	if t.stride.N > t.stride.H {
		return tensor.BNHD
	}
	return tensor.BHND
}

// Stream is the stream the tensor was wrapped with (0: the default
// stream); runs on it go to that stream.
func (t *Tensor) Stream() uintptr { return uintptr(t.stream) }

// Alloc allocates a contiguous, uninitialized tensor on e's device.
func (e *Engine) Alloc(ctx context.Context, dt tensor.DType, l tensor.Layout, s tensor.Shape) (*Tensor, error) {
	if err := checkTensorHeader(dt, s); err != nil {
		return nil, err
	}
	if l != tensor.BHND && l != tensor.BNHD {
		return nil, fmt.Errorf("%w: layout %v", tensor.ErrShape, l)
	}
	t := &Tensor{e: e, shape: s, dtype: dt, stride: DenseStrides(s, l)}
	err := e.dev.Do(ctx, func(c *driver.Ctx) error {
		p, err := c.Alloc(int64(s.Len()) * int64(dt.Size()))
		if err != nil {
			return fmt.Errorf("allocating a %v %v tensor: %w", dt, s, err)
		}
		t.ptr, t.mem = p, &allocation{ptr: p}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Upload copies a host tensor to a new device tensor of the same type and
// layout.
func (e *Engine) Upload(ctx context.Context, h *tensor.Tensor) (*Tensor, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil tensor", tensor.ErrShape)
	}
	t, err := e.Alloc(ctx, h.DType(), h.Layout(), h.Shape())
	if err != nil {
		return nil, err
	}
	err = e.dev.Do(ctx, func(c *driver.Ctx) error {
		if h.DType() == tensor.Float32 {
			return driver.CopyIn(c, t.ptr, h.Float32s())
		}
		return driver.CopyIn(c, t.ptr, h.Bits16())
	})
	if err != nil {
		return nil, errors.Join(err, t.Free())
	}
	return t, nil
}

// Wrap describes device memory the caller owns as a tensor, with no copy:
// element [b, h, n, d] is at ptr + (b·strides.B + h·strides.H +
// n·strides.N + d)·size. Runs on it are queued on stream (0: the default
// stream), a stream of the device's primary context, which is what
// PyTorch and most CUDA runtimes use. The engine never frees wrapped
// memory; the caller keeps it alive while the tensor is in use.
func (e *Engine) Wrap(ptr uintptr, dt tensor.DType, s tensor.Shape, strides Strides, stream uintptr) (*Tensor, error) {
	if err := checkTensorHeader(dt, s); err != nil {
		return nil, err
	}
	if ptr == 0 {
		return nil, fmt.Errorf("%w: null device pointer", tensor.ErrShape)
	}
	if ptr%uintptr(dt.Size()) != 0 {
		return nil, fmt.Errorf("%w: device pointer %#x is not aligned to its %v elements", tensor.ErrShape, ptr, dt)
	}
	if strides.B < 0 || strides.H < 0 || strides.N < 0 {
		return nil, fmt.Errorf("%w: negative strides %+v", tensor.ErrShape, strides)
	}
	if err := checkOverlap(s, strides); err != nil {
		return nil, err
	}
	return &Tensor{e: e, ptr: driver.Ptr(ptr), shape: s, dtype: dt, stride: strides, stream: driver.Stream(stream)}, nil
}

// checkOverlap rejects strides under which two elements share an address
// (an output written through them would race), ordering the axes by
// stride: each must step past the whole extent of the faster ones.
func checkOverlap(s tensor.Shape, st Strides) error {
	type axis struct {
		n      int
		stride int64
	}
	ax := []axis{{s.B, st.B}, {s.H, st.H}, {s.N, st.N}}
	// Sort the three axes by stride (insertion sort).
	for i := 1; i < len(ax); i++ {
		for j := i; j > 0 && ax[j].stride < ax[j-1].stride; j-- {
			ax[j], ax[j-1] = ax[j-1], ax[j]
		}
	}
	extent := int64(s.D)
	for _, a := range ax {
		if a.n == 1 {
			continue
		}
		if a.stride < extent {
			return fmt.Errorf("%w: strides %+v overlap for shape %v (each axis must step past the extent %d of the faster ones)", tensor.ErrShape, st, s, extent)
		}
		extent = a.stride * int64(a.n)
	}
	return nil
}

// Heads returns a view of heads [lo, hi) sharing t's memory: with a fused
// [B, N, Hq+2·Hkv, D] QKV buffer, Heads(0, Hq), Heads(Hq, Hq+Hkv) and
// Heads(Hq+Hkv, Hq+2·Hkv) are Q, K and V.
func (t *Tensor) Heads(lo, hi int) (*Tensor, error) {
	if err := t.live(); err != nil {
		return nil, err
	}
	if lo < 0 || hi > t.shape.H || lo >= hi {
		return nil, fmt.Errorf("%w: heads [%d, %d) of a tensor with %d", tensor.ErrShape, lo, hi, t.shape.H)
	}
	v := *t
	v.ptr = t.ptr + driver.Ptr(int64(lo)*t.stride.H*int64(t.dtype.Size()))
	v.shape.H = hi - lo
	return &v, nil
}

// Free releases memory the engine allocated for t (and its views). It does
// nothing to wrapped memory, and freeing twice is an error wrapping
// ErrFreed.
func (t *Tensor) Free() error {
	if t.mem == nil {
		return nil
	}
	t.mem.mu.Lock()
	defer t.mem.mu.Unlock()
	if t.mem.freed {
		return fmt.Errorf("%w: freeing twice", ErrFreed)
	}
	t.mem.freed = true
	return t.e.dev.Do(context.Background(), func(c *driver.Ctx) error { return c.Free(t.mem.ptr) })
}

// live reports ErrFreed when t's memory was freed.
func (t *Tensor) live() error {
	if t == nil {
		return fmt.Errorf("%w: nil device tensor", tensor.ErrShape)
	}
	if t.mem == nil {
		return nil
	}
	t.mem.mu.Lock()
	defer t.mem.mu.Unlock()
	if t.mem.freed {
		return ErrFreed
	}
	return nil
}

// span is the number of elements from t's first element to one past its
// last.
func (t *Tensor) span() int64 {
	s, st := t.shape, t.stride
	return int64(s.B-1)*st.B + int64(s.H-1)*st.H + int64(s.N-1)*st.N + int64(s.D)
}

// Download copies t to a new host tensor of the same type, in t's layout.
func (t *Tensor) Download(ctx context.Context) (*tensor.Tensor, error) {
	if err := t.live(); err != nil {
		return nil, err
	}
	s, st := t.shape, t.stride
	n := t.span()
	var f32 []float32
	var u16 []uint16
	err := t.e.dev.Do(ctx, func(c *driver.Ctx) error {
		if err := c.OnStream(t.stream).SyncStream(); err != nil {
			return err
		}
		if t.dtype == tensor.Float32 {
			f32 = make([]float32, n)
			return driver.CopyOut(c, f32, t.ptr)
		}
		u16 = make([]uint16, n)
		return driver.CopyOut(c, u16, t.ptr)
	})
	if err != nil {
		return nil, err
	}
	l := t.Layout()
	dense := DenseStrides(s, l)
	if dense == st {
		if f32 != nil {
			return tensor.FromFloat32(l, s, f32)
		}
		return tensor.FromBits16(t.dtype, l, s, u16)
	}
	// A strided view: gather its rows into a dense tensor.
	out, err := tensor.New(t.dtype, l, s)
	if err != nil {
		return nil, err
	}
	for b := range s.B {
		for h := range s.H {
			for i := range s.N {
				src := int64(b)*st.B + int64(h)*st.H + int64(i)*st.N
				dst := int64(b)*dense.B + int64(h)*dense.H + int64(i)*dense.N
				if f32 != nil {
					copy(out.Float32s()[dst:dst+int64(s.D)], f32[src:src+int64(s.D)])
				} else {
					copy(out.Bits16()[dst:dst+int64(s.D)], u16[src:src+int64(s.D)])
				}
			}
		}
	}
	return out, nil
}

// checkTensorHeader validates a device tensor's type and shape.
func checkTensorHeader(dt tensor.DType, s tensor.Shape) error {
	switch dt {
	case tensor.Float32, tensor.Float16, tensor.BFloat16:
	default:
		return fmt.Errorf("%w: dtype %v; device tensors hold float32, float16 or bfloat16", tensor.ErrShape, dt)
	}
	return s.Validate()
}
