// Package sparge implements SpargeAttn's planner (Zhang et al., 2025,
// "SpargeAttn: Accurate Sparse Attention Accelerating Any Model
// Inference"): selective token compression predicts which blocks of the
// attention map matter (§3.2), and the sparse warp online softmax skips
// further P̃V products inside the executor (§3.4, the plan's λ filter).
//
// The predictor runs in two stages. The expensive estimate (EstimateGroup)
// pools each query and key block to its mean token, measures each block's
// self-similarity (CosSim) and computes the compressed logits q̄·k̄ᵀ; it does
// not depend on any hyperparameter. The cheap mask stage (HeadEstimate.Mask)
// applies the θ judge, the compressed softmax, TopCdf(τ) or top-k, and the
// fix blocks. The tuner (package tune) computes the estimate once per input
// and head and re-runs only the mask stage for every (τ, θ) it tries.
//
// Beyond the paper and its reference code: masks are per query head under
// GQA, with the key side pooled once per KV head; causal rows only consider,
// and top-k budgets only count, causally visible blocks, and always keep
// the diagonal blocks so that no query loses every key (inside them the
// executor masks token-exactly); any block size, head dimension and
// sequence length works, decode (Nq = 1) and Nq ≠ Nk included.
//
// Planner plugs into sparseattn.Attention, the one-call entry point, and
// the CLI:
//
//	res, err := sparseattn.Attention(ctx, q, k, v, sparseattn.Options{
//		Causal: true, Planner: sparge.Planner{Params: sparge.Params{CDF: 0.95}}})
package sparge

import (
	"context"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// ErrParams reports an out-of-range hyperparameter. It wraps
// plan.ErrInvalid, the sentinel of every planner's bad settings.
var ErrParams = heads.Sentinel("sparge: bad hyperparameter")

// Defaults. DefaultCDF is the TopCdf τ of the zero Params, which the CLI
// runs by default (sparseattn eval and compare); DefaultTopK is the
// reference implementation's recommended top-k ("topk=0.5"), which the CLI
// runs for --sparge-cdf 0 without --sparge-topk; DefaultTheta judges a
// block non-self-similar when its tokens' mean pairwise cosine is below
// 0.3.
//
// DefaultCDF is a share of predicted mass, so the kept share of blocks
// falls as attention concentrates with N, where top-k keeps half of every
// row at any N. On the real LM workload at 4K (64×64 blocks) it reaches
// sparsity 0.58 at rel L1 0.028 where top-k 0.5 reaches 0.37 at 0.025,
// and τ 0.9 overshoots (0.054); on the synthetic llm workload it keeps the
// planted needle at 1K, 4K, 16K and 32K tokens, which top-k 0.5 loses at
// 4K, but not fully at 8K (cosine 0.45): a lone key barely moves its
// block's mean (RESULTS.md).
const (
	DefaultCDF   = 0.95
	DefaultTopK  = 0.5
	DefaultTheta = 0.3
)

// PaperBlockQ and PaperBlockK are the paper's tile, b_q = 128 and
// b_k = 64, at which its kernels run and "sparseattn tune" tunes by
// default. They are not a default of this package: the planner plans at
// whatever tiling it is given, and sparseattn.Attention's default tiling is
// sparseattn.DefaultBlockQ×DefaultBlockK.
const (
	PaperBlockQ = 128
	PaperBlockK = 64
)

// Params are one query head's hyperparameters.
type Params struct {
	// CDF is τ in (0, 1]: each row keeps the fewest most probable blocks
	// whose predicted mass reaches τ (TopCdf). 0 means DefaultCDF, unless
	// TopK is set.
	CDF float64
	// TopK, when set, selects top-k mode (CDF must then be 0): the
	// fraction in (0, 1] of each row's causally visible blocks kept. Top-k
	// has no zero default; the reference's is DefaultTopK.
	TopK float64
	// Theta is θ in [-1, 1]: blocks whose CosSim is below θ are
	// non-self-similar, excluded from the prediction and always computed.
	// 0 means DefaultTheta; a negative θ switches the judge off.
	Theta float64
	// Lambda is λ < 0 of the sparse warp online softmax: a row group skips
	// P̃V when max(m_local − m) < λ, where m are row maxima of the scaled
	// logits, so every skipped weight is below e^λ of its row's running
	// max. 0 switches the filter off.
	Lambda float64
}

// Validate checks the ranges and says which one is wrong.
func (p Params) Validate() error {
	switch {
	case math.IsNaN(p.CDF) || p.CDF < 0 || p.CDF > 1:
		return fmt.Errorf("%w: CDF τ=%v must be in (0, 1] (0: %v, or top-k mode when TopK is set)", ErrParams, p.CDF, DefaultCDF)
	case math.IsNaN(p.TopK) || p.TopK < 0 || p.TopK > 1:
		return fmt.Errorf("%w: TopK %v must be in (0, 1] (0: TopCdf mode)", ErrParams, p.TopK)
	case p.CDF > 0 && p.TopK > 0:
		return fmt.Errorf("%w: set CDF τ=%v or TopK %v, not both", ErrParams, p.CDF, p.TopK)
	case math.IsNaN(p.Theta) || p.Theta < -1 || p.Theta > 1:
		return fmt.Errorf("%w: θ=%v must be in [-1, 1] (negative: no judge; 0: %v)", ErrParams, p.Theta, DefaultTheta)
	case math.IsNaN(p.Lambda) || p.Lambda > 0 || math.IsInf(p.Lambda, 0) || p.Lambda < -math.MaxFloat32:
		return fmt.Errorf("%w: λ=%v must be negative and finite (0: no filter)", ErrParams, p.Lambda)
	}
	return nil
}

// resolve fills the defaults: CDF when neither mode is set, θ when 0.
func (p Params) resolve() Params {
	if p.CDF == 0 && p.TopK == 0 {
		p.CDF = DefaultCDF
	}
	if p.Theta == 0 {
		p.Theta = DefaultTheta
	}
	return p
}

// Planner is SpargeAttn's block-mask predictor. The zero value predicts
// with the defaults (TopCdf τ = DefaultCDF, θ = DefaultTheta, no λ
// filter), what the CLI runs. It is safe for concurrent use.
type Planner struct {
	// Params apply to every query head without an entry in Heads.
	Params
	// Heads, when non-nil, gives each query head its own hyperparameters
	// (len Hq), as a tuned profile does; it overrides Params.
	Heads []Params
	// RowGroup is the number of query rows that share one λ decision, b_q/c_w
	// in the paper; it must divide BlockQ. 0 means BlockQ/4 (4 warps per
	// block, as the reference kernels use), or the largest divisor of BlockQ
	// below that. On Hopper GPUs a row group of 64 with BlockQ 128 (one
	// consumer warpgroup) runs λ plans on the warp-specialized kernel,
	// other row groups on the mma.sync kernel, about 1.5× slower at 32K
	// (BENCHMARKS.md, "λ filter on the warp-specialized kernel").
	RowGroup int
	// Sink always keeps key block 0, the attention-sink tokens.
	Sink bool
}

// Name returns "sparge".
func (p Planner) Name() string { return "sparge" }

// headParams returns the resolved hyperparameters of each query head.
func (p Planner) headParams(hq int) ([]Params, error) {
	if p.Heads != nil && len(p.Heads) != hq {
		return nil, fmt.Errorf("%w: %d per-head parameter sets for %d query heads", ErrParams, len(p.Heads), hq)
	}
	out := make([]Params, hq)
	for h := range out {
		hp := p.Params
		if p.Heads != nil {
			hp = p.Heads[h]
		}
		if err := hp.Validate(); err != nil {
			if p.Heads != nil {
				return nil, fmt.Errorf("head %d: %w", h, err)
			}
			return nil, err
		}
		out[h] = hp.resolve()
	}
	return out, nil
}

// HeadParams returns the hyperparameters of each of hq query heads as Plan
// uses them: Heads (or Params for every head) checked, defaults filled in.
// The device planner (package cuda) reads them.
func (p Planner) HeadParams(hq int) ([]Params, error) { return p.headParams(hq) }

// Header returns the plan-wide part of Plan's plans for tiling t: the
// tiling and the λ filter, with no rows. It checks the hyperparameters as
// Plan does; the device planner (package cuda) starts from it.
func (p Planner) Header(t plan.Tiling) (*plan.Plan, error) {
	params, err := p.headParams(t.Geometry.Hq)
	if err != nil {
		return nil, err
	}
	filter, err := p.filter(t, params)
	if err != nil {
		return nil, err
	}
	return &plan.Plan{Tiling: t, Filter: filter}, nil
}

// rowGroup resolves RowGroup for block height bq.
func (p Planner) rowGroup(bq int) (int, error) {
	if p.RowGroup < 0 || (p.RowGroup > 0 && bq%p.RowGroup != 0) {
		return 0, fmt.Errorf("%w: row group %d must divide the query block %d", ErrParams, p.RowGroup, bq)
	}
	if p.RowGroup > 0 {
		return p.RowGroup, nil
	}
	g := max(bq/4, 1)
	for bq%g != 0 {
		g--
	}
	return g, nil
}

// Plan predicts the block mask of every query head and attaches the λ
// filter when some head has one.
func (p Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	bld, err := plan.NewBuilder(t) // checks the tiling
	if err != nil {
		return nil, err
	}
	params, err := p.headParams(t.Geometry.Hq)
	if err != nil {
		return nil, err
	}
	filter, err := p.filter(t, params)
	if err != nil {
		return nil, err
	}
	masks, err := p.masks(ctx, t, q, k, params)
	if err != nil {
		return nil, err
	}
	return assemble(bld, t, masks, filter)
}

// Assemble builds the plan of precomputed masks, one per (batch, query
// head) at index b·Hq + h, with the λ filter of p's parameters. It is the
// cheap tail of Plan, for callers such as the tuner that keep estimates
// and derive masks themselves.
func (p Planner) Assemble(t plan.Tiling, masks []*HeadMask) (*plan.Plan, error) {
	bld, err := plan.NewBuilder(t)
	if err != nil {
		return nil, err
	}
	g := t.Geometry
	if len(masks) != g.B*g.Hq {
		return nil, fmt.Errorf("%w: %d masks for B·Hq = %d heads", plan.ErrInvalid, len(masks), g.B*g.Hq)
	}
	params, err := p.headParams(g.Hq)
	if err != nil {
		return nil, err
	}
	filter, err := p.filter(t, params)
	if err != nil {
		return nil, err
	}
	return assemble(bld, t, masks, filter)
}

func assemble(bld *plan.Builder, t plan.Tiling, masks []*HeadMask, filter *plan.Filter) (*plan.Plan, error) {
	g := t.Geometry
	nqb := (g.Nq + t.BlockQ - 1) / t.BlockQ
	for bh, m := range masks {
		if len(m.RowStart) != nqb+1 {
			return nil, fmt.Errorf("%w: mask %d has %d rows, the tiling %d query blocks", plan.ErrInvalid, bh, len(m.RowStart)-1, nqb)
		}
		for i := range nqb {
			r := bh*nqb + i
			for _, kb := range m.Row(i) {
				bld.Add(r, int(kb), plan.Full)
			}
		}
	}
	bld.SetFilter(filter)
	return bld.Build()
}

// filter returns the plan's λ filter, or nil when no head has one.
func (p Planner) filter(t plan.Tiling, params []Params) (*plan.Filter, error) {
	some, same := false, true
	for _, hp := range params {
		some = some || hp.Lambda < 0
		same = same && hp.Lambda == params[0].Lambda
	}
	if !some {
		return nil, nil
	}
	rg, err := p.rowGroup(t.BlockQ)
	if err != nil {
		return nil, err
	}
	if same {
		return &plan.Filter{Lambda: float32(params[0].Lambda), RowGroup: rg}, nil
	}
	f := &plan.Filter{RowGroup: rg, HeadLambda: make([]float32, len(params))}
	for h, hp := range params {
		f.HeadLambda[h] = float32(math.Inf(-1)) // no filter for this head
		if hp.Lambda < 0 {
			f.HeadLambda[h] = float32(hp.Lambda)
		}
	}
	return f, nil
}

// masks predicts M_g for every (batch, query head), index b·Hq + h,
// one GQA group per task.
func (p Planner) masks(ctx context.Context, t plan.Tiling, q, k *tensor.Tensor, params []Params) ([]*HeadMask, error) {
	g, err := checkInputs(t, q, k)
	if err != nil {
		return nil, err
	}
	masks := make([]*HeadMask, g.B*g.Hq)
	err = heads.ForEach(ctx, g.B*g.Hkv, func(i int) {
		b, kvh := i/g.Hkv, i%g.Hkv
		for gi, e := range EstimateGroup(t, q, k, b, kvh) {
			h := kvh*g.Group() + gi
			masks[b*g.Hq+h] = e.Mask(params[h], MaskOptions{Sink: p.Sink})
		}
	})
	if err != nil {
		return nil, err
	}
	return masks, nil
}

// checkInputs validates q and k against the tiling.
func checkInputs(t plan.Tiling, q, k *tensor.Tensor) (tensor.Geometry, error) {
	g := t.Geometry
	if q == nil || k == nil {
		return g, fmt.Errorf("%w: sparge needs q and k", tensor.ErrShape)
	}
	qs, ks := q.Shape(), k.Shape()
	if qs != (tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.D}) || ks != (tensor.Shape{B: g.B, H: g.Hkv, N: g.Nk, D: g.D}) {
		return g, fmt.Errorf("%w: q %v and k %v do not match the tiling's geometry %+v", tensor.ErrShape, qs, ks, g)
	}
	return g, nil
}
