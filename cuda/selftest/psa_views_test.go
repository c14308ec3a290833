package selftest

import (
	"context"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestPsaViews checks the psa device planner against the CPU planner on
// input views psa_score reads in place (PSA_DIRECT: a dense BNHD layout,
// and the Q and K heads of a fused [B, N, Hq+2·Hkv, D] QKV buffer) and on
// ones it must not (rows of D+1 elements starting one element in: not
// 16-byte aligned, so psa_gather copies them first). Plans must match row
// for row but for psa's level judge (psaTieBreak).
func TestPsaViews(t *testing.T) {
	e := openEngine(t)
	r := testutil.Rand(t)
	ctx := context.Background()
	const bf = tensor.BFloat16
	g := tensor.Geometry{B: 2, Hq: 8, Hkv: 2, Nq: 1000, Nk: 1000, D: 128, Dv: 128}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	shape := func(h int) tensor.Shape { return tensor.Shape{B: g.B, H: h, N: g.Nk, D: g.D} }
	q := testutil.Gaussian(t, r, bf, tensor.BHND, shape(g.Hq), 1)
	k := testutil.Gaussian(t, r, bf, tensor.BHND, shape(g.Hkv), 1)
	v := testutil.Gaussian(t, r, bf, tensor.BHND, shape(g.Hkv), 1)
	// relayout copies x into a new host tensor of shape s and layout l,
	// each row doff elements in.
	relayout := func(x *tensor.Tensor, l tensor.Layout, s tensor.Shape, doff int) *tensor.Tensor {
		y, err := tensor.New(bf, l, s)
		if err != nil {
			t.Fatal(err)
		}
		row, out := make([]float32, g.D), make([]float32, s.D)
		xs := x.Shape()
		for b := range xs.B {
			for h := range xs.H {
				for n := range xs.N {
					x.ReadRow(b, h, n, row)
					copy(out[doff:], row)
					y.WriteRow(b, h, n, out)
				}
			}
		}
		return y
	}
	upload := func(h *tensor.Tensor) *cuda.Tensor {
		d, err := e.Upload(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Free() })
		return d
	}
	views := map[string]func() [3]*cuda.Tensor{
		"dense BNHD": func() [3]*cuda.Tensor {
			var d [3]*cuda.Tensor
			for i, x := range []*tensor.Tensor{q, k, v} {
				d[i] = upload(relayout(x, tensor.BNHD, x.Shape(), 0))
			}
			return d
		},
		"fused QKV heads": func() [3]*cuda.Tensor {
			s := shape(g.Hq + 2*g.Hkv)
			f, err := tensor.New(bf, tensor.BNHD, s)
			if err != nil {
				t.Fatal(err)
			}
			row := make([]float32, g.D)
			for i, x := range []*tensor.Tensor{q, k, v} {
				hoff := []int{0, g.Hq, g.Hq + g.Hkv}[i]
				xs := x.Shape()
				for b := range xs.B {
					for h := range xs.H {
						for n := range xs.N {
							x.ReadRow(b, h, n, row)
							f.WriteRow(b, h+hoff, n, row)
						}
					}
				}
			}
			dev := upload(f)
			var d [3]*cuda.Tensor
			for i, hs := range [][2]int{{0, g.Hq}, {g.Hq, g.Hq + g.Hkv}, {g.Hq + g.Hkv, g.Hq + 2*g.Hkv}} {
				if d[i], err = dev.Heads(hs[0], hs[1]); err != nil {
					t.Fatal(err)
				}
			}
			return d
		},
		"misaligned rows of D+1": func() [3]*cuda.Tensor {
			var d [3]*cuda.Tensor
			for i, x := range []*tensor.Tensor{q, k, v} {
				s := x.Shape()
				s.D = g.D + 1
				dev := upload(relayout(x, tensor.BHND, s, 1))
				st := cuda.Strides{B: int64(s.H * s.N * s.D), H: int64(s.N * s.D), N: int64(s.D)}
				w, err := e.Wrap(dev.Ptr()+2, bf, x.Shape(), st, dev.Stream())
				if err != nil {
					t.Fatal(err)
				}
				d[i] = w
			}
			return d
		},
	}
	for _, p := range []psa.Planner{{Scale: psa.DefaultScale}, {Rule: psa.Quantile, SampleQ: 13, SampleK: 5, Seed: 0x5eed, Scale: 1}} {
		want, err := p.Plan(ctx, tl, q, k, v)
		if err != nil {
			t.Fatal(err)
		}
		judge := psaTieBreak(p, tl, q, k)
		for _, name := range []string{"dense BNHD", "fused QKV heads", "misaligned rows of D+1"} {
			t.Run(caseName(p)+"/"+name, func(t *testing.T) {
				d := views[name]()
				run, err := e.NewRunner(ctx, tl, bf, p)
				if err != nil {
					t.Fatal(err)
				}
				defer run.Close()
				if _, err := run.Plan(ctx, d[0], d[1], d[2]); err != nil {
					t.Fatal(err)
				}
				got, err := run.DownloadPlan(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tied := 0
				for row := range want.Rows() {
					a, la := want.Entries(row)
					b, lb := got.Entries(row)
					if slices.Equal(a, b) && sameLevels(la, lb, len(a)) {
						continue
					}
					if lb == nil {
						lb = slices.Repeat([]plan.Level{plan.Full}, len(b))
					}
					if err := judge(ctx, row, b, lb); err != nil {
						t.Fatalf("row %d: device %v %v, CPU %v %v: %v", row, b, lb, a, la, err)
					}
					tied++
				}
				t.Logf("rows %d, tie-break %d", want.Rows(), tied)
			})
		}
	}
}
