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
	"time"
	"unsafe"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestPlanArgsLayout checks the Go mirrors of the planner kernels'
// structs against their C sizes (kernels/device.cuh).
func TestPlanArgsLayout(t *testing.T) {
	if got := unsafe.Sizeof(planArgs{}); got != 72 {
		t.Errorf("planArgs is %d bytes, struct PlanArgs 72", got)
	}
	if got := unsafe.Sizeof(view{}); got != 56 {
		t.Errorf("view is %d bytes, struct View 56", got)
	}
}

func TestCheckOverlap(t *testing.T) {
	s := tensor.Shape{B: 2, H: 3, N: 5, D: 8}
	for _, tc := range []struct {
		name string
		st   Strides
		ok   bool
	}{
		{"BHND", DenseStrides(s, tensor.BHND), true},
		{"BNHD", DenseStrides(s, tensor.BNHD), true},
		{"fused QKV head view", Strides{B: 5 * 7 * 8, H: 8, N: 7 * 8}, true},
		{"padded rows", Strides{B: 3 * 5 * 16, H: 5 * 16, N: 16}, true},
		{"rows overlap", Strides{B: 3 * 5 * 8, H: 5 * 8, N: 4}, false},
		{"heads alias", Strides{B: 5 * 8, H: 0, N: 8}, false},
		{"batches overlap heads", Strides{B: 8, H: 5 * 8, N: 8}, false},
	} {
		err := checkOverlap(s, tc.st)
		if (err == nil) != tc.ok {
			t.Errorf("%s: checkOverlap(%+v) = %v, want ok=%v", tc.name, tc.st, err, tc.ok)
		}
		if err != nil && !errors.Is(err, tensor.ErrShape) {
			t.Errorf("%s: error %v does not wrap tensor.ErrShape", tc.name, err)
		}
	}
}

// TestDeviceTensors round-trips every type and layout, checks head views
// of a fused buffer, and that misuse gives errors.
func TestDeviceTensors(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	r := testutil.Rand(t)
	s := tensor.Shape{B: 2, H: 6, N: 77, D: 64}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
		for _, l := range []tensor.Layout{tensor.BHND, tensor.BNHD} {
			h := testutil.Gaussian(t, r, dt, l, s, 1)
			d, err := e.Upload(ctx, h)
			if err != nil {
				t.Fatal(err)
			}
			back, err := d.Download(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if back.Layout() != l || back.DType() != dt || !sameBits(h, back) {
				t.Errorf("%v %v: round trip changed the tensor", dt, l)
			}
			// Heads 2..5 of a BNHD buffer are a strided view.
			v, err := d.Heads(2, 5)
			if err != nil {
				t.Fatal(err)
			}
			part, err := v.Download(ctx)
			if err != nil {
				t.Fatal(err)
			}
			row, want := make([]float32, s.D), make([]float32, s.D)
			for b := range s.B {
				for hh := range 3 {
					for n := range s.N {
						part.ReadRow(b, hh, n, row)
						h.ReadRow(b, hh+2, n, want)
						if row[0] != want[0] || row[s.D-1] != want[s.D-1] {
							t.Fatalf("%v %v: view head %d row %d differs", dt, l, hh, n)
						}
					}
				}
			}
			if err := d.Free(); err != nil {
				t.Fatal(err)
			}
			if _, err := v.Download(ctx); !errors.Is(err, ErrFreed) {
				t.Errorf("download of a view of a freed tensor: %v, want ErrFreed", err)
			}
			if err := d.Free(); !errors.Is(err, ErrFreed) {
				t.Errorf("second Free: %v, want ErrFreed", err)
			}
		}
	}
	if _, err := e.Wrap(0, tensor.BFloat16, s, DenseStrides(s, tensor.BHND), 0); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("Wrap(nil): %v", err)
	}
}

// TestRunnerMatchesHost runs dense runners on device tensors (in place,
// staged from float32, padded D, views of a fused QKV buffer) and
// compares them with the host path on the same plan. The runners keep
// the tiling's own blocks (Tactics.DenseNarrowTiles), so that both run
// one kernel; TestRunnerWideTiles covers the default's 128-key tiles.
func TestRunnerMatchesHost(t *testing.T) {
	e := openTacticsOrSkip(t, Tactics{DenseNarrowTiles: true})
	ctx := context.Background()
	r := testutil.Rand(t)
	for _, c := range []Case{Cases()[1], Cases()[3], Cases()[4], Cases()[9], Cases()[11]} {
		t.Run(c.Name, func(t *testing.T) {
			tl, q, k, v, want, ws := hostDense(t, e, r, c)
			run, err := e.NewRunner(ctx, tl, q.DType(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer run.Close()
			dq, dk, dv := upload3(t, e, q, k, v)
			out, err := e.Alloc(ctx, tensor.Float32, tensor.BNHD, want.Shape())
			if err != nil {
				t.Fatal(err)
			}
			defer out.Free()
			_, rep, err := run.Run(ctx, dq, dk, dv, out)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Stats != ws {
				t.Errorf("counters %+v, host path %+v", rep.Stats, ws)
			}
			got, err := out.Download(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Both run the same kernel on the same 16-bit inputs; only
			// the order of the device's atomics could differ.
			if m, err := metrics.CompareTensors(want, got); err != nil || m.RelL1 > 1e-6 {
				t.Errorf("runner vs host path: %+v %v", m, err)
			}
			// Execute reuses the plan; a second run gives the same.
			got16, rep2, err := run.Execute(ctx, dq, dk, dv, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer got16.Free()
			if rep2.Stats != ws || rep2.PlanMS != 0 {
				t.Errorf("Execute: %+v", rep2)
			}
			if got16.DType() != q.DType() {
				t.Errorf("default output is %v, want the input type %v", got16.DType(), q.DType())
			}
		})
	}
}

// hostDense draws case c's inputs from r and runs its dense plan on e
// through the host path (Engine.Run): the reference the runner tests
// compare with.
func hostDense(t *testing.T, e *Engine, r *rand.Rand, c Case) (tl plan.Tiling, q, k, v, want *tensor.Tensor, ws plan.Stats) {
	t.Helper()
	q, k, v, err := RandomInputs(r, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	tl = plan.Tiling{Geometry: c.Geometry(), Causal: c.Causal, BlockQ: c.BlockQ, BlockK: c.BlockK}
	p, err := plan.Dense(tl)
	if err != nil {
		t.Fatal(err)
	}
	if want, ws, err = e.Run(context.Background(), p, q, k, v, nil); err != nil {
		t.Fatal(err)
	}
	return tl, q, k, v, want, ws
}

// TestRunnerFusedQKV runs attention on head views of one BNHD buffer
// holding Q, K and V side by side.
func TestRunnerFusedQKV(t *testing.T) {
	e := openTacticsOrSkip(t, Tactics{DenseNarrowTiles: true}) // the host path's tiles
	ctx := context.Background()
	r := testutil.Rand(t)
	const hq, hkv, n, d = 4, 2, 700, 128
	fused := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BNHD, tensor.Shape{B: 1, H: hq + 2*hkv, N: n, D: d}, 1)
	dev, err := e.Upload(ctx, fused)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free()
	dq, _ := dev.Heads(0, hq)
	dk, _ := dev.Heads(hq, hq+hkv)
	dv, _ := dev.Heads(hq+hkv, hq+2*hkv)
	q, _ := dq.Download(ctx)
	k, _ := dk.Download(ctx)
	v, _ := dv.Download(ctx)
	tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: hq, Hkv: hkv, Nq: n, Nk: n, D: d, Dv: d}, Causal: true, BlockQ: 128, BlockK: 64}
	p, _ := plan.Dense(tl)
	want, _, err := e.Run(ctx, p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := e.NewRunner(ctx, tl, tensor.BFloat16, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	out, err := e.Alloc(ctx, tensor.Float32, tensor.BHND, want.Shape())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	if _, _, err := run.Run(ctx, dq, dk, dv, out); err != nil {
		t.Fatal(err)
	}
	got, _ := out.Download(ctx)
	if m, err := metrics.CompareTensors(want, got); err != nil || m.RelL1 > 1e-6 {
		t.Errorf("fused views vs host path: %+v %v", m, err)
	}
	// Misuse: wrong dtype, wrong shape, a freed input.
	if _, _, err := run.Run(ctx, dk, dk, dv, out); !errors.Is(err, ErrMismatch) {
		t.Errorf("k as q: %v, want ErrMismatch", err)
	}
	other, err := e.Alloc(ctx, tensor.Float16, tensor.BHND, tensor.Shape{B: 1, H: hq, N: n, D: d})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := run.Run(ctx, other, dk, dv, out); !errors.Is(err, ErrMismatch) {
		t.Errorf("float16 q: %v, want ErrMismatch", err)
	}
	other.Free()
	if _, _, err := run.Run(ctx, other, dk, dv, out); !errors.Is(err, ErrFreed) {
		t.Errorf("freed q: %v, want ErrFreed", err)
	}
}

// upload3 copies q, k and v to the device, freed when the test ends.
func upload3(t *testing.T, e *Engine, q, k, v *tensor.Tensor) (dq, dk, dv *Tensor) {
	t.Helper()
	var out [3]*Tensor
	for i, h := range []*tensor.Tensor{q, k, v} {
		d, err := e.Upload(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Free() })
		out[i] = d
	}
	return out[0], out[1], out[2]
}

// sameBits reports whether two tensors of one type and layout hold the
// same stored values.
func sameBits(a, b *tensor.Tensor) bool {
	if a.DType() == tensor.Float32 {
		return slices.Equal(a.Float32s(), b.Float32s())
	}
	return slices.Equal(a.Bits16(), b.Bits16())
}

// TestAllocPastMemory: asking for more than the card has is a clear
// error, and the engine keeps working afterwards.
func TestAllocPastMemory(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	n := e.Info().TotalMem/2 + 1 // float32 elements: twice the card
	_, err := e.Alloc(ctx, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: int(n / 1024), D: 1024})
	if !errors.Is(err, driver.ErrOutOfMemory) {
		t.Fatalf("allocating twice the card: %v, want ErrOutOfMemory", err)
	}
	t.Logf("past memory: %v", err)
	c := Cases()[1]
	q, k, v, err := RandomInputs(testutil.Rand(t), c, 1)
	if err != nil {
		t.Fatal(err)
	}
	tl := plan.Tiling{Geometry: c.Geometry(), Causal: c.Causal, BlockQ: c.BlockQ, BlockK: c.BlockK}
	r, err := e.NewRunner(ctx, tl, q.DType(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dq, dk, dv := upload3(t, e, q, k, v)
	out, _, err := r.Run(ctx, dq, dk, dv, nil)
	if err != nil {
		t.Fatalf("after the failed allocation: %v", err)
	}
	out.Free()
}

// TestRunnerConcurrent runs mixed shapes and planners from 32 goroutines
// on one engine and requires every output to equal, bit for bit, its
// serial run. SPARSEATTN_SOAK (a duration, e.g. 5m) makes it run that
// long; by default it runs each goroutine a few times.
func TestRunnerConcurrent(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	r := testutil.Rand(t)
	soak, _ := time.ParseDuration(os.Getenv("SPARSEATTN_SOAK"))
	type job struct {
		run     *Runner
		q, k, v *Tensor
		want    *tensor.Tensor
	}
	var jobs []job
	for i, c := range []Case{Cases()[1], Cases()[4], Cases()[9], Cases()[12]} {
		for _, pl := range []plan.Planner{nil, window.Planner{Sink: 64, Window: 256}} {
			q, k, v, err := RandomInputs(r, c, 1)
			if err != nil {
				t.Fatal(err)
			}
			tl := plan.Tiling{Geometry: c.Geometry(), Causal: c.Causal, BlockQ: c.BlockQ, BlockK: c.BlockK}
			run, err := e.NewRunner(ctx, tl, q.DType(), pl)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			defer run.Close()
			dq, dk, dv := upload3(t, e, q, k, v)
			out, _, err := run.Run(ctx, dq, dk, dv, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := out.Download(ctx)
			out.Free()
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, job{run, dq, dk, dv, want})
		}
	}
	deadline := time.Now().Add(soak)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var calls int
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Go(func() {
			for i := 0; i < 4 || time.Now().Before(deadline); i++ {
				j := jobs[(w+i)%len(jobs)]
				out, _, err := j.run.Run(ctx, j.q, j.k, j.v, nil)
				if err != nil {
					errs <- err
					return
				}
				got, err := out.Download(ctx)
				out.Free()
				if err != nil {
					errs <- err
					return
				}
				if !sameBits(got, j.want) {
					errs <- fmt.Errorf("goroutine %d call %d: output differs from the serial run", w, i)
					return
				}
				mu.Lock()
				calls++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d concurrent calls over %d problems, all equal to their serial runs", calls, len(jobs))
}
