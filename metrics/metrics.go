// Package metrics measures how far a sparse attention output is from the
// dense one, and how fast attention ran in dense-equivalent terms.
package metrics

import (
	"errors"
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/tensor"
)

// ErrMismatch reports outputs of different shapes.
var ErrMismatch = errors.New("metrics: shapes differ")

// Errors compares an approximate output O' with a reference O, element by
// element over the whole tensor, in float64.
type Errors struct {
	RelL1  float64 // Σ|O−O'| / Σ|O| (the SpargeAttn paper's L1 metric)
	RelL2  float64 // ‖O−O'‖₂ / ‖O‖₂
	MSE    float64 // mean (O−O')²
	MAE    float64 // mean |O−O'|
	Cosine float64 // ⟨O, O'⟩ / (‖O‖₂‖O'‖₂); 1 when both are zero
	MaxAbs float64 // max |O−O'|
}

// Rows is what Compare reads: anything that can produce row [b, h, n] of a
// [B, H, N, D] array as float64.
type Rows interface {
	Shape() tensor.Shape
	ReadRow64(b, h, n int, dst []float64)
}

// Compare returns the errors of got against ref.
func Compare(ref, got Rows) (Errors, error) {
	s := ref.Shape()
	if got.Shape() != s {
		return Errors{}, fmt.Errorf("%w: reference %v, output %v", ErrMismatch, s, got.Shape())
	}
	r, o := make([]float64, s.D), make([]float64, s.D)
	var sumAbsRef, sumAbsDiff, sumSqRef, sumSqDiff, sumSqGot, dot, maxAbs float64
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				ref.ReadRow64(b, h, n, r)
				got.ReadRow64(b, h, n, o)
				for d := range r {
					diff := math.Abs(r[d] - o[d])
					sumAbsRef += math.Abs(r[d])
					sumAbsDiff += diff
					sumSqRef += r[d] * r[d]
					sumSqDiff += diff * diff
					sumSqGot += o[d] * o[d]
					dot += r[d] * o[d]
					maxAbs = max(maxAbs, diff)
				}
			}
		}
	}
	count := float64(s.Len())
	e := Errors{
		RelL1:  ratio(sumAbsDiff, sumAbsRef),
		RelL2:  ratio(math.Sqrt(sumSqDiff), math.Sqrt(sumSqRef)),
		MSE:    sumSqDiff / count,
		MAE:    sumAbsDiff / count,
		MaxAbs: maxAbs,
	}
	switch {
	case sumSqRef == 0 && sumSqGot == 0:
		e.Cosine = 1
	case sumSqRef == 0 || sumSqGot == 0:
		e.Cosine = 0
	default:
		e.Cosine = dot / (math.Sqrt(sumSqRef) * math.Sqrt(sumSqGot))
	}
	return e, nil
}

// ratio is num/den, with 0/0 = 0 and x/0 = +Inf.
func ratio(num, den float64) float64 {
	if den == 0 {
		if num == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return num / den
}

// Tensor adapts a *tensor.Tensor to Rows.
type Tensor struct{ *tensor.Tensor }

// ReadRow64 reads row [b, h, n] widened to float64.
func (t Tensor) ReadRow64(b, h, n int, dst []float64) {
	for d := range dst {
		dst[d] = float64(t.At(b, h, n, d))
	}
}

// CompareTensors is Compare for two tensors.
func CompareTensors(ref, got *tensor.Tensor) (Errors, error) {
	return Compare(Tensor{ref}, Tensor{got})
}

// VisiblePairs counts the (query, key) pairs attention scores: Nq·Nk per
// head, or for causal attention only keys at or before each query's
// position (queries being the last Nq of Nk tokens), which is about half of
// a square problem.
func VisiblePairs(g tensor.Geometry, causal bool) float64 {
	per := float64(g.Nq) * float64(g.Nk)
	if causal {
		per = 0
		off := g.QueryOffset()
		for i := range g.Nq {
			per += float64(min(g.Nk, max(0, i+off+1)))
		}
	}
	return per * float64(g.B*g.Hq)
}

// DenseFLOPs is the arithmetic of dense attention: 2·D for QKᵀ plus 2·Dv for
// PV per visible pair. For D = Dv this is 4·B·H·Nq·Nk·D, halved (to within
// 1/N) for causal attention.
func DenseFLOPs(g tensor.Geometry, causal bool) float64 {
	return VisiblePairs(g, causal) * 2 * float64(g.D+g.Dv)
}

// TOPS is dense-equivalent throughput in tera-operations per second: the
// dense FLOPs divided by the elapsed seconds, which must include the time
// spent predicting the sparse plan.
func TOPS(g tensor.Geometry, causal bool, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return DenseFLOPs(g, causal) / seconds / 1e12
}
