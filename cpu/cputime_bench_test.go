//go:build unix

package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// BenchmarkDenseCPUTime times dense passes (B=1, H=8, D 64 and 128, 64×64
// blocks, causal and not) by process CPU time as well as wall time, for a
// shared machine where other tenants take cores: "GFLOPS/cpu-s" is the
// dense-equivalent work per second of CPU this process got (compare with
// the per-core FMA peak of "sparseattn info"), "sys-ms/op" the kernel's
// share (page faults, mostly) and "minflt/op" the minor page faults.
// Run: go test ./cpu -run '^$' -bench DenseCPUTime -benchtime 10x
func BenchmarkDenseCPUTime(b *testing.B) {
	for _, causal := range []bool{true, false} {
		for _, d := range []int{64, 128} {
			b.Run(fmt.Sprintf("N4096-D%d-causal-%v", d, causal), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				s := tensor.Shape{B: 1, H: 8, N: 4096, D: d}
				q := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
				k := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
				v := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
				g, _ := tensor.Validate(q, k, v)
				p, err := plan.Dense(plan.Tiling{Geometry: g, Causal: causal, BlockQ: 64, BlockK: 64})
				if err != nil {
					b.Fatal(err)
				}
				out, _ := tensor.New(tensor.Float32, tensor.BHND, s)
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
				n := float64(b.N)
				b.ReportMetric(metrics.DenseFLOPs(g, causal)*n/cpu.Seconds()/1e9, "GFLOPS/cpu-s")
				b.ReportMetric(metrics.DenseFLOPs(g, causal)*n/b.Elapsed().Seconds()/1e9, "GFLOPS")
				b.ReportMetric(float64(ru1.Stime.Nano()-ru0.Stime.Nano())/1e6/n, "sys-ms/op")
				b.ReportMetric(float64(ru1.Minflt-ru0.Minflt)/n, "minflt/op")
			})
		}
	}
}
