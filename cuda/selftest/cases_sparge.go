package selftest

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// spargePlanners are the sparge configurations the device planner is checked
// with: the reference's top-k 0.5 with the default θ 0.3 (on N(0, 1) noise
// every block is non-self-similar, so this checks the judge's fix rows, and
// the llm workload the whole predictor); TopCdf with the judge off and the sink;
// top-k with θ near a 128-token query block's noise CosSim (1/128), so that
// some query rows are judged and some predicted; TopCdf with θ near a
// 64-token key block's (1/64), so that some key columns are fixed.
// TestSpargeHeads checks per-head parameters.
func spargePlanners() []plan.Planner {
	return []plan.Planner{
		sparge.Planner{Params: sparge.Params{TopK: sparge.DefaultTopK}},
		sparge.Planner{Params: sparge.Params{CDF: 0.9, Theta: -1}, Sink: true},
		sparge.Planner{Params: sparge.Params{TopK: 0.3, Theta: 0.0078}},
		sparge.Planner{Params: sparge.Params{CDF: 0.6, Theta: 0.0156}},
	}
}

// spargeSimTol bounds |CosSim_device − CosSim_CPU| for a block of n tokens
// of head dimension d. The device (kernels/plan_sparge.cu, pool_task)
// computes CosSim = |Σ_a x̂_a|²/n² in float32, u = 2⁻²⁴, γ_k = k·u/(1 − k·u):
//
//   - |x|² = Σ_d x_d², non-negative terms in any order: relative error γ_d;
//     rsqrtf is within 2 ulp (4u): 1/|x| is within γ_d + 5u, and x̂_d =
//     x_d·(1/|x|) rounded within η = γ_d + 7u (a token whose float32 |x|²
//     leaves [2⁻¹⁰⁰, 2¹⁰⁰] takes 1/|x| in float64: within u + 2⁻⁵⁰);
//   - U_d = Σ_a x̂_ad over n tokens in float32 adds γ_n·S_d, S_d = Σ_a |x̂_ad|:
//     |U'_d − U_d| ≤ ε·S_d, ε = η + γ_n·(1 + η);
//   - Σ_d U'_d² − Σ_d U_d² ≤ (2ε + ε²)·Σ_d S_d², and Σ_d S_d² ≤ n·Σ_a |x̂_a|² ≤ n²
//     (Cauchy–Schwarz), so dividing by n² leaves 2ε + ε²;
//   - the float64 tail (the square sum, the division) and the CPU's own
//     float64 rounding add under 10⁻¹², allowed for.
//
// For n = d = 128 the bound is about 3.1e-5. The block sizes of a tiling
// bound n, and the bound grows with n, so a tiling's blocks use its
// BlockQ or BlockK.
func spargeSimTol(n, d int) float64 {
	const u = 0x1p-24
	gamma := func(k int) float64 { return float64(k) * u / (1 - float64(k)*u) }
	eta := gamma(d) + 7*u
	eps := eta + gamma(n)*(1+eta)
	return 2*eps + eps*eps + 1e-12
}

// spargeMaxNear is the most key blocks of one row within spargeSimTol of θ
// that the judge enumerates (2^n judge outcomes); more makes it fail.
const spargeMaxNear = 10

// spargeTieBreak returns the judge of sparge rows: the device's CosSim is
// float32 (see spargeSimTol), so a query block whose CPU CosSim lies within
// the bound of θ may be judged the other way (its row computed in full or
// predicted), and so may a key block (a fix column or a candidate). The
// pooled means, logits, softmax and selection are the CPU's bits, so a row
// may differ only as the CPU's mask rule gives it under some such choice
// of judgements (spargeRowWithin). With the judge off (θ ≤ 0), nothing may
// differ.
func spargeTieBreak(p plan.Planner, t plan.Tiling, q, k *tensor.Tensor) rowJudge {
	sp, ok := p.(sparge.Planner)
	if !ok {
		return nil
	}
	g := t.Geometry
	params, err := sp.HeadParams(g.Hq)
	if err != nil {
		return func(context.Context, int, []int32, []int32) error { return err }
	}
	tolQ, tolK := spargeSimTol(t.BlockQ, g.D), spargeSimTol(t.BlockK, g.D)
	qBlocks := (g.Nq + t.BlockQ - 1) / t.BlockQ
	est := map[int][]*sparge.HeadEstimate{} // by b·Hkv + kvh
	return func(_ context.Context, row int, _, gpuRow []int32) error {
		bh, qb := row/qBlocks, row%qBlocks
		b, h := bh/g.Hq, bh%g.Hq
		kvh := h / g.Group()
		es, ok := est[b*g.Hkv+kvh]
		if !ok {
			es = sparge.EstimateGroup(t, q, k, b, kvh)
			est[b*g.Hkv+kvh] = es
		}
		return spargeRowWithin(es[h%g.Group()], qb, params[h], sp.Sink, gpuRow, tolQ, tolK)
	}
}

// spargeRowWithin reports whether got is row i of e's mask (CPU rule
// sparge.HeadEstimate.Mask, parameters p resolved) under some judgement of
// the blocks whose CosSim lies within tolQ (the query block) or tolK (its
// visible key blocks) of θ, each either side of θ.
func spargeRowWithin(e *sparge.HeadEstimate, i int, p sparge.Params, sink bool, got []int32, tolQ, tolK float64) error {
	if p.Theta <= 0 {
		return fmt.Errorf("the θ judge is off (θ %g): the row must equal the CPU's", p.Theta)
	}
	vis := e.Visible[i]
	qOpts := []float64{e.QSim[i]}
	if math.Abs(e.QSim[i]-p.Theta) <= tolQ {
		qOpts = []float64{p.Theta - 1, p.Theta} // non-self-similar, self-similar
	}
	var near []int
	for j := range vis {
		if math.Abs(e.KSim[j]-p.Theta) <= tolK {
			near = append(near, j)
		}
	}
	switch {
	case len(qOpts) == 1 && len(near) == 0:
		return fmt.Errorf("no CosSim of the row lies within the float32 bound (%.2g, %.2g) of θ %g", tolQ, tolK, p.Theta)
	case len(near) > spargeMaxNear:
		return fmt.Errorf("%d key blocks lie within %.2g of θ %g, more than the %d the judge enumerates", len(near), tolK, p.Theta, spargeMaxNear)
	}
	ks := slices.Clone(e.KSim)
	one := &sparge.HeadEstimate{
		QBlocks: 1, KBlocks: e.KBlocks, QSim: make([]float64, 1), KSim: ks,
		Logits: e.Logits[i*e.KBlocks : (i+1)*e.KBlocks], Visible: []int{vis}, Diag: []int{e.Diag[i]},
	}
	for _, qs := range qOpts {
		one.QSim[0] = qs
		for set := range 1 << len(near) {
			for b, j := range near {
				ks[j] = p.Theta // self-similar: a candidate
				if set>>b&1 == 1 {
					ks[j] = p.Theta - 1 // non-self-similar: a fix column
				}
			}
			if slices.Equal(one.Mask(p, sparge.MaskOptions{Sink: sink}).Row(0), got) {
				return nil
			}
		}
	}
	return fmt.Errorf("no judgement of the %d query and %d key blocks within the float32 bound of θ %g gives the device's row", len(qOpts)-1, len(near), p.Theta)
}
