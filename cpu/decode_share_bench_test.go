package cpu

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sparseattn/sparseattn/internal/kernel"
)

// BenchmarkDecodeShareOfReads measures decode (Nq=1, D=128, MHA 8:8 and
// GQA 32:8, 4K and 16K keys) as a share of the plain read bandwidth taken
// in the same rounds, for a shared machine where both move by 2× from
// minute to minute: each round times plain reads (as BenchmarkReadBandwidth
// does), then decode with key spans (span.go) and block by block
// (Executor.noSpans), in alternating order, each for about 20 ms. It
// reports the medians over the rounds of "%reads" (decode GB/s over the
// round's reads) and "x-spans" (spans over blocks in the same round).
// Run: go test ./cpu -run '^$' -bench DecodeShareOfReads -benchtime 1x
// (40 rounds; -benchtime Nx with N > 1 runs N rounds).
func BenchmarkDecodeShareOfReads(b *testing.B) {
	x := make([]float32, 64<<20)
	for i := range x {
		x[i] = float32(i % 1000)
	}
	reads := func() {
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if kernel.Max(x[w*len(x)/2:(w+1)*len(x)/2]) < 0 {
					panic("negative")
				}
			}()
		}
		wg.Wait()
	}
	for _, c := range []struct{ hq, nk int }{{8, 4096}, {32, 4096}, {8, 16384}, {32, 16384}} {
		b.Run(fmt.Sprintf("Hq%d-Hkv8-Nk%d", c.hq, c.nk), func(b *testing.B) {
			p, q, k, v, out := decodeCase(b, c.hq, 8, 1, c.nk)
			decode := func(e Executor) func() {
				return func() {
					if _, _, err := e.Run(context.Background(), p, q, k, v, out); err != nil {
						b.Fatal(err)
					}
				}
			}
			arms := []func(){decode(Executor{}), decode(Executor{noSpans: true})}
			rounds := 40
			if b.N > 1 {
				rounds = b.N
			}
			var share, blocks, ratio []float64
			for i := range rounds {
				r := rate(reads, int64(len(x)*4))
				var got [2]float64
				for j := range arms {
					a := (i + j) % len(arms)
					got[a] = rate(arms[a], decodeBytes(p))
				}
				share = append(share, 100*got[0]/r)
				blocks = append(blocks, 100*got[1]/r)
				ratio = append(ratio, got[0]/got[1])
			}
			b.ReportMetric(median(share), "%reads")
			b.ReportMetric(median(blocks), "%reads-blocks")
			b.ReportMetric(median(ratio), "x-spans")
		})
	}
}

// rate runs f once, then repeatedly for about 20 ms, and returns bytes per
// run over the time in GB/s.
func rate(f func(), bytes int64) float64 {
	f()
	start := time.Now()
	n := 0
	for time.Since(start) < 20*time.Millisecond {
		f()
		n++
	}
	return float64(bytes) * float64(n) / time.Since(start).Seconds() / 1e9
}

// median is the middle value of s (the upper one of an even count).
func median(s []float64) float64 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s[len(s)/2]
}
