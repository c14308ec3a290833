package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestQuantizedSpeed times, on resident device tensors with L2 flushed
// before each call, the 16-bit dense kernel, the quantized dense kernel
// (quantization included) and the quantized kernel on a random
// block-sparse plan of density 0.5, for B=1 Hq=32 Hkv=8 D=128 bf16, causal
// and not, at the lengths in SPARSEATTN_Q8_N (default 16384,32768,65536).
// It runs only with SPARSEATTN_Q8_BENCH=1; it checks nothing about speed.
func TestQuantizedSpeed(t *testing.T) {
	if os.Getenv("SPARSEATTN_Q8_BENCH") != "1" {
		t.Skip("set SPARSEATTN_Q8_BENCH=1 to time the quantized kernels")
	}
	e := openOrSkip(t)
	if !e.ws {
		t.Skip("quantized kernels need Hopper")
	}
	ns := []int{16384, 32768, 65536}
	if s := os.Getenv("SPARSEATTN_Q8_N"); s != "" {
		ns = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			ns = append(ns, n)
		}
	}
	ctx := context.Background()
	r := rand.New(rand.NewPCG(rand.Uint64(), 16))
	fmt.Printf("%-6s %-6s %9s %9s %7s %7s %9s %7s %10s %9s  %s\n", "N", "causal", "bf16 ms", "qk8 ms", "TOPS", "x bf16", "pv8 ms", "x bf16", "sparse ms", "sp/(d·q)", "kernels")
	for _, n := range ns {
		g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
		dev := make([]*Tensor, 3)
		for i, h := range []int{g.Hq, g.Hkv, g.Hkv} {
			data := make([]float32, h*n*128)
			for j := range data {
				data[j] = float32(r.NormFloat64())
			}
			ht, err := tensor.FromFloat32(tensor.BHND, tensor.Shape{B: 1, H: h, N: n, D: 128}, data)
			if err != nil {
				t.Fatal(err)
			}
			if ht, err = ht.Convert(tensor.BFloat16, tensor.BHND); err != nil {
				t.Fatal(err)
			}
			if dev[i], err = e.Upload(ctx, ht); err != nil {
				t.Fatal(err)
			}
		}
		for _, causal := range []bool{false, true} {
			tl := plan.Tiling{Geometry: g, Causal: causal, BlockQ: 128, BlockK: 128}
			run, err := e.NewRunner(ctx, tl, tensor.BFloat16, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.Alloc(ctx, tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: g.Hq, N: n, D: 128})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := run.Plan(ctx, dev[0], dev[1], dev[2]); err != nil {
				t.Fatal(err)
			}
			bf, _, err := timeExecute(ctx, run, dev, out)
			if err != nil {
				t.Fatal(err)
			}
			if err := run.SetQuantized(QuantQK8PV8); err != nil {
				t.Fatal(err)
			}
			pv8, kernel8, err := timeExecute(ctx, run, dev, out)
			if err != nil {
				t.Fatal(err)
			}
			if err := run.SetQuantized(QuantQK8); err != nil {
				t.Fatal(err)
			}
			q8, kernel, err := timeExecute(ctx, run, dev, out)
			if err != nil {
				t.Fatal(err)
			}
			// A random plan of density 0.5 (diagonal and first block kept),
			// uploaded over the runner's device plan.
			sp, err := plan.FromMask(tl, func(b, h, qb, kb int) bool { return kb == 0 || kb == qb || r.Float64() < 0.5 })
			if err != nil {
				t.Fatal(err)
			}
			if err := uploadRunnerPlan(ctx, run, sp); err != nil {
				t.Fatal(err)
			}
			q8s, _, err := timeExecute(ctx, run, dev, out)
			if err != nil {
				t.Fatal(err)
			}
			d := float64(len(sp.KVBlock)) / float64(sp.DenseBlocks())
			fmt.Printf("%-6d %-6v %9.3f %9.3f %7.0f %7.2f %9.3f %7.2f %10.3f %9.2f  %s, %s (density %.3f)\n", n, causal, bf, q8, metrics.TOPS(g, causal, q8/1e3),
				bf/q8, pv8, bf/pv8, q8s, q8s/(d*q8), kernel, kernel8, d)
			run.Close()
			out.Free()
		}
		for _, x := range dev {
			x.Free()
		}
	}
}

// timeExecute returns the median device time of 10 Execute calls after 3
// warm-up ones, each after an L2 flush, and the kernel that ran.
func timeExecute(ctx context.Context, run *Runner, dev []*Tensor, out *Tensor) (float64, Variant, error) {
	var ms []float64
	var kernel Variant
	for i := range 13 {
		err := run.e.dev.Do(ctx, func(c *driver.Ctx) error {
			run.e.flushL2(c.OnStream(dev[0].stream), byte(i))
			return nil
		})
		if err != nil {
			return 0, "", err
		}
		_, rep, err := run.Execute(ctx, dev[0], dev[1], dev[2], out)
		if err != nil {
			return 0, "", err
		}
		if i >= 3 {
			ms = append(ms, rep.RunMS)
		}
		kernel = rep.Kernel
	}
	return medianOf(ms), kernel, nil
}

// uploadRunnerPlan replaces the runner's device plan by p (same tiling,
// at most as many entries as the dense plan), with the longest-first
// order the device planner path would write.
func uploadRunnerPlan(ctx context.Context, run *Runner, p *plan.Plan) error {
	rows := make([]int32, len(p.RowStart))
	for i, s := range p.RowStart {
		rows[i] = int32(s)
	}
	order := longestFirst(p.RowStart, p.QBlocks())
	return run.e.dev.Do(ctx, func(c *driver.Ctx) error {
		if err := driver.CopyIn(c, run.bufs.rowStart.ptr, rows); err != nil {
			return err
		}
		if err := driver.CopyIn(c, run.bufs.order.ptr, order); err != nil {
			return err
		}
		return driver.CopyIn(c, run.bufs.kvBlock.ptr, p.KVBlock)
	})
}
