package driver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// openOrSkip opens device 0 or skips the test with the reason.
func openOrSkip(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnsupportedDevice) {
		t.Skipf("no usable CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOverrideMissingLibrary(t *testing.T) {
	for _, tc := range []struct {
		env  string
		open func() error
	}{
		{EnvLibCUDA, func() error { _, err := Open(0); return err }},
		{EnvLibNVRTC, func() error { _, err := LoadNVRTC(); return err }},
	} {
		t.Run(tc.env, func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "libmissing.so")
			t.Setenv(tc.env, missing)
			err := tc.open()
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("got %v, want ErrUnavailable", err)
			}
			if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), tc.env) {
				t.Errorf("error %q should name %s and the path", err, tc.env)
			}
		})
	}
}

func TestErrorUnwrap(t *testing.T) {
	for _, tc := range []struct {
		code int
		want error
	}{
		{cudaErrorOutOfMemory, ErrOutOfMemory},
		{cudaErrorNoDevice, ErrUnavailable},
		{cudaErrorNoBinary, ErrUnsupportedDevice},
		{700, ErrDriver},
	} {
		e := &Error{Func: "cuX", Code: tc.code, Name: "N", Message: "m"}
		if !errors.Is(e, tc.want) {
			t.Errorf("code %d: errors.Is(%v) false", tc.code, tc.want)
		}
	}
	ce := &CompileError{Program: "k.cu", Code: 6, Message: "NVRTC_ERROR_COMPILATION", Log: "k.cu(3): error: x"}
	if !errors.Is(ce, ErrCompile) || !strings.Contains(ce.Error(), "k.cu(3): error") {
		t.Errorf("compile error %q should wrap ErrCompile and carry the log", ce)
	}
}

func TestArch(t *testing.T) {
	for _, tc := range []struct {
		major, minor int
		want         string
	}{{9, 0, "sm_90a"}, {8, 0, "sm_80"}, {8, 6, "sm_86"}, {8, 9, "sm_89"}, {12, 0, "sm_120"}} {
		if got := (Info{Major: tc.major, Minor: tc.minor}).Arch(); got != tc.want {
			t.Errorf("%d.%d: %s, want %s", tc.major, tc.minor, got, tc.want)
		}
	}
}

const testKernel = `
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] += a * x[i];
}`

// TestRoundTrip compiles, loads and runs a kernel, and checks every
// element against the same arithmetic on the host.
// compileAxpy compiles testKernel for d, or skips the test without NVRTC.
// loadAxpy loads compileAxpy's cubin in c and returns its kernel.
func loadAxpy(c *Ctx, cubin []byte) (Function, error) {
	m, err := c.LoadModule(cubin)
	if err != nil {
		return 0, err
	}
	return c.Function(m, "axpy")
}

func compileAxpy(t *testing.T, d *Device) []byte {
	t.Helper()
	nv, err := LoadNVRTC()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	t.Logf("%v, NVRTC %d.%d", d.Info, nv.Major, nv.Minor)
	cubin, _, err := nv.Compile(testKernel, "axpy.cu", []string{"--gpu-architecture=" + d.Arch()})
	if err != nil {
		t.Fatal(err)
	}
	return cubin
}

func TestRoundTrip(t *testing.T) {
	d := openOrSkip(t)
	cubin := compileAxpy(t, d)
	const n = 1000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i+1)
	}
	got := make([]float32, n)
	err := d.Do(context.Background(), func(c *Ctx) error {
		f, err := loadAxpy(c, cubin)
		if err != nil {
			return err
		}
		px, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(px)
		py, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(py)
		if err := CopyIn(c, px, x); err != nil {
			return err
		}
		if err := CopyIn(c, py, y); err != nil {
			return err
		}
		a, nn := float32(3), int32(n)
		if err := c.Launch(f, Dim3{(n + 127) / 128, 1, 1}, Dim3{128, 1, 1}, 0,
			Arg(&a), Arg(&px), Arg(&py), Arg(&nn)); err != nil {
			return err
		}
		if err := c.Sync(); err != nil {
			return err
		}
		return CopyOut(c, got, py)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if want := y[i] + 3*x[i]; got[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], want)
		}
	}
}

func TestCompileErrorCarriesLog(t *testing.T) {
	nv, err := LoadNVRTC()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	_, _, err = nv.Compile("extern \"C\" __global__ void k() { undeclared_name = 1; }", "bad.cu", []string{"--gpu-architecture=sm_80"})
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "undeclared_name") {
		t.Fatalf("got %v, want a CompileError whose log names the bad identifier", err)
	}
}

func TestOutOfMemory(t *testing.T) {
	d := openOrSkip(t)
	err := d.Do(context.Background(), func(c *Ctx) error {
		p, err := c.Alloc(d.TotalMem * 4)
		c.Free(p)
		return err
	})
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("allocating 4× the device memory: got %v, want ErrOutOfMemory", err)
	}
}

// TestCanTarget: an NVRTC older than an architecture needs is refused with
// ErrUnavailable and a message naming the release to install; newer and
// unlisted architectures pass.
func TestCanTarget(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		arch         string
		ok           bool
	}{
		{11, 8, "sm_90a", false},
		{11, 2, "sm_90", false},
		{11, 8, "sm_90", true},
		{12, 0, "sm_90a", true},
		{13, 0, "sm_90a", true},
		{11, 0, "sm_80", true},
		{11, 7, "sm_89", false},
	} {
		n := &NVRTC{Library: "libnvrtc.so", Major: c.major, Minor: c.minor}
		err := n.CanTarget(c.arch)
		switch {
		case c.ok && err != nil:
			t.Errorf("NVRTC %d.%d, %s: %v", c.major, c.minor, c.arch, err)
		case !c.ok && !errors.Is(err, ErrUnavailable):
			t.Errorf("NVRTC %d.%d, %s: error %v, want ErrUnavailable", c.major, c.minor, c.arch, err)
		case !c.ok && !strings.Contains(err.Error(), EnvLibNVRTC):
			t.Errorf("NVRTC %d.%d, %s: %q does not say how to fix it", c.major, c.minor, c.arch, err)
		}
	}
}

// TestObservedKeepsHook checks that a Ctx's launch hook survives OnStream
// and that Observed leaves the Ctx it came from without one.
func TestObservedKeepsHook(t *testing.T) {
	base := &Ctx{}
	calls := 0
	obs := base.Observed(func(*Ctx, Function) error { calls++; return nil })
	if base.after != nil {
		t.Fatal("Observed changed the Ctx it was called on")
	}
	for _, c := range []*Ctx{obs, obs.OnStream(7)} {
		if c.after == nil {
			t.Fatal("the hook is lost")
		}
		if err := c.after(c, 0); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Fatalf("hook ran %d times, want 2", calls)
	}
	if s := obs.OnStream(7).Stream(); s != 7 {
		t.Fatalf("OnStream's stream %d, want 7", s)
	}
}

// TestObservedLaunch launches a kernel through an observed Ctx on the
// device: the hook sees each launch once, with the launched function,
// after the launch is queued, and its error is Launch's.
func TestObservedLaunch(t *testing.T) {
	d := openOrSkip(t)
	cubin := compileAxpy(t, d)
	stop := errors.New("stop")
	err := d.Do(context.Background(), func(c *Ctx) error {
		f, err := loadAxpy(c, cubin)
		if err != nil {
			return err
		}
		p, err := c.Alloc(4 * 128)
		if err != nil {
			return err
		}
		defer c.Free(p)
		var seen []Function
		obs := c.Observed(func(_ *Ctx, g Function) error {
			seen = append(seen, g)
			if len(seen) == 2 {
				return stop
			}
			return nil
		})
		a, n := float32(1), int32(128)
		launch := func() error {
			return obs.Launch(f, Dim3{1, 1, 1}, Dim3{128, 1, 1}, 0, Arg(&a), Arg(&p), Arg(&p), Arg(&n))
		}
		if err := launch(); err != nil {
			return err
		}
		if err := launch(); !errors.Is(err, stop) {
			return fmt.Errorf("second launch: %v, want the hook's error", err)
		}
		if len(seen) != 2 || seen[0] != f || seen[1] != f {
			return fmt.Errorf("hook saw %v, want [%v %v]", seen, f, f)
		}
		return c.Sync()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLaunchConfigLayout checks launchConfig and launchAttr against
// CUlaunchConfig (56 bytes: the stream at 32, the attributes at 40, their
// count at 48) and CUlaunchAttribute (72 bytes, the value at 8) in cuda.h.
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttr
	for _, x := range []struct {
		name      string
		got, want uintptr
	}{
		{"CUlaunchConfig size", unsafe.Sizeof(c), 56},
		{"sharedMemBytes", unsafe.Offsetof(c.sharedBytes), 24},
		{"hStream", unsafe.Offsetof(c.stream), 32},
		{"attrs", unsafe.Offsetof(c.attrs), 40},
		{"numAttrs", unsafe.Offsetof(c.numAttrs), 48},
		{"CUlaunchAttribute size", unsafe.Sizeof(a), 72},
		{"value", unsafe.Offsetof(a.value), 8},
	} {
		if x.got != x.want {
			t.Errorf("%s: %d, cuda.h %d", x.name, x.got, x.want)
		}
	}
}

const pdlKernels = `
extern "C" __global__ void slow_fill(int* y, int n, long long spin) {
	long long t0 = clock64();
	while (clock64() - t0 < spin) {}
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = i + 1;
}
extern "C" __global__ void wait_copy(const int* y, int* z, int n) {
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) z[i] = y[i];
}`

// TestLaunchDependent launches a kernel that writes its output only after
// spinning, then, through LaunchDependent, one that executes
// griddepcontrol.wait and copies that output: the copy must see every
// value, whether or not the device overlaps the two launches.
func TestLaunchDependent(t *testing.T) {
	d := openOrSkip(t)
	nv, err := LoadNVRTC()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	cubin, _, err := nv.Compile(pdlKernels, "pdl.cu", []string{"--gpu-architecture=" + d.Arch()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: DependentLaunch %v", d.Info, d.DependentLaunch())
	const n = 1 << 16
	got := make([]int32, n)
	err = d.Do(context.Background(), func(c *Ctx) error {
		m, err := c.LoadModule(cubin)
		if err != nil {
			return err
		}
		fill, err := c.Function(m, "slow_fill")
		if err != nil {
			return err
		}
		cp, err := c.Function(m, "wait_copy")
		if err != nil {
			return err
		}
		y, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(y)
		z, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(z)
		for round := range 4 {
			if err := c.Memset(y, 0, 4*n); err != nil {
				return err
			}
			if err := c.Memset(z, 0, 4*n); err != nil {
				return err
			}
			nn, spin := int32(n), int64(20000<<round)
			if err := c.Launch(fill, Dim3{n / 256, 1, 1}, Dim3{256, 1, 1}, 0, Arg(&y), Arg(&nn), Arg(&spin)); err != nil {
				return err
			}
			if err := c.LaunchDependent(cp, Dim3{n / 256, 1, 1}, Dim3{256, 1, 1}, 0, Arg(&y), Arg(&z), Arg(&nn)); err != nil {
				return err
			}
			if err := c.Sync(); err != nil {
				return err
			}
			if err := CopyOut(c, got, z); err != nil {
				return err
			}
			for i, v := range got {
				if v != int32(i+1) {
					return fmt.Errorf("round %d: z[%d] = %d, want %d (the dependent read before its predecessor wrote)", round, i, v, i+1)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DependentLaunch after the launches: %v", d.DependentLaunch())
}
