package permute

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// grids covers cubes, powers of two, odd and prime sides, flat grids and
// single tokens.
var grids = []struct{ t, h, w int }{
	{1, 1, 1}, {1, 1, 7}, {1, 6, 6}, {1, 5, 9}, {2, 3, 5}, {3, 5, 7},
	{4, 4, 4}, {2, 8, 8}, {4, 6, 10}, {5, 1, 9}, {8, 16, 16}, {7, 3, 2},
}

func TestOrdersArePermutations(t *testing.T) {
	for _, g := range grids {
		for _, kind := range Kinds() {
			for _, text := range []int{0, 3} {
				for _, textFirst := range []bool{false, true} {
					spec := Spec{Kind: kind, T: g.t, H: g.h, W: g.w, Text: text, TextFirst: textFirst, Seed: 7}
					name := fmt.Sprintf("%s/%dx%dx%d/text%d/first=%v", kind, g.t, g.h, g.w, text, textFirst)
					t.Run(name, func(t *testing.T) {
						n := g.t*g.h*g.w + text
						o, err := spec.Order(n)
						if err != nil {
							t.Fatal(err)
						}
						if o.Len() != n {
							t.Fatalf("Len %d, want %d", o.Len(), n)
						}
						seen := make([]bool, n)
						for i := range n {
							j := o.Source(i)
							if j < 0 || j >= n || seen[j] {
								t.Fatalf("Source(%d) = %d repeats or is out of range", i, j)
							}
							seen[j] = true
							if o.Position(j) != i {
								t.Fatalf("Position(Source(%d)) = %d", i, o.Position(j))
							}
						}
						visLo := 0
						if textFirst {
							visLo = text
						}
						for i := range n {
							isText := i < visLo || i >= visLo+g.t*g.h*g.w
							if isText && o.Source(i) != i {
								t.Fatalf("text token %d moved to %d", o.Source(i), i)
							}
						}
						inv := o.Inverse()
						for i := range n {
							if inv.Source(o.Source(i)) != i {
								t.Fatalf("inverse does not undo position %d", i)
							}
						}
					})
				}
			}
		}
	}
}

func TestApplyRestoreRoundTrip(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
		for _, layout := range []tensor.Layout{tensor.BHND, tensor.BNHD} {
			spec := Spec{Kind: Hilbert, T: 3, H: 5, W: 7, Text: 4}
			x := testutil.Gaussian(t, r, dt, layout, tensor.Shape{B: 2, H: 3, N: spec.Len(), D: 33}, 1)
			o, err := spec.Order(spec.Len())
			if err != nil {
				t.Fatal(err)
			}
			y, err := o.Apply(ctx, x)
			if err != nil {
				t.Fatal(err)
			}
			if y.DType() != dt || y.Layout() != layout {
				t.Fatalf("Apply changed storage to %v %v", y.DType(), y.Layout())
			}
			moved := false
			for b := range 2 {
				for h := range 3 {
					for i := range spec.Len() {
						moved = moved || o.Source(i) != i
						for d := range 33 {
							if y.At(b, h, i, d) != x.At(b, h, o.Source(i), d) {
								t.Fatalf("%v %v: Apply row %d is not source row %d", dt, layout, i, o.Source(i))
							}
						}
					}
				}
			}
			if !moved {
				t.Fatal("Hilbert order on 3×5×7 moved nothing")
			}
			z, err := o.Restore(ctx, y)
			if err != nil {
				t.Fatal(err)
			}
			for b := range 2 {
				for h := range 3 {
					for i := range spec.Len() {
						for d := range 33 {
							if z.At(b, h, i, d) != x.At(b, h, i, d) {
								t.Fatalf("%v %v: Restore(Apply(x)) differs at [%d %d %d %d]", dt, layout, b, h, i, d)
							}
						}
					}
				}
			}
		}
	}
}

func manhattan(a, b Cell) int { return abs(a.T-b.T) + abs(a.H-b.H) + abs(a.W-b.W) }

// TestHilbertAdjacency checks the curve's defining property: consecutive
// cells are grid neighbours. With all sides even, or flat grids without an
// odd longer and even shorter side, that holds for every step; odd sides
// allow a few diagonal steps, whose fraction is measured and bounded.
func TestHilbertAdjacency(t *testing.T) {
	cases := []struct {
		t, h, w int
		exact   bool    // every step a neighbour
		maxJump float64 // else: the largest fraction of non-neighbour steps allowed
	}{
		{1, 1, 1, true, 0}, {1, 1, 9, true, 0}, {1, 6, 6, true, 0}, {1, 5, 9, true, 0}, {1, 31, 17, true, 0},
		{2, 2, 2, true, 0}, {4, 4, 4, true, 0}, {8, 8, 8, true, 0}, {2, 8, 8, true, 0}, {8, 16, 16, true, 0},
		{4, 6, 10, true, 0}, {6, 12, 20, true, 0}, {16, 30, 52, true, 0}, {13, 1, 9, true, 0},
		{3, 5, 7, false, 0.05}, {5, 9, 9, false, 0.05}, {7, 16, 16, false, 0.05}, {3, 3, 3, false, 0.1},
		{13, 30, 52, false, 0.05},
		// The grids of RESULTS.md: CogVideoX-2B's latent and a smaller one.
		{13, 30, 45, false, 0.05}, {13, 16, 24, false, 0.05},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%dx%d", c.t, c.h, c.w), func(t *testing.T) {
			cells := HilbertCurve(c.t, c.h, c.w)
			if len(cells) != c.t*c.h*c.w {
				t.Fatalf("%d cells, want %d", len(cells), c.t*c.h*c.w)
			}
			seen := map[Cell]bool{}
			for _, x := range cells {
				if x.T < 0 || x.T >= c.t || x.H < 0 || x.H >= c.h || x.W < 0 || x.W >= c.w || seen[x] {
					t.Fatalf("cell %+v outside the grid or repeated", x)
				}
				seen[x] = true
			}
			if cells[0] != (Cell{}) {
				t.Errorf("curve starts at %+v, want the origin", cells[0])
			}
			jumps, worst := 0, 0
			for i := 1; i < len(cells); i++ {
				if d := manhattan(cells[i-1], cells[i]); d != 1 {
					jumps++
					worst = max(worst, d)
				}
			}
			frac := 0.0
			if len(cells) > 1 {
				frac = float64(jumps) / float64(len(cells)-1)
			}
			t.Logf("%d of %d steps are not to a neighbour (%.4f), longest %d", jumps, len(cells)-1, frac, worst)
			if c.exact && jumps > 0 {
				t.Fatalf("%d non-neighbour steps on a grid that needs none", jumps)
			}
			if worst > 2 {
				t.Fatalf("a step of Manhattan length %d; odd sides should only force diagonal steps (length 2)", worst)
			}
			if frac > c.maxJump && !c.exact {
				t.Fatalf("non-neighbour fraction %.4f exceeds %.2f", frac, c.maxJump)
			}
		})
	}
}

// TestHilbertFlatAdjacency checks every flat grid up to 20×20: the curve
// steps to a neighbour every time, except for one diagonal step when the
// longer side is odd and the shorter even.
func TestHilbertFlatAdjacency(t *testing.T) {
	for h := 1; h <= 20; h++ {
		for w := 1; w <= 20; w++ {
			for _, dims := range [][3]int{{1, h, w}, {h, 1, w}, {h, w, 1}} {
				cells := HilbertCurve(dims[0], dims[1], dims[2])
				jumps := 0
				for i := 1; i < len(cells); i++ {
					if d := manhattan(cells[i-1], cells[i]); d > 2 {
						t.Fatalf("%v: step of length %d", dims, d)
					} else if d == 2 {
						jumps++
					}
				}
				long, short := max(h, w), min(h, w)
				want := 0
				if long%2 == 1 && short%2 == 0 {
					want = 1
				}
				if jumps != want {
					t.Fatalf("%v: %d diagonal steps, want %d", dims, jumps, want)
				}
			}
		}
	}
}

// TestHilbertOctants checks that on a power-of-two cube the curve is the
// classical Hilbert curve's locality: each aligned run of 8^k cells fills an
// aligned cube of side 2^k.
func TestHilbertOctants(t *testing.T) {
	const side = 8
	cells := HilbertCurve(side, side, side)
	for run := 8; run < len(cells); run *= 8 {
		sub := int(math.Round(math.Cbrt(float64(run))))
		for lo := 0; lo < len(cells); lo += run {
			first := cells[lo]
			corner := Cell{first.T / sub * sub, first.H / sub * sub, first.W / sub * sub}
			for _, c := range cells[lo : lo+run] {
				if c.T/sub*sub != corner.T || c.H/sub*sub != corner.H || c.W/sub*sub != corner.W {
					t.Fatalf("run of %d from %d leaves the %d-cube at %+v: %+v", run, lo, sub, corner, c)
				}
			}
		}
	}
}

func TestAxisOrders(t *testing.T) {
	const T, H, W = 3, 4, 5
	cases := []struct {
		kind Kind
		// fastest is the coordinate that advances by one between
		// consecutive tokens within a run of its length.
		fastest func(Cell) int
		run     int
	}{
		{RowMajor, func(c Cell) int { return c.W }, W},
		{ColumnMajor, func(c Cell) int { return c.H }, H},
		{TimeMajor, func(c Cell) int { return c.T }, T},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			o, err := Spec{Kind: c.kind, T: T, H: H, W: W}.Order(T * H * W)
			if err != nil {
				t.Fatal(err)
			}
			cell := func(i int) Cell { j := o.Source(i); return Cell{j / (H * W), j / W % H, j % W} }
			for i := range T * H * W {
				if got, want := c.fastest(cell(i)), i%c.run; got != want {
					t.Fatalf("token %d: fastest coordinate %d, want %d", i, got, want)
				}
			}
			if c.kind == RowMajor && !o.IsIdentity() {
				t.Fatal("row-major is the input order and must be the identity")
			}
		})
	}
}

func TestRandomIsSeeded(t *testing.T) {
	spec := Spec{Kind: Random, T: 2, H: 6, W: 6, Seed: 1}
	a, _ := spec.Order(spec.Len())
	b, _ := spec.Order(spec.Len())
	spec.Seed = 2
	c, _ := spec.Order(spec.Len())
	same, differs := true, false
	for i := range spec.Len() {
		same = same && a.Source(i) == b.Source(i)
		differs = differs || a.Source(i) != c.Source(i)
	}
	if !same || !differs {
		t.Fatalf("same seed equal: %v (want true); other seed differs: %v (want true)", same, differs)
	}
}

func TestSpecErrors(t *testing.T) {
	cases := []struct {
		name string
		spec Spec
		n    int
	}{
		{"unknown kind", Spec{Kind: "zigzag", T: 1, H: 2, W: 2}, 4},
		{"zero side", Spec{Kind: Hilbert, T: 0, H: 2, W: 2}, 0},
		{"negative text", Spec{Kind: Hilbert, T: 1, H: 2, W: 2, Text: -1}, 3},
		{"length mismatch", Spec{Kind: Hilbert, T: 1, H: 2, W: 2, Text: 1}, 4},
		{"huge grid", Spec{Kind: Hilbert, T: 1 << 20, H: 1 << 20, W: 2}, 4},
		{"negative n", Spec{}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.spec.Order(c.n); !errors.Is(err, ErrSpec) {
				t.Fatalf("err = %v, want ErrSpec", err)
			}
		})
	}
	o, _ := Spec{}.Order(5)
	if _, err := o.Apply(context.Background(), mustTensor(t, tensor.Shape{B: 1, H: 1, N: 4, D: 2})); !errors.Is(err, ErrSpec) {
		t.Fatalf("Apply on the wrong length: err = %v, want ErrSpec", err)
	}
	if _, err := o.Apply(context.Background(), nil); !errors.Is(err, ErrSpec) {
		t.Fatalf("Apply on nil: err = %v, want ErrSpec", err)
	}
	if k, err := ParseKind(" Hilbert "); err != nil || k != Hilbert {
		t.Fatalf("ParseKind(\" Hilbert \") = %q, %v", k, err)
	}
}

func mustTensor(t *testing.T, s tensor.Shape) *tensor.Tensor {
	t.Helper()
	x, err := tensor.New(tensor.Float32, tensor.BHND, s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestAttentionInvariance checks the reason orders are allowed at all:
// non-causal attention on reordered Q, K, V, with the output restored,
// equals attention on the original sequence.
func TestAttentionInvariance(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	cases := []struct {
		spec   Spec
		hq, hk int
		d      int
		blk    int
	}{
		{Spec{Kind: Hilbert, T: 2, H: 5, W: 6, Text: 7}, 4, 2, 32, 16},
		{Spec{Kind: Hilbert, T: 3, H: 4, W: 4, Text: 5, TextFirst: true}, 2, 2, 64, 64},
		{Spec{Kind: ColumnMajor, T: 1, H: 7, W: 9}, 2, 1, 128, 32},
		{Spec{Kind: TimeMajor, T: 4, H: 3, W: 3, Text: 2}, 3, 3, 48, 8},
		{Spec{Kind: Random, T: 2, H: 4, W: 5, Seed: 3}, 2, 1, 256, 16},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%dx%dx%d+%d", c.spec.Kind, c.spec.T, c.spec.H, c.spec.W, c.spec.Text), func(t *testing.T) {
			n := c.spec.Len()
			q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 2, H: c.hq, N: n, D: c.d}, 1)
			k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 2, H: c.hk, N: n, D: c.d}, 1)
			v := testutil.Gaussian(t, r, tensor.Float32, tensor.BNHD, tensor.Shape{B: 2, H: c.hk, N: n, D: c.d}, 1)
			want, err := reference.Attention(ctx, q, k, v, false, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			o, err := c.spec.Order(n)
			if err != nil {
				t.Fatal(err)
			}
			var in [3]*tensor.Tensor
			for i, x := range []*tensor.Tensor{q, k, v} {
				if in[i], err = o.Apply(ctx, x); err != nil {
					t.Fatal(err)
				}
			}
			g, err := tensor.Validate(in[0], in[1], in[2])
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Dense(plan.Tiling{Geometry: g, BlockQ: c.blk, BlockK: c.blk})
			if err != nil {
				t.Fatal(err)
			}
			permuted, _, err := cpu.Executor{}.Run(ctx, p, in[0], in[1], in[2], nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.Restore(ctx, permuted)
			if err != nil {
				t.Fatal(err)
			}
			// float32 executor against the float64 reference on unit
			// Gaussians: accumulated rounding stays below 1e-5 relative.
			e, err := metrics.Compare(want, metrics.Tensor{Tensor: got})
			if err != nil {
				t.Fatal(err)
			}
			if e.RelL1 > 1e-5 || e.MaxAbs > 1e-4 {
				t.Fatalf("restored output vs reference: rel L1 %.3g, max |Δ| %.3g", e.RelL1, e.MaxAbs)
			}
			// Without Restore the rows are in the wrong places: the check
			// above can fail.
			if !o.IsIdentity() {
				e, _ := metrics.Compare(want, metrics.Tensor{Tensor: permuted})
				if e.RelL1 < 0.1 {
					t.Fatalf("un-restored output matches the reference (rel L1 %.3g): the order moved nothing", e.RelL1)
				}
			}
		})
	}
}
