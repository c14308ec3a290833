package tensor

import "fmt"

// MaxHeadDim is the largest head dimension sparseattn accepts.
const MaxHeadDim = 1024

// Geometry is the validated shape of one attention problem: Q is
// [B, Hq, Nq, D], K is [B, Hkv, Nk, D] and V is [B, Hkv, Nk, Dv]. Hkv divides
// Hq (grouped-query attention); query head h reads KV head h/(Hq/Hkv).
type Geometry struct {
	B   int `json:"b"`
	Hq  int `json:"hq"`
	Hkv int `json:"hkv"`
	Nq  int `json:"nq"`
	Nk  int `json:"nk"`
	D   int `json:"d"`
	Dv  int `json:"dv"`
}

// Group is the number of query heads that share one KV head.
func (g Geometry) Group() int { return g.Hq / g.Hkv }

// KVHead maps query head h to the KV head it reads.
func (g Geometry) KVHead(h int) int { return h / g.Group() }

// QueryOffset is the position of query 0 in the key sequence when the queries
// are the last Nq tokens of an Nk-token sequence, as in chunked prefill and
// decode. Causal masking lets query i see keys 0..QueryOffset()+i.
func (g Geometry) QueryOffset() int { return g.Nk - g.Nq }

// Validate checks that q, k and v form an attention problem and returns its
// geometry. The errors wrap ErrShape and say which axis disagrees.
func Validate(q, k, v *Tensor) (Geometry, error) {
	if q == nil || k == nil || v == nil {
		return Geometry{}, fmt.Errorf("%w: q, k and v must all be non-nil", ErrShape)
	}
	for _, x := range []struct {
		name string
		t    *Tensor
	}{{"q", q}, {"k", k}, {"v", v}} {
		if err := checkHeader(x.t.dtype, x.t.layout, x.t.shape); err != nil {
			return Geometry{}, fmt.Errorf("%s: %w (build tensors with New, FromFloat32 or FromBits16)", x.name, err)
		}
	}
	qs, ks, vs := q.Shape(), k.Shape(), v.Shape()
	g := Geometry{B: qs.B, Hq: qs.H, Hkv: ks.H, Nq: qs.N, Nk: ks.N, D: qs.D, Dv: vs.D}
	switch {
	case ks.B != qs.B || vs.B != qs.B:
		return g, fmt.Errorf("%w: batch sizes differ: q %d, k %d, v %d", ErrShape, qs.B, ks.B, vs.B)
	case ks.D != qs.D:
		return g, fmt.Errorf("%w: q and k head dims differ: %d vs %d", ErrShape, qs.D, ks.D)
	case vs.H != ks.H:
		return g, fmt.Errorf("%w: k has %d heads but v has %d", ErrShape, ks.H, vs.H)
	case vs.N != ks.N:
		return g, fmt.Errorf("%w: k has %d tokens but v has %d", ErrShape, ks.N, vs.N)
	case qs.H%ks.H != 0:
		return g, fmt.Errorf("%w: %d query heads is not a multiple of %d KV heads (GQA needs Hq %% Hkv == 0)", ErrShape, qs.H, ks.H)
	case qs.D > MaxHeadDim || vs.D > MaxHeadDim:
		return g, fmt.Errorf("%w: head dim %d/%d exceeds %d", ErrShape, qs.D, vs.D, MaxHeadDim)
	}
	return g, nil
}
