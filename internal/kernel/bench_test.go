package kernel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
)

// benchPaths are the paths this CPU can run, except the dispatching one
// (which is one of the others).
func benchPaths() []path {
	var ps []path
	for _, p := range paths {
		if p.missing == "" && p.name != "dispatch" {
			ps = append(ps, p)
		}
	}
	return ps
}

// benchShapes are attention tiles: Q·Kᵀ (BlockQ × BlockK × D), P·V
// (BlockQ × Dv × BlockK, possibly ragged) and single-query decode.
var benchShapes = []mmShape{
	// Q·Kᵀ.
	{64, 64, 32},
	{64, 64, 128},
	{64, 128, 64},
	{128, 128, 128},
	{128, 128, 256},
	{64, 64, 80},
	{128, 64, 96},
	// P·V.
	{64, 64, 64},
	{64, 256, 64},
	{64, 80, 64},
	{64, 128, 37},
	{65, 200, 33},
	// Decode.
	{1, 128, 128},
	{1, 64, 256},
}

// BenchmarkMatMul runs every shape on every path in turn (shape-major, so
// that the paths compared are measured close together in time).
func BenchmarkMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range benchShapes {
		for _, p := range benchPaths() {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", sh.m, sh.n, sh.k, p.name), func(b *testing.B) {
				a := randSlice(r, sh.m*sh.k, -1, 1)
				bb := randSlice(r, sh.k*sh.n, -1, 1)
				c := make([]float32, sh.m*sh.n)
				for b.Loop() {
					p.matMul(sh.m, sh.n, sh.k, a, sh.k, bb, sh.n, c, sh.n, false)
				}
				flops := 2 * float64(sh.m*sh.n*sh.k) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}

// BenchmarkMatMulParallel runs the tiles on every core at once (each
// goroutine with its own operands, as the attention executor does), which
// is what the clock frequency under a full AVX load allows. GFLOPS/core is
// the total divided by GOMAXPROCS.
func BenchmarkMatMulParallel(b *testing.B) {
	for _, sh := range []mmShape{{64, 64, 128}, {64, 128, 64}, {128, 128, 128}} {
		for _, p := range benchPaths() {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", sh.m, sh.n, sh.k, p.name), func(b *testing.B) {
				var seed atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					r := rand.New(rand.NewPCG(seed.Add(1), 2))
					a := randSlice(r, sh.m*sh.k, -1, 1)
					bb := randSlice(r, sh.k*sh.n, -1, 1)
					c := make([]float32, sh.m*sh.n)
					for pb.Next() {
						p.matMul(sh.m, sh.n, sh.k, a, sh.k, bb, sh.n, c, sh.n, false)
					}
				})
				flops := 2 * float64(sh.m*sh.n*sh.k) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9/float64(runtime.GOMAXPROCS(0)), "GFLOPS/core")
			})
		}
	}
}

func BenchmarkExpShift(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{64, 128, 1024} {
		for _, p := range benchPaths() {
			b.Run(fmt.Sprintf("%d/%s", n, p.name), func(b *testing.B) {
				src := randSlice(r, n, -20, 0)
				dst := make([]float32, n)
				for b.Loop() {
					p.expShift(dst, src, 0.5)
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
			})
		}
	}
}

// BenchmarkTileRows times the row maxima of a 64×64 attention tile:
// MaxRows against Max called row by row, in the same run.
func BenchmarkTileRows(b *testing.B) {
	const m, n = 64, 64
	r := rand.New(rand.NewPCG(1, 2))
	src := randSlice(r, m*n, -20, 0)
	out := make([]float32, m)
	elems := func(b *testing.B) {
		b.ReportMetric(float64(m*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
	}
	b.Run("max/per-row", func(b *testing.B) {
		for b.Loop() {
			for i := range m {
				out[i] = Max(src[i*n : (i+1)*n])
			}
		}
		elems(b)
	})
	b.Run("max/rows", func(b *testing.B) {
		for b.Loop() {
			MaxRows(m, n, src, n, out)
		}
		elems(b)
	})
}

func BenchmarkBLAS1(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 128
	x, y := randSlice(r, n, -1, 1), randSlice(r, n, -1, 1)
	report := func(b *testing.B) {
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
	}
	for _, p := range benchPaths() {
		b.Run(p.name+"/Max/128", func(b *testing.B) {
			for b.Loop() {
				p.max(x)
			}
			report(b)
		})
		b.Run(p.name+"/Dot/128", func(b *testing.B) {
			for b.Loop() {
				p.dot(x, y)
			}
			report(b)
		})
		b.Run(p.name+"/Axpy/128", func(b *testing.B) {
			for b.Loop() {
				p.axpy(1e-3, x, y)
			}
			report(b)
		})
		b.Run(p.name+"/Scale/128", func(b *testing.B) {
			for b.Loop() {
				p.scale(y, 1)
			}
			report(b)
		})
	}
}

// BenchmarkFirstNonFinite32 measures the scan's read rate on an array
// larger than the caches. Run: go test ./internal/kernel -run '^$' -bench NonFinite
func BenchmarkFirstNonFinite32(b *testing.B) {
	x := make([]float32, 16<<20)
	for i := range x {
		x[i] = float32(i%977) - 400
	}
	b.SetBytes(int64(len(x)) * 4)
	for b.Loop() {
		if FirstNonFinite32(x) != -1 {
			b.Fatal("found a non-finite element")
		}
	}
}
