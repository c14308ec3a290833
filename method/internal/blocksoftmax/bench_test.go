package blocksoftmax

import (
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
)

// BenchmarkAdd times Scratch.Add against plan.AddBlockSoftmax on a row of
// 2048 logits, in blocks of 16 (unisparse's default at 64-token blocks)
// and 4 (xattn's).
func BenchmarkAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	l := make([]float64, 2048)
	for j := range l {
		l[j] = 3 * r.NormFloat64()
	}
	for _, per := range []int{16, 4} {
		mass := make([]float64, len(l)/per)
		b.Run("Scratch/per="+string(rune('0'+per/10))+string(rune('0'+per%10)), func(b *testing.B) {
			var s Scratch
			for b.Loop() {
				s.Add(mass, l, per)
			}
		})
		b.Run("plan/per="+string(rune('0'+per/10))+string(rune('0'+per%10)), func(b *testing.B) {
			mb, eb := make([]float64, len(mass)), make([]float64, len(mass))
			for b.Loop() {
				plan.AddBlockSoftmax(mass, l, per, mb, eb)
			}
		})
	}
}
