package cuda

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestS2OPlanStages times each kernel of the S2O device planner with
// device events, at TestPlannerTimes's shapes (causal) and segments 512
// and 2048, fused (the default) and with QueryPerm: the median of five
// planning sequences after one warm-up Run.
// It runs when SPARSEATTN_PLANNER_BENCH is "1" or lists s2o, for N in
// SPARSEATTN_PLANNER_BENCH_N (default 8192,32768).
func TestS2OPlanStages(t *testing.T) {
	which := os.Getenv("SPARSEATTN_PLANNER_BENCH")
	if which != "1" && !slices.Contains(strings.Split(which, ","), "s2o") {
		t.Skip("set SPARSEATTN_PLANNER_BENCH=s2o to time the S2O planner's kernels")
	}
	e := openOrSkip(t)
	ctx := context.Background()
	for _, n := range benchSizes(t, "SPARSEATTN_PLANNER_BENCH_N", []int{8192, 32768}) {
		g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
		tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
		x := uint64(0x9e3779b97f4a7c15)
		q, k, v := benchTensor(t, e, g.Hq, n, g.D, 0, &x), benchTensor(t, e, g.Hkv, n, g.D, 0, &x), benchTensor(t, e, g.Hkv, n, g.D, 0, &x)
		for _, p := range []s2o.Planner{
			{Segment: 512, Tau: 0.005}, {Segment: 512, Tau: 0.005, QueryPerm: true},
			{Segment: 2048, Tau: 0.005}, {Segment: 2048, Tau: 0.005, QueryPerm: true},
		} {
			run, err := e.NewRunner(ctx, tl, tensor.BFloat16, p)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := run.Run(ctx, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			out.Free()
			var names []string
			var times [][]float64
			err = e.dev.Do(ctx, func(c *driver.Ctx) error {
				c = c.OnStream(q.stream)
				in := &planInput{e: e, t: tl, q: viewOf(q), k: viewOf(k), v: viewOf(v), scratch: &run.bufs.scratch}
				st, err := run.planner.(s2oPlanner).stages(c, in, run.header, &run.bufs.gen)
				if err != nil {
					return err
				}
				ev := make([]driver.Event, len(st)+1)
				for i := range ev {
					if ev[i], err = c.NewEvent(); err != nil {
						return err
					}
					defer c.DestroyEvent(ev[i])
				}
				times = make([][]float64, len(st))
				for range 5 {
					if err := c.Record(ev[0]); err != nil {
						return err
					}
					for i, s := range st {
						if err := s.launch(); err != nil {
							return err
						}
						if err := c.Record(ev[i+1]); err != nil {
							return err
						}
					}
					for i := range st {
						ms, err := c.Elapsed(ev[i], ev[i+1])
						if err != nil {
							return err
						}
						times[i] = append(times[i], float64(ms))
					}
				}
				for _, s := range st {
					names = append(names, s.name)
				}
				return nil
			})
			run.Close()
			if err != nil {
				t.Fatal(err)
			}
			var sum float64
			var parts []string
			for i, ts := range times {
				slices.Sort(ts)
				sum += ts[2]
				parts = append(parts, fmt.Sprintf("%s %.3f ms", names[i], ts[2]))
			}
			variant := "fused"
			if p.QueryPerm {
				variant = "qperm"
			}
			t.Logf("N=%d S=%d %s: %s; sum %.3f ms", n, p.Segment, variant, strings.Join(parts, ", "), sum)
		}
	}
}
