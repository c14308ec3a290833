// Package driver is a small binding to the CUDA driver API and NVRTC over
// purego, so that a CGO_ENABLED=0 build runs GPU kernels on machines that
// have a driver and loads fine on machines that have none.
//
// A CUDA context is current per OS thread, so every driver call of a Device
// runs on one goroutine locked to its OS thread: callers hand it closures
// through Device.Do, and the *Ctx a closure receives is valid only inside
// it. Every CUresult and nvrtcResult is checked and returned as an error
// carrying the driver's own name and message; the errors wrap this
// package's sentinels (ErrUnavailable, ErrOutOfMemory, ...).
package driver

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MinComputeMajor is the oldest GPU generation supported: Ampere (8.0),
// the first with bf16 tensor-core instructions.
const MinComputeMajor = 8

// Ptr is a device memory address.
type Ptr uint64

// Module is a loaded cubin; Function is a kernel in it.
type (
	Module   uintptr
	Function uintptr
	Event    uintptr
)

// Dim3 is a launch grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Info describes a device.
type Info struct {
	Ordinal        int
	Name           string
	Major, Minor   int   // compute capability
	SMs            int   // multiprocessors
	TotalMem       int64 // bytes
	MaxSharedOptin int   // bytes of shared memory a block may opt into
	DriverVersion  int   // e.g. 13000 for CUDA 13.0
	Library        string
}

// Arch is the NVRTC target for the device: sm_90a on Hopper (wgmma and
// setmaxnreg need the "a" target), sm_XY elsewhere.
func (i Info) Arch() string {
	if i.Major == 9 && i.Minor == 0 {
		return "sm_90a"
	}
	return fmt.Sprintf("sm_%d%d", i.Major, i.Minor)
}

func (i Info) String() string {
	return fmt.Sprintf("%s (compute %d.%d, %d SMs, %.1f GiB, driver %d.%d)",
		i.Name, i.Major, i.Minor, i.SMs, float64(i.TotalMem)/(1<<30), i.DriverVersion/1000, i.DriverVersion%1000/10)
}

// Device is one GPU with its primary context, served by one OS-locked
// goroutine. It is safe for concurrent use: calls are serialized.
type Device struct {
	Info
	api  *cudaAPI
	dev  int32
	ctx  uintptr
	work chan func()
	quit chan struct{}
	once sync.Once
	mu   sync.RWMutex // guards closed against Do
	shut bool
	// noPDL is set once the driver refused a programmatic dependent
	// launch (LaunchDependent).
	noPDL atomic.Bool
}

// Open loads the driver, initializes it and retains the primary context of
// device ordinal. The error wraps ErrUnavailable when there is no driver or
// no such device, and ErrUnsupportedDevice for a GPU older than sm_80.
func Open(ordinal int) (*Device, error) {
	api, err := loadCUDA()
	if err != nil {
		return nil, err
	}
	d := &Device{api: api, work: make(chan func()), quit: make(chan struct{})}
	d.Library = api.path
	ready := make(chan error, 1)
	go d.serve(ordinal, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

// serve is the executor goroutine: it locks its OS thread, makes the
// context current there and runs every closure handed to Do.
func (d *Device) serve(ordinal int, ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.init(ordinal); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case f := <-d.work:
			f()
		case <-d.quit:
			d.api.cuCtxSynchronize()
			d.api.cuDevicePrimaryCtxRelease(d.dev)
			return
		}
	}
}

func (d *Device) init(ordinal int) error {
	a := d.api
	if err := a.check("cuInit", a.cuInit(0)); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var v, n int32
	if err := a.check("cuDriverGetVersion", a.cuDriverGetVersion(&v)); err != nil {
		return err
	}
	d.DriverVersion = int(v)
	if err := a.check("cuDeviceGetCount", a.cuDeviceGetCount(&n)); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if ordinal < 0 || ordinal >= int(n) {
		return fmt.Errorf("%w: device %d requested, %d present", ErrUnavailable, ordinal, n)
	}
	if err := a.check("cuDeviceGet", a.cuDeviceGet(&d.dev, int32(ordinal))); err != nil {
		return err
	}
	d.Ordinal = ordinal
	name := make([]byte, 256)
	if err := a.check("cuDeviceGetName", a.cuDeviceGetName(&name[0], int32(len(name)), d.dev)); err != nil {
		return err
	}
	d.Name = strings.TrimRight(string(name[:max(0, strings.IndexByte(string(name), 0))]), " ")
	for _, at := range []struct {
		attr int32
		dst  *int
	}{{attrComputeMajor, &d.Major}, {attrComputeMinor, &d.Minor}, {attrMultiprocessorCount, &d.SMs}, {attrMaxSharedOptin, &d.MaxSharedOptin}} {
		var x int32
		if err := a.check("cuDeviceGetAttribute", a.cuDeviceGetAttribute(&x, at.attr, d.dev)); err != nil {
			return err
		}
		*at.dst = int(x)
	}
	var total uint64
	if err := a.check("cuDeviceTotalMem_v2", a.cuDeviceTotalMem(&total, d.dev)); err != nil {
		return err
	}
	d.TotalMem = int64(total)
	if d.Major < MinComputeMajor {
		return fmt.Errorf("%w: %s has compute capability %d.%d; sparseattn needs %d.0 or newer (bf16 tensor cores)",
			ErrUnsupportedDevice, d.Name, d.Major, d.Minor, MinComputeMajor)
	}
	if err := a.check("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return err
	}
	if err := a.check("cuCtxSetCurrent", a.cuCtxSetCurrent(d.ctx)); err != nil {
		a.cuDevicePrimaryCtxRelease(d.dev)
		return err
	}
	return nil
}

// Do runs f on the device's executor goroutine, where the context is
// current, and returns its error. Calls from many goroutines are
// serialized. It returns ctx.Err() if ctx ends before f starts, and
// ErrClosed after Close.
func (d *Device) Do(ctx context.Context, f func(*Ctx) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.shut {
		return ErrClosed
	}
	done := make(chan error, 1)
	job := func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("%w: panic on the device goroutine: %v", ErrDriver, r)
			}
		}()
		done <- f(&Ctx{d: d})
	}
	select {
	case d.work <- job:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-done
}

// Close waits for pending work, releases the primary context and stops
// the executor goroutine. Memory the caller allocated should be freed
// before. Close is idempotent.
func (d *Device) Close() error {
	d.once.Do(func() {
		d.mu.Lock()
		d.shut = true
		d.mu.Unlock()
		close(d.quit)
	})
	return nil
}

// Stream is a CUDA stream handle (CUstream) of the device's primary
// context; 0 is the legacy default stream.
type Stream uintptr

// Ctx issues driver calls on the executor goroutine. It is valid only
// inside the closure passed to Device.Do. Launches, event records, device
// copies and memsets go to its stream (the default stream unless
// OnStream says otherwise); host copies are synchronous.
type Ctx struct {
	d      *Device
	stream Stream
	after  func(*Ctx, Function) error
}

// OnStream returns a Ctx whose asynchronous work goes to stream s, a
// stream the caller created in the device's primary context.
func (c *Ctx) OnStream(s Stream) *Ctx { return &Ctx{d: c.d, stream: s, after: c.after} }

// Observed returns a Ctx like c whose Launch calls after (with c) once a
// kernel is queued, before it returns: a hook for timing each kernel of a
// sequence with events. An error from after is Launch's.
func (c *Ctx) Observed(after func(c *Ctx, f Function) error) *Ctx {
	return &Ctx{d: c.d, stream: c.stream, after: after}
}

// Stream is the stream c's asynchronous work goes to.
func (c *Ctx) Stream() Stream { return c.stream }

// SyncStream waits for the work queued on c's stream; it reports errors of
// earlier asynchronous launches.
func (c *Ctx) SyncStream() error {
	return c.check("cuStreamSynchronize", c.d.api.cuStreamSynchronize(uintptr(c.stream)))
}

// CopyDevice copies n bytes from src to dst, both device memory, on c's
// stream.
func (c *Ctx) CopyDevice(dst, src Ptr, n int64) error {
	if n <= 0 {
		return nil
	}
	return c.check("cuMemcpyDtoDAsync_v2", c.d.api.cuMemcpyDtoDAsync(uint64(dst), uint64(src), uint64(n), uintptr(c.stream)))
}

func (c *Ctx) check(fn string, res int32) error { return c.d.api.check(fn, res) }

// Alloc allocates n bytes of device memory. An out-of-memory error says
// how much was asked and how much is free.
func (c *Ctx) Alloc(n int64) (Ptr, error) {
	var p uint64
	if err := c.check("cuMemAlloc_v2", c.d.api.cuMemAlloc(&p, uint64(max(n, 1)))); err != nil {
		if free, total, e := c.MemInfo(); e == nil {
			return 0, fmt.Errorf("allocating %.1f MiB with %.1f of %.1f MiB free: %w", float64(n)/(1<<20), float64(free)/(1<<20), float64(total)/(1<<20), err)
		}
		return 0, err
	}
	return Ptr(p), nil
}

// Free releases memory from Alloc; freeing 0 does nothing.
func (c *Ctx) Free(p Ptr) error {
	if p == 0 {
		return nil
	}
	return c.check("cuMemFree_v2", c.d.api.cuMemFree(uint64(p)))
}

// MemInfo reports free and total device memory in bytes.
func (c *Ctx) MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = c.check("cuMemGetInfo_v2", c.d.api.cuMemGetInfo(&f, &t))
	return int64(f), int64(t), err
}

// CopyIn copies src to device memory at dst.
func CopyIn[T any](c *Ctx, dst Ptr, src []T) error {
	if len(src) == 0 {
		return nil
	}
	n := uint64(len(src)) * uint64(unsafe.Sizeof(src[0]))
	return c.check("cuMemcpyHtoD_v2", c.d.api.cuMemcpyHtoD(uint64(dst), unsafe.Pointer(&src[0]), n))
}

// CopyOut copies device memory at src into dst.
func CopyOut[T any](c *Ctx, dst []T, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	n := uint64(len(dst)) * uint64(unsafe.Sizeof(dst[0]))
	return c.check("cuMemcpyDtoH_v2", c.d.api.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), uint64(src), n))
}

// Memset sets n bytes at p to b, on c's stream.
func (c *Ctx) Memset(p Ptr, b byte, n int64) error {
	if c.stream != 0 {
		return c.check("cuMemsetD8Async", c.d.api.cuMemsetD8Async(uint64(p), b, uint64(n), uintptr(c.stream)))
	}
	return c.check("cuMemsetD8_v2", c.d.api.cuMemsetD8(uint64(p), b, uint64(n)))
}

// LoadModule loads a cubin image.
func (c *Ctx) LoadModule(cubin []byte) (Module, error) {
	if len(cubin) == 0 {
		return 0, fmt.Errorf("%w: empty cubin", ErrDriver)
	}
	var m uintptr
	err := c.check("cuModuleLoadData", c.d.api.cuModuleLoadData(&m, unsafe.Pointer(&cubin[0])))
	return Module(m), err
}

// Function looks a kernel up by its (extern "C") name.
func (c *Ctx) Function(m Module, name string) (Function, error) {
	var f uintptr
	if err := c.check("cuModuleGetFunction", c.d.api.cuModuleGetFunction(&f, uintptr(m), name)); err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	return Function(f), nil
}

// SetMaxDynamicShared lets f use up to n bytes of dynamic shared memory,
// beyond the default 48 KiB.
func (c *Ctx) SetMaxDynamicShared(f Function, n int) error {
	return c.check("cuFuncSetAttribute", c.d.api.cuFuncSetAttribute(uintptr(f), funcAttrMaxDynamicShmem, int32(n)))
}

// pinParams pins each kernel argument and the array of their addresses
// that the driver reads (one entry at least), and returns that array.
func pinParams(pin *runtime.Pinner, args []unsafe.Pointer) []unsafe.Pointer {
	params := make([]unsafe.Pointer, max(len(args), 1))
	for i, a := range args {
		pin.Pin(a)
		params[i] = a
	}
	pin.Pin(&params[0])
	return params
}

// Launch starts f on c's stream. Each arg points to one kernel
// parameter's value; the parameter memory is pinned for the call, and the
// driver copies it before Launch returns.
func (c *Ctx) Launch(f Function, grid, block Dim3, sharedBytes int, args ...unsafe.Pointer) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	params := pinParams(&pin, args)
	err := c.check("cuLaunchKernel", c.d.api.cuLaunchKernel(uintptr(f),
		grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, uint32(sharedBytes), uintptr(c.stream),
		unsafe.Pointer(&params[0]), nil))
	if err == nil && c.after != nil {
		err = c.after(&Ctx{d: c.d, stream: c.stream}, f)
	}
	return err
}

// Sync waits for all work on the device; it reports errors of earlier
// asynchronous launches.
func (c *Ctx) Sync() error { return c.check("cuCtxSynchronize", c.d.api.cuCtxSynchronize()) }

// NewEvent creates a timing event.
func (c *Ctx) NewEvent() (Event, error) {
	var e uintptr
	err := c.check("cuEventCreate", c.d.api.cuEventCreate(&e, 0))
	return Event(e), err
}

// DestroyEvent frees an event.
func (c *Ctx) DestroyEvent(e Event) error {
	return c.check("cuEventDestroy_v2", c.d.api.cuEventDestroy(uintptr(e)))
}

// Record records e on c's stream.
func (c *Ctx) Record(e Event) error {
	return c.check("cuEventRecord", c.d.api.cuEventRecord(uintptr(e), uintptr(c.stream)))
}

// Elapsed waits for end and returns the milliseconds between two events.
func (c *Ctx) Elapsed(start, end Event) (float32, error) {
	if err := c.check("cuEventSynchronize", c.d.api.cuEventSynchronize(uintptr(end))); err != nil {
		return 0, err
	}
	var ms float32
	err := c.check("cuEventElapsedTime", c.d.api.cuEventElapsedTime(&ms, uintptr(start), uintptr(end)))
	return ms, err
}
