package tensor

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkCheckFiniteAll checks the q, k and v of a decode step (Nq=1,
// Hq=Hkv=8, D=128) against 16K keys in one call, in each storage type.
// Run: go test ./tensor -run '^$' -bench CheckFiniteAll
func BenchmarkCheckFiniteAll(b *testing.B) {
	for _, dt := range []DType{Float32, BFloat16} {
		b.Run(fmt.Sprintf("decode-Nk16384-%v", dt), func(b *testing.B) {
			mk := func(n int) *Tensor {
				x, err := New(dt, BHND, Shape{B: 1, H: 8, N: n, D: 128})
				if err != nil {
					b.Fatal(err)
				}
				for i := range x.f32 {
					x.f32[i] = float32(i%1013) - 500
				}
				for i := range x.u16 {
					x.u16[i] = Float32ToBF16(float32(i%1013) - 500)
				}
				return x
			}
			q, k, v := mk(1), mk(16384), mk(16384)
			b.SetBytes(int64(k.shape.Len()+v.shape.Len()+q.shape.Len()) * int64(dt.Size()))
			ctx := context.Background()
			for b.Loop() {
				if err := CheckFiniteAll(ctx, Named{"q", q}, Named{"k", k}, Named{"v", v}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
