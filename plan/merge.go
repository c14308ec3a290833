package plan

import (
	"fmt"
	"math"
)

// MergeFilters is the λ filter of a plan whose query head h takes its rows
// from a plan with filter own[h] (nil: none), as a per-head choice of
// methods (package method/auto) merges plans: per-head λ, each head's own
// λ (Filter.LambdaFor) where its plan filters and −Inf (off) where it does
// not, or nil when no head's plan filters. The filters must share one row
// group, else the error wraps ErrInvalid.
func MergeFilters(own []*Filter) (*Filter, error) {
	var out *Filter
	for h, f := range own {
		if f == nil {
			continue
		}
		if out == nil {
			out = &Filter{RowGroup: f.RowGroup, HeadLambda: make([]float32, len(own))}
			for i := range out.HeadLambda {
				out.HeadLambda[i] = float32(math.Inf(-1))
			}
		}
		if f.RowGroup != out.RowGroup {
			return nil, fmt.Errorf("%w: λ filters with row groups %d and %d", ErrInvalid, out.RowGroup, f.RowGroup)
		}
		out.HeadLambda[h] = f.LambdaFor(h)
	}
	return out, nil
}
