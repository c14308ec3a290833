package plan

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

// TestMergeFilters checks the per-head merge of λ filters: nil when no
// head filters, each filtering head's own λ (a plan-wide Lambda or its
// own HeadLambda entry) and −Inf elsewhere, and an error for row groups
// that differ.
func TestMergeFilters(t *testing.T) {
	off := float32(math.Inf(-1))
	wide := &Filter{Lambda: -3, RowGroup: 16}
	perHead := &Filter{RowGroup: 16, HeadLambda: []float32{-1, -2, -5}}
	for _, tc := range []struct {
		name string
		own  []*Filter
		want *Filter
		err  error
	}{
		{"none", []*Filter{nil, nil}, nil, nil},
		{"empty", nil, nil, nil},
		{"one head", []*Filter{nil, wide, nil}, &Filter{RowGroup: 16, HeadLambda: []float32{off, -3, off}}, nil},
		{"per-head source", []*Filter{perHead, wide, perHead}, &Filter{RowGroup: 16, HeadLambda: []float32{-1, -3, -5}}, nil},
		{"row groups differ", []*Filter{wide, {Lambda: -3, RowGroup: 32}}, nil, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MergeFilters(tc.own)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
