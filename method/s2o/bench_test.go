package s2o

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// BenchmarkGatherPerBlock runs S2O's plan with no early stop (NoStop:
// every prefix tile is kept, so it does the work of dense attention through gathered tiles) and
// the dense plan, interleaved, and reports each one's execution time per
// computed QK block product and their ratio (planning excluded).
// Run: go test ./method/s2o -run '^$' -bench GatherPerBlock
func BenchmarkGatherPerBlock(b *testing.B) {
	for _, c := range []struct {
		n, h, d, seg int
		qperm        bool
	}{
		{4096, 4, 128, 512, true},
		{4096, 4, 64, 512, true},
		{4096, 4, 128, 512, false},
	} {
		name := fmt.Sprintf("N%d-H%d-D%d-S%d", c.n, c.h, c.d, c.seg)
		if !c.qperm {
			name += "-fused"
		}
		b.Run(name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(7, 8))
			s := tensor.Shape{B: 1, H: c.h, N: c.n, D: c.d}
			q := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
			k := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
			v := testutil.Gaussian(b, r, tensor.Float32, tensor.BHND, s, 1)
			g, _ := tensor.Validate(q, k, v)
			tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64}
			dense, err := plan.Dense(tl)
			if err != nil {
				b.Fatal(err)
			}
			sp, err := Planner{Segment: c.seg, Tau: NoStop, QueryPerm: c.qperm}.Plan(context.Background(), tl, q, k, v)
			if err != nil {
				b.Fatal(err)
			}
			out, _ := tensor.New(tensor.Float32, tensor.BHND, s)
			var td, ts time.Duration
			var bd, bs float64
			for b.Loop() {
				for _, x := range []struct {
					p   *plan.Plan
					t   *time.Duration
					blk *float64
				}{{dense, &td, &bd}, {sp, &ts, &bs}} {
					start := time.Now()
					_, st, err := (cpu.Executor{}).Run(context.Background(), x.p, q, k, v, out)
					if err != nil {
						b.Fatal(err)
					}
					*x.t += time.Since(start)
					*x.blk += st.QKBlocks
				}
			}
			nsd, nss := float64(td.Nanoseconds())/bd, float64(ts.Nanoseconds())/bs
			b.ReportMetric(nsd, "ns/block(dense)")
			b.ReportMetric(nss, "ns/block(s2o)")
			b.ReportMetric(nss/nsd, "ratio")
		})
	}
}
