package workload

import (
	"context"

	"github.com/sparseattn/sparseattn/tensor"
)

// genRandom fills Q, K and V with i.i.d. standard normal entries: the
// structureless worst case, where attention is nearly uniform and no block
// can be skipped without error.
func genRandom(ctx context.Context, r resolved, w *Workload) error {
	w.Description = "i.i.d. standard Gaussian Q, K and V: no structure, near-uniform attention (the hard case for sparsity)"
	type job struct {
		t   *tensor.Tensor
		tag uint64
		b   int
		h   int
	}
	var jobs []job
	for b := range r.B {
		for h := range r.Hq {
			jobs = append(jobs, job{w.Q, tagRandQ, b, h})
		}
		for h := range r.Hkv {
			jobs = append(jobs, job{w.K, tagRandK, b, h}, job{w.V, tagRandV, b, h})
		}
	}
	return runJobs(ctx, len(jobs), func(i int) {
		j := jobs[i]
		g := newRNG(r.Seed, j.tag, uint64(j.b), uint64(j.h))
		row := make([]float64, r.D)
		buf := make([]float32, r.D)
		for n := range r.N {
			g.fillNorm(row, 1)
			writeRow(j.t, j.b, j.h, n, row, buf)
		}
	})
}
