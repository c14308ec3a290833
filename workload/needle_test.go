package workload

import (
	"fmt"
	"math"
	"testing"
)

// denseNeedleRecall is NeedleRecall of exact dense causal attention,
// computed in float64 for the needle query rows only (the rows
// NeedleRecall reads), so it is cheap at any N.
func denseNeedleRecall(w *Workload) float64 {
	qs, ks := w.Q.Shape(), w.K.Shape()
	group := qs.H / ks.H
	d := qs.D
	q, k, v := make([]float32, d), make([]float32, d), make([]float32, d)
	logits := make([]float64, ks.N)
	scale := 1 / math.Sqrt(float64(d))
	var sum float64
	var count int
	for b := range qs.B {
		for _, h := range w.Needle.Heads {
			w.Q.ReadRow(b, h, w.Needle.QueryIndex, q)
			mx := math.Inf(-1)
			for j := 0; j <= w.Needle.QueryIndex; j++ {
				w.K.ReadRow(b, h/group, j, k)
				var s float64
				for i := range d {
					s += float64(q[i]) * float64(k[i])
				}
				logits[j] = s * scale
				mx = max(mx, logits[j])
			}
			o := make([]float64, d)
			var z float64
			for j := 0; j <= w.Needle.QueryIndex; j++ {
				e := math.Exp(logits[j] - mx)
				z += e
				w.V.ReadRow(b, h/group, j, v)
				for i := range d {
					o[i] += e * float64(v[i])
				}
			}
			w.V.ReadRow(b, h/group, w.Needle.KeyIndex, v)
			var dot, no, nv float64
			for i := range d {
				dot += o[i] / z * float64(v[i])
				no += o[i] / z * o[i] / z
				nv += float64(v[i]) * float64(v[i])
			}
			sum += dot / math.Sqrt(no*nv)
			count++
		}
	}
	return sum / float64(count)
}

// Dense attention retrieves the planted needle at every length and head
// count: the needle query's output points at the needle's value (cosine
// above 0.99, NeedleRecall's documented level for dense attention).
func TestDenseRetrievesNeedle(t *testing.T) {
	type tc struct{ n, hq int }
	var cases []tc
	for _, n := range []int{64, 1000, 4096, 16384, 32768} {
		for _, hq := range []int{1, 8, 32} {
			cases = append(cases, tc{n, hq})
		}
	}
	cases = append(cases, tc{65536, 8}, tc{131072, 1})
	for _, c := range cases {
		// Short and race runs keep the small cases (generation is
		// the cost: 32K × 32 heads is 1 GiB of float32).
		if (testing.Short() || raceEnabled) && c.n*c.hq > 4096*8 {
			continue
		}
		t.Run(fmt.Sprintf("N=%d/Hq=%d", c.n, c.hq), func(t *testing.T) {
			cfg := Default()
			cfg.N, cfg.Hq, cfg.Hkv = c.n, c.hq, max(1, c.hq/4)
			w := mustGenerate(t, cfg)
			if got := denseNeedleRecall(w); got < 0.99 {
				t.Errorf("dense needle cosine %.4f < 0.99 (needle key %d, heads %v)", got, w.Needle.KeyIndex, w.Needle.Heads)
			}
		})
	}
}
