package cuda

import (
	"math"
	"math/rand/v2"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Case is one self-test problem: a shape, an input type and layout, and a
// plan (dense when Density is 1, else a random block mask), optionally
// with a λ filter.
type Case struct {
	Name           string
	B, Hq, Hkv     int
	Nq, Nk, D, Dv  int
	DType          tensor.DType
	Layout         tensor.Layout
	Causal         bool
	BlockQ, BlockK int
	Density        float64 // fraction of blocks kept; 1 = dense
	Lambda         float32 // λ filter when < 0
	// HeadLambda, when set, gives each query head its own λ (len Hq; −Inf
	// switches the filter off for a head), as a tuned profile does.
	HeadLambda []float32
	RowGroup   int
	Sigma      float64 // input standard deviation; 0 means 1
}

// Tolerances on Σ|GPU−CPU| / Σ|CPU|. Both compute QKᵀ and the softmax in
// float32 from the same 16-bit inputs; the GPU then rounds P̃ to the input
// type for the tensor-core P̃V product, a relative error of at most 2^-9
// (bfloat16) or 2^-12 (float16) per weight, which partly cancels over the
// sum: 1e-2 and 2e-3 leave a margin of about 3× over what is seen.
const (
	TolBF16 = 1e-2
	TolF16  = 2e-3
)

// Cases is the self-test suite: dense and block-sparse, causal and not,
// GQA, ragged and tiny N, Nq ≠ Nk on both sides, padded head dims, both
// input types and layouts, float32 inputs, and the λ filter.
func Cases() []Case {
	bf, f16, f32 := tensor.BFloat16, tensor.Float16, tensor.Float32
	bhnd, bnhd := tensor.BHND, tensor.BNHD
	return []Case{
		{Name: "dense bf16 D128", B: 1, Hq: 4, Hkv: 4, Nq: 1024, Nk: 1024, D: 128, Dv: 128, DType: bf, Layout: bhnd, BlockQ: 128, BlockK: 64, Density: 1},
		{Name: "dense bf16 D128 causal", B: 1, Hq: 4, Hkv: 4, Nq: 1024, Nk: 1024, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 1},
		{Name: "dense f16 D64 causal", B: 2, Hq: 2, Hkv: 2, Nq: 512, Nk: 512, D: 64, Dv: 64, DType: f16, Layout: bhnd, Causal: true, BlockQ: 64, BlockK: 64, Density: 1},
		{Name: "dense f16 D128 GQA", B: 1, Hq: 8, Hkv: 2, Nq: 640, Nk: 640, D: 128, Dv: 128, DType: f16, Layout: bhnd, BlockQ: 128, BlockK: 128, Density: 1},
		{Name: "ragged N=1000 D96 GQA causal", B: 1, Hq: 6, Hkv: 2, Nq: 1000, Nk: 1000, D: 96, Dv: 96, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 1},
		{Name: "Nq<Nk causal (chunked prefill)", B: 1, Hq: 4, Hkv: 4, Nq: 300, Nk: 1100, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 64, BlockK: 64, Density: 1},
		{Name: "Nq<Nk causal, BlockQ 128 (warp-specialized)", B: 1, Hq: 4, Hkv: 4, Nq: 300, Nk: 1100, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 1, Sigma: 2},
		{Name: "Nq>Nk causal (rows with no key)", B: 1, Hq: 2, Hkv: 1, Nq: 200, Nk: 90, D: 64, Dv: 64, DType: bf, Layout: bhnd, Causal: true, BlockQ: 64, BlockK: 64, Density: 1},
		{Name: "decode Nq=1", B: 2, Hq: 8, Hkv: 2, Nq: 1, Nk: 777, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 64, BlockK: 128, Density: 1},
		{Name: "tiny N=37 D32 Dv48", B: 1, Hq: 3, Hkv: 1, Nq: 37, Nk: 37, D: 32, Dv: 48, DType: bf, Layout: bhnd, Causal: true, BlockQ: 64, BlockK: 64, Density: 1},
		{Name: "BNHD layout D80", B: 2, Hq: 4, Hkv: 2, Nq: 333, Nk: 333, D: 80, Dv: 80, DType: bf, Layout: bnhd, BlockQ: 128, BlockK: 128, Density: 1},
		{Name: "BNHD bf16 D128 causal", B: 1, Hq: 4, Hkv: 4, Nq: 700, Nk: 700, D: 128, Dv: 128, DType: bf, Layout: bnhd, Causal: true, BlockQ: 128, BlockK: 64, Density: 1},
		{Name: "float32 inputs", B: 1, Hq: 2, Hkv: 2, Nq: 256, Nk: 256, D: 64, Dv: 64, DType: f32, Layout: bhnd, Causal: true, BlockQ: 64, BlockK: 64, Density: 1},
		{Name: "sparse 0.5 causal", B: 1, Hq: 4, Hkv: 2, Nq: 2048, Nk: 2048, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 128, Density: 0.5},
		{Name: "sparse 0.25 non-causal", B: 1, Hq: 4, Hkv: 4, Nq: 1500, Nk: 1500, D: 128, Dv: 128, DType: bf, Layout: bhnd, BlockQ: 64, BlockK: 64, Density: 0.25},
		{Name: "sparse 0.1 f16 causal", B: 1, Hq: 2, Hkv: 2, Nq: 2000, Nk: 2000, D: 64, Dv: 64, DType: f16, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 0.1},
		{Name: "λ filter rows 16", B: 1, Hq: 4, Hkv: 4, Nq: 1024, Nk: 1024, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 1, Lambda: -2, RowGroup: 16, Sigma: 2},
		{Name: "λ filter rows 64, ragged", B: 1, Hq: 2, Hkv: 1, Nq: 1000, Nk: 1000, D: 64, Dv: 64, DType: bf, Layout: bhnd, BlockQ: 128, BlockK: 128, Density: 0.6, Lambda: -1.5, RowGroup: 64, Sigma: 2},
		{Name: "per-head λ, GQA", B: 1, Hq: 4, Hkv: 2, Nq: 700, Nk: 700, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 1,
			HeadLambda: []float32{-1, float32(math.Inf(-1)), -3, -1.5}, RowGroup: 16, Sigma: 2},
		{Name: "λ filter rows 64, causal GQA ragged (warp-specialized)", B: 1, Hq: 8, Hkv: 2, Nq: 1500, Nk: 1500, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 0.7, Lambda: -2, RowGroup: 64, Sigma: 2},
		{Name: "per-head λ rows 64, f16 BNHD (warp-specialized)", B: 1, Hq: 4, Hkv: 2, Nq: 900, Nk: 900, D: 128, Dv: 128, DType: f16, Layout: bnhd, Causal: true, BlockQ: 128, BlockK: 128, Density: 1,
			HeadLambda: []float32{-1, float32(math.Inf(-1)), -3, -1.5}, RowGroup: 64, Sigma: 2},
		{Name: "λ filter rows 32, Q64", B: 1, Hq: 2, Hkv: 2, Nq: 900, Nk: 900, D: 128, Dv: 128, DType: f16, Layout: bhnd, Causal: true, BlockQ: 64, BlockK: 128, Density: 1, Lambda: -2, RowGroup: 32, Sigma: 2},
		// Chunked prefill under λ (issue 12): few query blocks, whose rows
		// the CPU executor once split across workers; last query blocks of
		// 44, 13 and 72 rows, so partial row groups and, at Nq=200, a
		// warpgroup with 8 rows.
		{Name: "λ filter rows 64, chunked prefill Nq=300 Nk=1100 (warp-specialized)", B: 1, Hq: 4, Hkv: 2, Nq: 300, Nk: 1100, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 1, Lambda: -1.5, RowGroup: 64, Sigma: 2},
		{Name: "λ filter rows 32, chunked prefill Nq=300 Nk=1100", B: 1, Hq: 4, Hkv: 4, Nq: 300, Nk: 1100, D: 128, Dv: 128, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 64, Density: 1, Lambda: -1.5, RowGroup: 32, Sigma: 2},
		{Name: "λ filter rows 32, chunked Nq=333 Nk=1100 Q64 f16 D64 BNHD", B: 1, Hq: 2, Hkv: 1, Nq: 333, Nk: 1100, D: 64, Dv: 64, DType: f16, Layout: bnhd, Causal: true, BlockQ: 64, BlockK: 128, Density: 0.7, Lambda: -1.5, RowGroup: 32, Sigma: 2},
		{Name: "λ filter rows 64, chunked Nq=200 Nk=1100 K128 D96 (warp-specialized)", B: 1, Hq: 2, Hkv: 2, Nq: 200, Nk: 1100, D: 96, Dv: 96, DType: bf, Layout: bhnd, Causal: true, BlockQ: 128, BlockK: 128, Density: 1, Lambda: -2, RowGroup: 64, Sigma: 2},
	}
}

// Geometry is the case's problem shape.
func (c Case) Geometry() tensor.Geometry {
	return tensor.Geometry{B: c.B, Hq: c.Hq, Hkv: c.Hkv, Nq: c.Nq, Nk: c.Nk, D: c.D, Dv: c.Dv}
}

// Plan builds the case's plan: every visible block when Density is 1,
// else each block kept with probability Density (the diagonal block of a
// causal plan, and block 0 otherwise, always kept so no row is empty).
func (c Case) Plan(r *rand.Rand) (*plan.Plan, error) {
	t := plan.Tiling{Geometry: c.Geometry(), Causal: c.Causal, BlockQ: c.BlockQ, BlockK: c.BlockK}
	var keep func(b, h, qb, kb int) bool
	if c.Density < 1 {
		keep = func(b, h, qb, kb int) bool { return kb == 0 || kb == qb || r.Float64() < c.Density }
	}
	p, err := plan.FromMask(t, keep)
	if err != nil {
		return nil, err
	}
	if c.Lambda < 0 || c.HeadLambda != nil {
		p.Filter = &plan.Filter{Lambda: c.Lambda, RowGroup: c.RowGroup, HeadLambda: c.HeadLambda}
	}
	return p, nil
}

// RandomInputs returns i.i.d. N(0, sigma²) q, k, v for the case.
func RandomInputs(r *rand.Rand, c Case, sigma float64) (q, k, v *tensor.Tensor, err error) {
	mk := func(h, n, d int) (*tensor.Tensor, error) {
		data := make([]float32, c.B*h*n*d)
		for i := range data {
			data[i] = float32(r.NormFloat64() * sigma)
		}
		t, err := tensor.FromFloat32(tensor.BHND, tensor.Shape{B: c.B, H: h, N: n, D: d}, data)
		if err != nil {
			return nil, err
		}
		return t.Convert(c.DType, c.Layout)
	}
	if q, err = mk(c.Hq, c.Nq, c.D); err != nil {
		return
	}
	if k, err = mk(c.Hkv, c.Nk, c.D); err != nil {
		return
	}
	v, err = mk(c.Hkv, c.Nk, c.Dv)
	return
}
