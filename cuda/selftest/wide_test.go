package selftest

import (
	"fmt"
	"os"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// wideCases are xattn, unisparse and flexprefill (query-aware heads by
// the estimate, and every head query-aware) on rows of 128 KV blocks, 8K
// tokens, causal and not: past PlannerCases' shapes, they take work items
// of many logit tiles, bitonic stages of stride 64 and more, and the
// query-aware selection spread over many chunks; and psa on rows of 1024
// and 2048 blocks, and causal on rows of up to 256.
func wideCases() []PlannerCase {
	var cs []PlannerCase
	for _, causal := range []bool{true, false} {
		s := cuda.Case{Name: fmt.Sprintf("wide N=8192 causal=%v", causal), B: 1, Hq: 4, Hkv: 2, Nq: 8192, Nk: 8192, D: 128, Dv: 128,
			DType: tensor.BFloat16, Layout: tensor.BHND, Causal: causal, BlockQ: 128, BlockK: 64}
		for _, p := range []plan.Planner{
			xattn.Planner{Stride: 16, Threshold: 0.9},
			unisparse.Planner{},
			flexprefill.Planner{Gamma: 0.9, Tau: 0.1},
			flexprefill.Planner{Gamma: 0.9, Tau: 1},
		} {
			cs = append(cs, PlannerCase{Name: p.Name() + "/" + s.Name, Planner: p, Case: s})
		}
	}
	// psa on rows of 1024 and 2048 KV blocks (2048 queries against 64K
	// and 128K keys, not causal): psa_assign's CTAs of 128 and 256 threads
	// (PSA_AT), their register sorts across four and eight warps, and its
	// sums by chunks.
	for _, nk := range []int{65536, 131072} {
		s := cuda.Case{Name: fmt.Sprintf("long rows Nk=%d", nk), B: 1, Hq: 2, Hkv: 1, Nq: 2048, Nk: nk, D: 64, Dv: 64,
			DType: tensor.BFloat16, Layout: tensor.BHND, BlockQ: 128, BlockK: 64}
		p := psa.Planner{Scale: psa.DefaultScale}
		cs = append(cs, PlannerCase{Name: p.Name() + "/" + s.Name, Planner: p, Case: s})
	}
	// psa causal at 64-query blocks, rows of 1 to 256 blocks: every
	// psa_assign table from 64 to 256 positions in one plan.
	s := cuda.Case{Name: "causal N=16384", B: 1, Hq: 2, Hkv: 1, Nq: 16384, Nk: 16384, D: 64, Dv: 64,
		DType: tensor.BFloat16, Layout: tensor.BHND, Causal: true, BlockQ: 64, BlockK: 64}
	p := psa.Planner{Scale: psa.DefaultScale}
	cs = append(cs, PlannerCase{Name: p.Name() + "/" + s.Name, Planner: p, Case: s})
	return cs
}

// TestRunPlannersWide checks wideCases' device plans against the CPU
// planners, as TestRunPlanners does. It runs only when
// SPARSEATTN_WIDE_PLANNERS is set: the CPU planners and attention take
// seconds at this size.
func TestRunPlannersWide(t *testing.T) {
	if os.Getenv("SPARSEATTN_WIDE_PLANNERS") == "" {
		t.Skip("set SPARSEATTN_WIDE_PLANNERS=1 to check the planners on 8K-token rows")
	}
	runPlannerCases(t, openEngine(t), wideCases())
}
