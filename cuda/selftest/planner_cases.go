package selftest

import (
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// shapes are the awkward problems every device planner is checked on:
// ragged N, N below one block, GQA, causal and not, D 64 to 128, both
// layouts, the three input types, and decode-like Nq < Nk.
func shapes() []cuda.Case {
	bf, f16, f32 := tensor.BFloat16, tensor.Float16, tensor.Float32
	bhnd, bnhd := tensor.BHND, tensor.BNHD
	return []cuda.Case{
		{Name: "causal GQA ragged N=1000 D128", B: 1, Hq: 8, Hkv: 2, Nq: 1000, Nk: 1000, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64},
		{Name: "non-causal N=1500 D64 f16 BNHD", B: 2, Hq: 4, Hkv: 4, Nq: 1500, Nk: 1500, D: 64, Dv: 64, DType: f16, Layout: bnhd, BlockQ: 64, BlockK: 64},
		{Name: "tiny N=37 causal", B: 1, Hq: 2, Hkv: 1, Nq: 37, Nk: 37, D: 64, Dv: 64, DType: bf, Layout: bhnd, Causal: true, BlockQ: 64, BlockK: 64},
		{Name: "chunked prefill Nq=300 Nk=1100 f32", B: 1, Hq: 4, Hkv: 2, Nq: 300, Nk: 1100, D: 128, Dv: 128, DType: f32, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 128},
		{Name: "causal N=2048 D96", B: 1, Hq: 4, Hkv: 4, Nq: 2048, Nk: 2048, D: 96, Dv: 96, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64},
	}
}

// llmShape is a workload problem: the synthetic llm layer at 4K.
var llmShape = cuda.Case{Name: "llm workload N=4096", B: 1, Hq: 8, Hkv: 2, Nq: 4096, Nk: 4096, D: 128, Dv: 128,
	DType: tensor.BFloat16, Layout: tensor.BHND, Causal: true, BlockQ: 128, BlockK: 64}

// PlannerCases is the device-planner suite: each GPU planner on the
// awkward shapes with random inputs and on the llm workload.
func PlannerCases() []PlannerCase {
	planners := []plan.Planner{
		plan.DensePlanner{},
		window.Planner{Sink: 64, Window: 256},
	}
	for _, more := range [][]plan.Planner{spargePlanners(), unisparsePlanners(), xattnPlanners(), flexprefillPlanners(), minferencePlanners(), oraclePlanners(), s2oPlanners(), psaPlanners()} {
		planners = append(planners, more...)
	}
	var cs []PlannerCase
	for _, p := range planners {
		for _, s := range shapes() {
			cs = append(cs, PlannerCase{Name: caseName(p) + "/" + s.Name, Planner: p, Case: s})
		}
		cs = append(cs, PlannerCase{Name: caseName(p) + "/" + llmShape.Name, Planner: p, Case: llmShape, Workload: workload.LLM})
		cs = append(cs, s2oTieCases(p)...)
	}
	return append(cs, autoCases()...)
}
