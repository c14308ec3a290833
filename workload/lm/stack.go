package lm

import (
	"fmt"

	"github.com/sparseattn/sparseattn/tensor"
)

// Stacked returns the captured Q, K and V of every layer as one attention
// problem: q is [1, Layers·Heads, N, HeadDim] and k, v are [1,
// Layers·KVHeads, N, HeadDim], float32 BHND, layer after layer, so query
// head l·Heads+h reads KV head l·KVHeads+h/(Heads/KVHeads) exactly as in
// the model. Causal attention over them reproduces every layer's
// attention at once. It returns an error wrapping ErrInput unless the
// pass was run with Options.Capture.
func (p *Pass) Stacked() (q, k, v *tensor.Tensor, err error) {
	if len(p.Layers) == 0 || p.Layers[0].Q == nil {
		return nil, nil, nil, fmt.Errorf("%w: Stacked needs a pass run with Options.Capture", ErrInput)
	}
	stack := func(get func(Layer) *tensor.Tensor) (*tensor.Tensor, error) {
		s := get(p.Layers[0]).Shape()
		s.H *= len(p.Layers)
		out, err := tensor.New(tensor.Float32, tensor.BHND, s)
		if err != nil {
			return nil, err
		}
		h0 := 0
		for _, l := range p.Layers {
			t := get(l)
			for h := range t.Shape().H {
				for n := range s.N {
					t.ReadRow(0, h, n, out.Float32s()[out.RowOffset(0, h0+h, n):])
				}
			}
			h0 += t.Shape().H
		}
		return out, nil
	}
	if q, err = stack(func(l Layer) *tensor.Tensor { return l.Q }); err != nil {
		return nil, nil, nil, err
	}
	if k, err = stack(func(l Layer) *tensor.Tensor { return l.K }); err != nil {
		return nil, nil, nil, err
	}
	if v, err = stack(func(l Layer) *tensor.Tensor { return l.V }); err != nil {
		return nil, nil, nil, err
	}
	return q, k, v, nil
}
