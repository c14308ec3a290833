//go:build unix

package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// BenchmarkDenseCPUTime times dense passes (B=1, H=8, N 2048 and 4096, D 64
// and 128, 64×64 blocks, causal and not) by process CPU time as well as
// wall time, for a shared machine where other tenants take cores: "GFLOPS/cpu-s" is the
// dense-equivalent work per second of CPU this process got (compare with
// the per-core FMA peak of "sparseattn info"), "sys-ms/op" the kernel's
// share (page faults, mostly) and "minflt/op" the minor page faults.
// Run: go test ./cpu -run '^$' -bench DenseCPUTime -benchtime 10x
func BenchmarkDenseCPUTime(b *testing.B) {
	for _, n := range []int{4096, 2048} {
		for _, causal := range []bool{true, false} {
			for _, d := range []int{64, 128} {
				denseCPUTime(b, n, d, causal)
			}
		}
	}
}

// denseCPUTime is one shape of BenchmarkDenseCPUTime.
func denseCPUTime(b *testing.B, n, d int, causal bool) {
	b.Run(fmt.Sprintf("N%d-D%d-causal-%v", n, d, causal), func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 2))
		s := tensor.Shape{B: 1, H: 8, N: n, D: d}
		q := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
		k := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
		v := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
		g, _ := tensor.Validate(q, k, v)
		p, err := plan.Dense(plan.Tiling{Geometry: g, Causal: causal, BlockQ: 64, BlockK: 64})
		if err != nil {
			b.Fatal(err)
		}
		out, _ := tensor.New(tensor.Float32, tensor.BHND, s)
		// One pass before the clock: the first run of a shape that needs a
		// larger packing slab than any before it touches 16–32 MiB of fresh
		// memory, a page fault per 4 KiB (about 10–16 ms of system time on
		// the development VM), which would be charged to this shape alone.
		if _, _, err := (Executor{}).Run(context.Background(), p, q, k, v, out); err != nil {
			b.Fatal(err)
		}
		var ru0, ru1 syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru0); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, _, err := (Executor{}).Run(context.Background(), p, q, k, v, out); err != nil {
				b.Fatal(err)
			}
		}
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru1); err != nil {
			b.Fatal(err)
		}
		cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
		ops := float64(b.N)
		b.ReportMetric(metrics.DenseFLOPs(g, causal)*ops/cpu.Seconds()/1e9, "GFLOPS/cpu-s")
		b.ReportMetric(metrics.DenseFLOPs(g, causal)*ops/b.Elapsed().Seconds()/1e9, "GFLOPS")
		b.ReportMetric(float64(ru1.Stime.Nano()-ru0.Stime.Nano())/1e6/ops, "sys-ms/op")
		b.ReportMetric(float64(ru1.Minflt-ru0.Minflt)/ops, "minflt/op")
	})
}

// BenchmarkDecodeCPUTime times decode (one query token against 16K keys,
// D=128, MHA 8:8 and GQA 32:8) by process CPU time: "GB/s-at-full-cpu" is
// the K/V bytes read per second of CPU divided among the GOMAXPROCS
// workers, that is the read rate the pass would reach with every core to
// itself. On a shared machine it moves less than the wall-clock rate,
// which other tenants' jobs cut by taking cores; compare it with
// BenchmarkReadBandwidthCPUTime in the same run.
// Run: go test ./cpu -run '^$' -bench 'DecodeCPUTime|ReadBandwidthCPUTime'
func BenchmarkDecodeCPUTime(b *testing.B) {
	for _, c := range []struct{ hq, hkv int }{{8, 8}, {32, 8}} {
		b.Run(fmt.Sprintf("Hq%d-Hkv%d-Nk16384", c.hq, c.hkv), func(b *testing.B) {
			p, q, k, v, out := decodeCase(b, c.hq, c.hkv, 1, 16384)
			cpu := cpuTime(b, func() {
				for b.Loop() {
					if _, _, err := (Executor{}).Run(context.Background(), p, q, k, v, out); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(decodeBytes(p))*float64(b.N)/(cpu.Seconds()/float64(runtime.GOMAXPROCS(0)))/1e9, "GB/s-at-full-cpu")
		})
	}
}

// BenchmarkReadBandwidthCPUTime is BenchmarkReadBandwidth by process CPU
// time, as BenchmarkDecodeCPUTime measures.
func BenchmarkReadBandwidthCPUTime(b *testing.B) {
	x := make([]float32, 64<<20)
	for i := range x {
		x[i] = float32(i % 1000)
	}
	workers := runtime.GOMAXPROCS(0)
	cpu := cpuTime(b, func() {
		for b.Loop() {
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if kernel.Max(x[w*len(x)/workers:(w+1)*len(x)/workers]) < 0 {
						panic("negative")
					}
				}()
			}
			wg.Wait()
		}
	})
	b.ReportMetric(float64(len(x)*4)*float64(b.N)/(cpu.Seconds()/float64(workers))/1e9, "GB/s-at-full-cpu")
}

// cpuTime returns the process CPU time (user and system) f takes.
func cpuTime(b *testing.B, f func()) time.Duration {
	var ru0, ru1 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru0); err != nil {
		b.Fatal(err)
	}
	f()
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru1); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
}
