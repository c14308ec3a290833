package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchShapes are attention tiles: Q·Kᵀ (BlockQ × BlockK × D), P·V
// (BlockQ × Dv × BlockK, possibly ragged) and single-query decode.
var benchShapes = []mmShape{
	{64, 64, 128},
	{64, 128, 64},
	{128, 128, 128},
	{64, 64, 80},
	{128, 64, 96},
	{64, 128, 37},
	{65, 200, 33},
	{1, 128, 128},
	{1, 64, 256},
}

func BenchmarkMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, impl := range matMulImpls {
		for _, sh := range benchShapes {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", impl.name, sh.m, sh.n, sh.k), func(b *testing.B) {
				a := randSlice(r, sh.m*sh.k, -1, 1)
				bb := randSlice(r, sh.k*sh.n, -1, 1)
				c := make([]float32, sh.m*sh.n)
				for b.Loop() {
					impl.f(sh.m, sh.n, sh.k, a, sh.k, bb, sh.n, c, sh.n, false)
				}
				flops := 2 * float64(sh.m*sh.n*sh.k) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}

func BenchmarkExpShift(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, impl := range expImpls {
		for _, n := range []int{64, 128, 1024} {
			b.Run(fmt.Sprintf("%s/%d", impl.name, n), func(b *testing.B) {
				src := randSlice(r, n, -20, 0)
				dst := make([]float32, n)
				for b.Loop() {
					impl.f(dst, src, 0.5)
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
			})
		}
	}
}

func BenchmarkBLAS1(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 128
	x, y := randSlice(r, n, -1, 1), randSlice(r, n, -1, 1)
	report := func(b *testing.B) {
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
	}
	b.Run("Max/128", func(b *testing.B) {
		for b.Loop() {
			Max(x)
		}
		report(b)
	})
	b.Run("Dot/128", func(b *testing.B) {
		for b.Loop() {
			Dot(x, y)
		}
		report(b)
	})
	b.Run("Axpy/128", func(b *testing.B) {
		for b.Loop() {
			Axpy(1e-3, x, y)
		}
		report(b)
	})
	b.Run("Scale/128", func(b *testing.B) {
		for b.Loop() {
			Scale(y, 1)
		}
		report(b)
	})
}
