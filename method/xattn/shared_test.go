package xattn

import (
	"context"
	"reflect"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/plan"
)

// TestSharedMatchesPerWorker checks that planShared (key panels built once
// per KV head by all workers, query heads sharing them) gives the plan of
// planPerWorker (each worker its own panels) exactly, on the test shapes
// and on GQA groups of 4 and 8 heads over 2 KV heads and 2 batches, with
// several panels and ragged ends, causal and not, Nq < Nk; thresholds 0.5
// and 0.95.
func TestSharedMatchesPerWorker(t *testing.T) {
	long := []shape{
		{plantest.Shape{Name: "gqa4-causal", B: 2, Hq: 8, Hkv: 2, Nq: 600, Nk: 600, D: 32, BlockQ: 32, BlockK: 32, Causal: true}, 8},
		{plantest.Shape{Name: "gqa8-prefill", B: 1, Hq: 16, Hkv: 2, Nq: 130, Nk: 470, D: 16, BlockQ: 16, BlockK: 16, Causal: true}, 4},
		{plantest.Shape{Name: "gqa4-noncausal", B: 1, Hq: 4, Hkv: 1, Nq: 333, Nk: 517, D: 24, BlockQ: 32, BlockK: 16}, 16},
	}
	ctx := context.Background()
	for _, s := range plantest.Select(append(long, shapes...)) {
		q, k, _, tl := inputs(t, s)
		for _, th := range []float64{0.5, 0.95} {
			x := Planner{Stride: s.stride, Threshold: th}
			shared, err := x.planShared(ctx, tl, q, k)
			if err != nil {
				t.Fatal(err)
			}
			per, err := x.planPerWorker(ctx, tl, q, k)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(shared, per) {
				t.Fatalf("%s threshold %v: the shared-panel plan differs from the per-worker one", s.Name, th)
			}
			if dense, _ := plan.Dense(tl); s.Name == "gqa4-causal" && th == 0.5 && len(shared.KVBlock) == len(dense.KVBlock) {
				t.Fatalf("%s: a dense plan tests nothing", s.Name)
			}
		}
	}
	// A cancelled context stops the shared path with the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	q, k, _, tl := inputs(t, long[0])
	if _, err := (Planner{Stride: 8, Threshold: 0.9}).planShared(cctx, tl, q, k); err != context.Canceled {
		t.Fatalf("cancelled: err %v, want context.Canceled", err)
	}
}
