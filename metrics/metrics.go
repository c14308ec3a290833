// Package metrics measures how far a sparse attention output is from the
// dense one, and how fast attention ran in dense-equivalent terms.
package metrics

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

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
// [B, H, N, D] array as float64. Compare calls ReadRow64 from several
// goroutines at once, so it must be safe for concurrent reads.
type Rows interface {
	Shape() tensor.Shape
	ReadRow64(b, h, n int, dst []float64)
}

// compareChunk is the rows Compare sums as one part: parts run in
// parallel, and their sums are added in row order, so the result does not
// depend on the number of CPUs.
const compareChunk = 1024

// sums are Compare's running sums over some rows.
type sums struct {
	absRef, absDiff, sqRef, sqDiff, sqGot, dot, maxAbs float64
}

// add accumulates one row pair (in locals: the compiler keeps them in
// registers, not the fields).
func (t *sums) add(r, o []float64) {
	absRef, absDiff, sqRef, sqDiff, sqGot, dot, maxAbs := t.absRef, t.absDiff, t.sqRef, t.sqDiff, t.sqGot, t.dot, t.maxAbs
	o = o[:len(r)]
	for d, x := range r {
		y := o[d]
		diff := math.Abs(x - y)
		absRef += math.Abs(x)
		absDiff += diff
		sqRef += x * x
		sqDiff += diff * diff
		sqGot += y * y
		dot += x * y
		maxAbs = max(maxAbs, diff)
	}
	*t = sums{absRef, absDiff, sqRef, sqDiff, sqGot, dot, maxAbs}
}

// merge adds the sums of other rows.
func (t *sums) merge(u sums) {
	t.absRef += u.absRef
	t.absDiff += u.absDiff
	t.sqRef += u.sqRef
	t.sqDiff += u.sqDiff
	t.sqGot += u.sqGot
	t.dot += u.dot
	t.maxAbs = max(t.maxAbs, u.maxAbs)
}

// Compare returns the errors of got against ref. Rows are read in chunks
// of compareChunk, one goroutine per CPU at most; a 128K-token output of
// 32 heads (537 M elements) takes a fraction of a second on 16 cores
// instead of seconds.
func Compare(ref, got Rows) (Errors, error) {
	s := ref.Shape()
	if got.Shape() != s {
		return Errors{}, fmt.Errorf("%w: reference %v, output %v", ErrMismatch, s, got.Shape())
	}
	rows := s.B * s.H * s.N
	parts := make([]sums, (rows+compareChunk-1)/compareChunk)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(parts)) {
		wg.Go(func() {
			r, o := make([]float64, s.D), make([]float64, s.D)
			for {
				c := int(next.Add(1)) - 1
				if c >= len(parts) {
					return
				}
				for i := c * compareChunk; i < min(rows, (c+1)*compareChunk); i++ {
					b, h, n := i/(s.H*s.N), i/s.N%s.H, i%s.N
					ref.ReadRow64(b, h, n, r)
					got.ReadRow64(b, h, n, o)
					parts[c].add(r, o)
				}
			}
		})
	}
	wg.Wait()
	var t sums
	for _, p := range parts {
		t.merge(p)
	}
	count := float64(s.Len())
	e := Errors{
		RelL1:  ratio(t.absDiff, t.absRef),
		RelL2:  ratio(math.Sqrt(t.sqDiff), math.Sqrt(t.sqRef)),
		MSE:    t.sqDiff / count,
		MAE:    t.absDiff / count,
		MaxAbs: t.maxAbs,
	}
	switch {
	case t.sqRef == 0 && t.sqGot == 0:
		e.Cosine = 1
	case t.sqRef == 0 || t.sqGot == 0:
		e.Cosine = 0
	default:
		e.Cosine = t.dot / (math.Sqrt(t.sqRef) * math.Sqrt(t.sqGot))
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
	var buf [256]float32
	row := buf[:]
	if len(dst) > len(buf) {
		row = make([]float32, len(dst))
	}
	row = row[:len(dst)]
	t.ReadRow(b, h, n, row)
	for d, v := range row {
		dst[d] = float64(v)
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
