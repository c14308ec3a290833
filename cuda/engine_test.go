package cuda

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// openOrSkip opens the default device or skips the test with the reason.
//
// SPARSEATTN_DEPENDENT_ASSEMBLY=1 sets Tactics.DependentAssembly, so that
// the device tests and timings can be run with csr_rows launched both ways.
func openOrSkip(t testing.TB) *Engine {
	t.Helper()
	return openTacticsOrSkip(t, Tactics{})
}

// openTacticsOrSkip is openOrSkip with tactics tc, plus those the
// environment sets (SPARSEATTN_DEPENDENT_ASSEMBLY, SPARSEATTN_KERNEL_DIR).
func openTacticsOrSkip(t testing.TB, tc Tactics) *Engine {
	t.Helper()
	tc.DependentAssembly = tc.DependentAssembly || os.Getenv("SPARSEATTN_DEPENDENT_ASSEMBLY") != ""
	if d := os.Getenv("SPARSEATTN_KERNEL_DIR"); d != "" {
		tc.KernelDir = d
	}
	e, err := Open(Config{CacheDir: t.TempDir(), Tactics: tc})
	if errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrUnsupportedDevice) {
		t.Skipf("no usable CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestParamsLayout(t *testing.T) {
	// struct Params in kernels/attention.cu: 7 pointers, 12 int64 strides,
	// 11 int32, 2 float32, the split int32, then the order and per-head λ
	// pointers.
	if got, want := unsafe.Sizeof(kernelParams{}), uintptr(7*8+12*8+11*4+2*4+4+8+8); got != want {
		t.Fatalf("kernelParams is %d bytes, struct Params %d", got, want)
	}
	if off := unsafe.Offsetof(kernelParams{}.b); off != 7*8+12*8 {
		t.Fatalf("kernelParams.b at %d", off)
	}
	if off := unsafe.Offsetof(kernelParams{}.order); off != 7*8+12*8+11*4+2*4+4 {
		t.Fatalf("kernelParams.order at %d", off)
	}
}

func TestWSParamsLayout(t *testing.T) {
	// struct WSParams in kernels/attention_ws.cu: four 128-byte tensor
	// maps, Params at 512, the three token flags and the output-map flag,
	// padded to 64 bytes; the Go value must cover the whole C struct,
	// since the driver copies that many bytes from it.
	if off := unsafe.Offsetof(wsParams{}.p); off != 512 {
		t.Fatalf("wsParams.p at %d, want 512", off)
	}
	if off, want := unsafe.Offsetof(wsParams{}.tok1), 512+unsafe.Sizeof(kernelParams{}); off != want {
		t.Fatalf("wsParams.tok1 at %d, want %d", off, want)
	}
	if off, want := unsafe.Offsetof(wsParams{}.tmaOut), 512+unsafe.Sizeof(kernelParams{})+12; off != want {
		t.Fatalf("wsParams.tmaOut at %d, want %d", off, want)
	}
	cSize := (512 + unsafe.Sizeof(kernelParams{}) + 16 + 63) / 64 * 64
	if got := unsafe.Sizeof(wsParams{}); got < cSize {
		t.Fatalf("wsParams is %d bytes, the C struct %d", got, cSize)
	}
}

// TestChooseWarpSpecialized checks which plans the warp-specialized Hopper
// kernel takes, and its tile width.
func TestChooseWarpSpecialized(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 300, Nk: 300, D: 128, Dv: 128}
	kc := kernelChoice{warpRows: 32, tileK: 64, wgmma: true, ws: true, ctaRows: 128, minBlock: 2}
	for _, tc := range []struct {
		name    string
		bq, bk  int
		filter  bool
		kc      func(*kernelChoice)
		ws      bool
		kt      int
		threads int
	}{
		{"128×128", 128, 128, false, nil, true, 128, 384},
		{"128×256", 128, 256, false, nil, true, 128, 384},
		{"128×64 takes 64-key tiles", 128, 64, false, nil, true, 64, 384},
		{"TileK 64 asked", 128, 128, false, func(k *kernelChoice) { k.wsTileK = 64 }, true, 64, 384},
		{"64-row blocks stay on the FA2-style kernel", 64, 128, false, nil, false, 64, 128},
		{"λ filter stays on mma.sync", 128, 128, true, nil, false, 128, 256},
		{"no tensor maps", 128, 128, false, func(k *kernelChoice) { k.ws = false }, false, 64, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan.Dense(plan.Tiling{Geometry: g, BlockQ: tc.bq, BlockK: tc.bk})
			if err != nil {
				t.Fatal(err)
			}
			if tc.filter {
				p.Filter = &plan.Filter{Lambda: -1, RowGroup: 32}
			}
			k := kc
			if tc.kc != nil {
				tc.kc(&k)
			}
			v, err := chooseVariant(p, tensor.BFloat16, k)
			if err != nil {
				t.Fatal(err)
			}
			if v.ws != tc.ws || v.kt != tc.kt || v.threads() != tc.threads {
				t.Fatalf("got %s (ws %v, %d keys, %d threads), want ws %v, %d keys, %d threads", v, v.ws, v.kt, v.threads(), tc.ws, tc.kt, tc.threads)
			}
			if v.ws && (!v.wgmma || v.stages != 2 || v.sharedBytes() > 227*1024) {
				t.Fatalf("%s: wgmma %v, %d stages, %d bytes of shared memory", v, v.wgmma, v.stages, v.sharedBytes())
			}
		})
	}
}

func TestSupports(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 300, Nk: 300, D: 128, Dv: 128}
	dense := func(mod func(*plan.Tiling)) *plan.Plan {
		tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
		if mod != nil {
			mod(&tl)
		}
		p, err := plan.Dense(tl)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *plan.Plan
		ok   bool
	}{
		{"dense 128×64", dense(nil), true},
		{"BlockK 256", dense(func(l *plan.Tiling) { l.BlockK = 256 }), true},
		{"BlockQ 32", dense(func(l *plan.Tiling) { l.BlockQ = 32 }), false},
		{"BlockK 48", dense(func(l *plan.Tiling) { l.BlockK = 48 }), false},
		{"D 256", dense(func(l *plan.Tiling) { l.Geometry.D, l.Geometry.Dv = 256, 256 }), false},
		{"λ rows 8", func() *plan.Plan { p := dense(nil); p.Filter = &plan.Filter{Lambda: -1, RowGroup: 8}; return p }(), false},
		{"λ rows 32", func() *plan.Plan { p := dense(nil); p.Filter = &plan.Filter{Lambda: -1, RowGroup: 32}; return p }(), true},
		{"stop", func() *plan.Plan { p := dense(nil); p.Stop = &plan.StopRule{Tau: 0.01}; return p }(), true},
		{"init pass", func() *plan.Plan { p := dense(nil); p.Init = dense(nil); return p }(), true},
		{"stop with λ", func() *plan.Plan {
			p := dense(nil)
			p.Stop = &plan.StopRule{Tau: 0.01}
			p.Filter = &plan.Filter{Lambda: -1, RowGroup: 32}
			return p
		}(), false},
		{"per-head λ", func() *plan.Plan {
			p := dense(nil)
			p.Filter = &plan.Filter{Lambda: -1, RowGroup: 32, HeadLambda: []float32{-1, -2}}
			return p
		}(), true},
		{"pooled", func() *plan.Plan {
			p := dense(nil)
			p.Level = make([]plan.Level, len(p.KVBlock))
			for i := range p.Level {
				p.Level[i] = plan.Full
			}
			p.Level[0] = 2
			return p
		}(), true},
		{"pooled with stop", func() *plan.Plan {
			p := dense(nil)
			p.Level = make([]plan.Level, len(p.KVBlock))
			for i := range p.Level {
				p.Level[i] = plan.Full
			}
			p.Level[0] = 3
			p.Stop = &plan.StopRule{Tau: 0.01}
			return p
		}(), false},
		{"pooled with an Init plan that stops", func() *plan.Plan {
			p := dense(nil)
			p.Level = make([]plan.Level, len(p.KVBlock))
			for i := range p.Level {
				p.Level[i] = plan.Skip
			}
			p.Init = dense(nil)
			p.Init.Level = make([]plan.Level, len(p.KVBlock))
			p.Init.Level[0] = 2
			p.Init.Stop = &plan.StopRule{Tau: 0.01}
			return p
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Supports(tc.p)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrUnsupported)) {
				t.Fatalf("Supports = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestStagePads(t *testing.T) {
	r := testutil.Rand(t)
	for _, layout := range []tensor.Layout{tensor.BHND, tensor.BNHD} {
		x := testutil.Gaussian(t, r, tensor.Float32, layout, tensor.Shape{B: 2, H: 3, N: 5, D: 40}, 1)
		st, err := stage(x, tensor.BFloat16, 64)
		if err != nil {
			t.Fatal(err)
		}
		for b := range 2 {
			for h := range 3 {
				for n := range 5 {
					for d := range 64 {
						got := st.bits[int64(b)*st.sb+int64(h)*st.sh+int64(n)*st.sn+int64(d)]
						want := uint16(0)
						if d < 40 {
							want = tensor.Float32ToBF16(x.At(b, h, n, d))
						}
						if got != want {
							t.Fatalf("%v [%d,%d,%d,%d] = %#x, want %#x", layout, b, h, n, d, got, want)
						}
					}
				}
			}
		}
	}
}

func TestOpenWithoutDriver(t *testing.T) {
	t.Setenv(driver.EnvLibCUDA, t.TempDir()+"/libcuda.so.1")
	_, err := Open(Config{})
	if !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}

// TestAgainstReference checks the GPU on a few cases against the float64
// naive attention, not only against the CPU executor.
// runRandom draws fresh inputs and a plan for c and runs them on e.
func runRandom(t *testing.T, e *Engine, r *rand.Rand, c Case) (q, k, v *tensor.Tensor, p *plan.Plan, got *tensor.Tensor) {
	t.Helper()
	q, k, v, err := RandomInputs(r, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = c.Plan(r); err != nil {
		t.Fatal(err)
	}
	if got, _, err = e.Run(context.Background(), p, q, k, v, nil); err != nil {
		t.Fatal(err)
	}
	return q, k, v, p, got
}

func TestAgainstReference(t *testing.T) {
	e := openOrSkip(t)
	r := testutil.Rand(t)
	for _, c := range []Case{Cases()[1], Cases()[5], Cases()[8]} {
		t.Run(c.Name, func(t *testing.T) {
			q, k, v, p, got := runRandom(t, e, r, c)
			want, err := reference.Attention(context.Background(), q, k, v, c.Causal, float64(p.SoftmaxScale()), nil)
			if err != nil {
				t.Fatal(err)
			}
			errs, err := metrics.CompareTensors(want.Float32(), got)
			if err != nil {
				t.Fatal(err)
			}
			if !(errs.RelL1 <= TolBF16) {
				t.Fatalf("rel L1 %.3g against float64 reference", errs.RelL1)
			}
		})
	}
}

// TestConcurrent runs one engine from many goroutines at once, each on its
// own inputs, and checks every output against a serial run.
func TestConcurrent(t *testing.T) {
	e := openOrSkip(t)
	seed := testutil.Rand(t).Uint64()
	c := Cases()[4]
	const n = 8
	want := make([]*tensor.Tensor, n)
	inputs := make([][3]*tensor.Tensor, n)
	var p *plan.Plan
	for i := range n {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		q, k, v, err := RandomInputs(r, c, 1)
		if err != nil {
			t.Fatal(err)
		}
		inputs[i] = [3]*tensor.Tensor{q, k, v}
		if p == nil {
			if p, err = c.Plan(r); err != nil {
				t.Fatal(err)
			}
		}
		if want[i], _, err = e.Run(context.Background(), p, q, k, v, nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			in := inputs[i]
			got, _, err := e.Run(context.Background(), p, in[0], in[1], in[2], nil)
			if err == nil {
				var m metrics.Errors
				if m, err = metrics.CompareTensors(want[i], got); err == nil && m.MaxAbs != 0 {
					err = fmt.Errorf("differs from the serial run by %g", m.MaxAbs)
				}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", i, err)
		}
	}
}

// TestCompileForPortableArchs compiles one plain and one λ-filter mma.sync
// variant for each architecture of PortableArchs with NVRTC alone (no GPU
// of that kind is needed); the self-test compiles all of them.
func TestCompileForPortableArchs(t *testing.T) {
	nv, err := driver.LoadNVRTC()
	if errors.Is(err, driver.ErrUnavailable) {
		t.Skipf("no NVRTC: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := cubinCache{nvrtc: nv}
	vs := []variant{
		{headDim: 128, blockQ: 128, kt: 64, mt: 2, bf16: true, stages: 1},
		{headDim: 64, blockQ: 64, kt: 128, mt: 1, filter: true, stages: 1},
	}
	for _, a := range PortableArchs {
		if err := compileVariants(context.Background(), &c, a, vs); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
}

// TestStagedOutputFits checks that the warp-specialized kernel's default
// configurations keep the output staging buffer within an H100's 227 KiB
// of shared memory per block.
func TestStagedOutputFits(t *testing.T) {
	for _, d := range []int{64, 128} {
		for _, kt := range []int{64, 128} {
			for _, out16 := range []bool{false, true} {
				v := variant{headDim: d, blockQ: 128, kt: kt, mt: 1, bf16: true, wgmma: true, ws: true, stages: 2, out16: out16, tmaOut: true}
				if n := v.sharedBytes(); n > 227*1024 {
					t.Errorf("%s: %d bytes of shared memory", v, n)
				}
				plain := v
				plain.tmaOut = false
				if got, want := v.sharedBytes()-plain.sharedBytes(), 128*d*int(v.outBytes()); got != want {
					t.Errorf("%s: staging buffer of %d bytes, want %d", v, got, want)
				}
			}
		}
	}
}

// TestOutput16 checks the 16-bit output path against the float64
// reference: the result comes back in the inputs' type, and the extra
// rounding (2^-9 relative for bfloat16, 2^-11 for float16) stays inside
// the self-test tolerances.
func TestOutput16(t *testing.T) {
	e, err := Open(Config{CacheDir: t.TempDir(), Output16: true})
	if errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrUnsupportedDevice) {
		t.Skipf("no usable CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	r := testutil.Rand(t)
	for _, c := range []Case{Cases()[1], Cases()[2], Cases()[8], Cases()[9]} {
		t.Run(c.Name, func(t *testing.T) {
			q, k, v, p, got := runRandom(t, e, r, c)
			if want := q.DType(); got.DType() != want && !(want == tensor.Float32 && got.DType() == tensor.BFloat16) {
				t.Fatalf("output is %v for %v inputs", got.DType(), want)
			}
			ref, err := reference.Attention(context.Background(), q, k, v, c.Causal, float64(p.SoftmaxScale()), nil)
			if err != nil {
				t.Fatal(err)
			}
			errs, err := metrics.CompareTensors(ref.Float32(), got)
			if err != nil {
				t.Fatal(err)
			}
			tol := TolBF16
			if c.DType == tensor.Float16 {
				tol = TolF16
			}
			if !(errs.RelL1 <= tol) {
				t.Fatalf("rel L1 %.3g against float64 reference, tolerance %.0e", errs.RelL1, tol)
			}
		})
	}
}

// TestCompileHopperKernels compiles the warp-specialized kernel and the
// FlashAttention-2-style wgmma kernel for sm_90a with NVRTC alone (no GPU
// is needed), and logs ptxas's register and spill report for each.
func TestCompileHopperKernels(t *testing.T) {
	nv, err := driver.LoadNVRTC()
	if err == nil {
		err = nv.CanTarget("sm_90a")
	}
	if errors.Is(err, driver.ErrUnavailable) {
		t.Skipf("no NVRTC for sm_90a: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []variant{
		{headDim: 128, blockQ: 128, kt: 128, mt: 1, bf16: true, wgmma: true, ws: true, stages: 2},
		{headDim: 128, blockQ: 128, kt: 128, mt: 1, bf16: true, wgmma: true, ws: true, stages: 2, dynamic: true},
		{headDim: 64, blockQ: 128, kt: 64, mt: 1, wgmma: true, ws: true, stages: 2, out16: true, dynamic: true},
		{headDim: 128, blockQ: 128, kt: 128, mt: 1, bf16: true, wgmma: true, ws: true, stages: 2, dynamic: true, tmaOut: true},
		{headDim: 128, blockQ: 128, kt: 64, mt: 1, bf16: true, wgmma: true, ws: true, stages: 4, out16: true, pingPong: true, tmaOut: true},
		{headDim: 64, blockQ: 128, kt: 64, mt: 1, wgmma: true, ws: true, stages: 2, tmaOut: true},
		{headDim: 128, blockQ: 128, kt: 128, mt: 1, bf16: true, wgmma: true, ws: true, stages: 2, pingPong: true},
		{headDim: 128, blockQ: 128, kt: 64, mt: 1, bf16: true, wgmma: true, ws: true, stages: 4, pingPong: true},
		{headDim: 128, blockQ: 128, kt: 64, mt: 1, bf16: true, wgmma: true, minBlocks: 2, stages: 1},
	} {
		src, name := v.source()
		_, log, err := nv.Compile(src, name, append(v.options("sm_90a"), "--ptxas-options=-v"))
		if err != nil {
			t.Errorf("%s: %v", v, err)
			continue
		}
		t.Logf("%s:\n%s", v, log)
	}
}

// TestManyHeads checks that only the persistent warp-specialized kernel,
// whose grid is one-dimensional, takes more than 65535 batch·heads.
func TestManyHeads(t *testing.T) {
	g := tensor.Geometry{B: 2, Hq: 40000, Hkv: 40000, Nq: 64, Nk: 64, D: 64, Dv: 64}
	p, err := plan.Dense(plan.Tiling{Geometry: g, BlockQ: 128, BlockK: 128})
	if err != nil {
		t.Fatal(err)
	}
	kc := kernelChoice{warpRows: 32, tileK: 64, wgmma: true, ws: true, ctaRows: 128, minBlock: 2}
	if v, err := chooseVariant(p, tensor.BFloat16, kc); err != nil || !v.ws {
		t.Fatalf("warp-specialized: %v, %v", v, err)
	}
	kc.ws = false
	if _, err := chooseVariant(p, tensor.BFloat16, kc); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("FA2-style kernel with B·Hq = 80000: err %v, want ErrUnsupported", err)
	}
	// Engine.Supports answers for the engine's kernels; the package's
	// Supports for every GPU.
	hopper := &Engine{warpRows: 32, tileK: 64, wgmma: true, ws: true, ctaRows: 128, minBlk: 2}
	if err := hopper.Supports(p); err != nil {
		t.Fatalf("Engine.Supports with the warp-specialized kernel: %v", err)
	}
	ampere := &Engine{warpRows: 32, tileK: 64}
	if err := ampere.Supports(p); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Engine.Supports with the mma.sync kernel: %v, want ErrUnsupported", err)
	}
	if err := Supports(p); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Supports: %v, want ErrUnsupported", err)
	}
}

// TestBenchmark checks that Benchmark times every launch it was asked for,
// clears L2 before each, and reports the counters Run reports.
func TestBenchmark(t *testing.T) {
	e := openOrSkip(t)
	r := testutil.Rand(t)
	c := Cases()[12] // sparse 0.5 causal
	q, k, v, err := RandomInputs(r, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Plan(r)
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := e.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := e.Benchmark(context.Background(), p, q, k, v, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.TimesMS) != 3 || !slices.Contains(tm.TimesMS, tm.MedianMS) || tm.MedianMS <= 0 {
		t.Errorf("times %v, median %v", tm.TimesMS, tm.MedianMS)
	}
	if !tm.FlushedL2 {
		t.Error("L2 was not cleared before the launches")
	}
	if tm.Stats != want {
		t.Errorf("counters %+v, Run reports %+v", tm.Stats, want)
	}
	if _, err := e.Benchmark(context.Background(), p, q, k, v, 0, 0); !errors.Is(err, ErrUnsupported) {
		t.Errorf("0 timed launches: %v, want ErrUnsupported", err)
	}
}
