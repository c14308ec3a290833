// Package reference computes attention naively in float64, one query at a
// time with an explicit softmax. It is slow and simple on purpose: tests of
// every kernel and planner compare against it.
package reference

import (
	"context"
	"math"

	"github.com/sparseattn/sparseattn/tensor"
)

// Output is an attention result in float64, laid out [B, Hq, Nq, Dv].
type Output struct {
	shape tensor.Shape
	data  []float64
}

// Shape is [B, Hq, Nq, Dv].
func (o *Output) Shape() tensor.Shape { return o.shape }

// ReadRow64 copies row [b, h, n] into dst; it makes Output usable with
// metrics.Compare.
func (o *Output) ReadRow64(b, h, n int, dst []float64) { copy(dst, o.Row(b, h, n)) }

// At returns element [b, h, n, d].
func (o *Output) At(b, h, n, d int) float64 {
	s := o.shape
	return o.data[((b*s.H+h)*s.N+n)*s.D+d]
}

// Row returns the Dv elements of row [b, h, n].
func (o *Output) Row(b, h, n int) []float64 {
	s := o.shape
	i := ((b*s.H+h)*s.N + n) * s.D
	return o.data[i : i+s.D]
}

// Float32 converts the output to a float32 BHND tensor.
func (o *Output) Float32() *tensor.Tensor {
	data := make([]float32, len(o.data))
	for i, x := range o.data {
		data[i] = float32(x)
	}
	t, _ := tensor.FromFloat32(tensor.BHND, o.shape, data) // the shape came from a validated geometry
	return t
}

// Weight gives the multiplicity of key kj for query qi of head h in batch
// b: 0 masks the pair out, 1 keeps it, and w > 1 counts it w times (as a
// pooled key standing for w keys does). Nil keeps every pair.
type Weight func(b, h, qi, kj int) float64

// Attention returns softmax(scale·QKᵀ)·V in float64, with causal masking
// aligned so that the queries are the last Nq of the Nk tokens, and an
// optional extra weight per pair. A query with no visible key gets a zero
// row. Scale 0 means 1/sqrt(D).
func Attention(ctx context.Context, q, k, v *tensor.Tensor, causal bool, scale float64, weight Weight) (*Output, error) {
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		return nil, err
	}
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(g.D))
	}
	out := &Output{shape: tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.Dv}}
	out.data = make([]float64, out.shape.Len())
	logits := make([]float64, g.Nk)
	for b := range g.B {
		for h := range g.Hq {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			kh := g.KVHead(h)
			for i := range g.Nq {
				maxLogit := math.Inf(-1)
				for j := range g.Nk {
					w := 1.0
					if weight != nil {
						w = weight(b, h, i, j)
					}
					if (causal && j > i+g.QueryOffset()) || w <= 0 {
						logits[j] = math.Inf(-1)
						continue
					}
					var s float64
					for d := range g.D {
						s += float64(q.At(b, h, i, d)) * float64(k.At(b, kh, j, d))
					}
					logits[j] = s*scale + math.Log(w)
					maxLogit = math.Max(maxLogit, logits[j])
				}
				if math.IsInf(maxLogit, -1) {
					continue // fully masked: the row stays zero
				}
				var sum float64
				row := out.Row(b, h, i)
				for j, s := range logits {
					if math.IsInf(s, -1) {
						continue
					}
					p := math.Exp(s - maxLogit)
					sum += p
					for d := range row {
						row[d] += p * float64(v.At(b, kh, j, d))
					}
				}
				for d := range row {
					row[d] /= sum
				}
			}
		}
	}
	return out, nil
}
