package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestCheckFinite: with CheckFinite, Run rejects a NaN, +Inf or -Inf put
// anywhere in q, k or v — first, middle or last element, in every storage
// type and layout — with the *tensor.NonFiniteError that
// tensor.CheckFiniteAll gives, whatever the plan reads: the dense plan
// (keys packed, or read in place in decode), a sparse plan that skips
// blocks (checked at the end), and a plan with token orders (gathered).
// Finite inputs give the output of a run without the check.
func TestCheckFinite(t *testing.T) {
	r := testutil.Rand(t)
	probs := []problem{
		{"prefill", 1, 2, 1, 70, 70, 32, 32, 16, 16, true, tensor.Float32, tensor.BHND},
		{"decode-gqa", 2, 4, 2, 1, 150, 64, 64, 32, 32, true, tensor.Float32, tensor.BHND},
		{"chunk-bnhd", 1, 2, 2, 3, 90, 48, 40, 16, 16, true, tensor.Float32, tensor.BNHD},
		{"f16-decode", 1, 2, 2, 1, 80, 32, 32, 16, 16, true, tensor.Float16, tensor.BHND},
		{"bf16-bnhd", 1, 2, 1, 40, 40, 32, 32, 16, 16, false, tensor.BFloat16, tensor.BNHD},
		{"f16-bnhd-decode", 1, 2, 1, 1, 64, 32, 32, 16, 16, true, tensor.Float16, tensor.BNHD},
		{"bf16-chunk", 1, 1, 1, 2, 50, 32, 32, 16, 16, true, tensor.BFloat16, tensor.BHND},
	}
	plans := map[string]func(tl plan.Tiling) (*plan.Plan, error){
		"dense": plan.Dense,
		"sparse": func(tl plan.Tiling) (*plan.Plan, error) { // only the first block of each row
			return plan.FromMask(tl, func(b, h, qb, kb int) bool { return kb == 0 })
		},
		"ordered": func(tl plan.Tiling) (*plan.Plan, error) { // every block, keys reversed (non-causal)
			d, err := plan.Dense(tl)
			if err != nil {
				return nil, err
			}
			o := &plan.TokenOrder{KVStart: []int{0, tl.Geometry.Nk}, RowKV: make([]int32, d.Rows())}
			for j := tl.Geometry.Nk - 1; j >= 0; j-- {
				o.KV = append(o.KV, int32(j))
			}
			bld, _ := plan.NewBuilder(tl)
			for row := range d.Rows() {
				for kb := range d.KBlocks() {
					bld.Add(row, kb, plan.Full)
				}
			}
			bld.SetOrder(o)
			return bld.Build()
		},
	}
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for _, pr := range probs {
		for _, name := range []string{"dense", "sparse", "ordered"} {
			t.Run(pr.name+"/"+name, func(t *testing.T) {
				q, k, v := pr.inputs(t, r)
				tl := pr.tiling()
				if name == "ordered" {
					tl.Causal = false
				}
				p, err := plans[name](tl)
				if err != nil {
					t.Fatal(err)
				}
				want, _, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, _, err := Executor{CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
				if err != nil {
					t.Fatalf("finite inputs: %v", err)
				}
				if !slices.Equal(got.Float32s(), want.Float32s()) {
					t.Fatal("the check changed the output")
				}
				for ti, x := range []*tensor.Tensor{q, k, v} {
					s := x.Shape()
					for _, at := range [][4]int{{0, 0, 0, 0}, {s.B / 2, s.H / 2, s.N / 2, s.D / 2}, {s.B - 1, s.H - 1, s.N - 1, s.D - 1}} {
						for _, val := range bad {
							old := x.At(at[0], at[1], at[2], at[3])
							x.Set(at[0], at[1], at[2], at[3], val)
							_, _, err := Executor{CheckFinite: true}.Run(context.Background(), p, q, k, v, nil)
							x.Set(at[0], at[1], at[2], at[3], old)
							what := fmt.Sprintf("%s = %v at %v", "qkv"[ti:ti+1], val, at)
							var nf *tensor.NonFiniteError
							if !errors.As(err, &nf) || !errors.Is(err, tensor.ErrNonFinite) {
								t.Fatalf("%s: got %v, want a NonFiniteError", what, err)
							}
							if nf.Name != "qkv"[ti:ti+1] || [4]int{nf.B, nf.H, nf.N, nf.D} != at {
								t.Fatalf("%s: error names %s at (%d,%d,%d,%d)", what, nf.Name, nf.B, nf.H, nf.N, nf.D)
							}
						}
					}
				}
			})
		}
	}
}
