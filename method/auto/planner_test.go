package auto

import (
	"context"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// mixes are per-head choices the merge test cycles through, so that every
// method lands on some head of some shape, next to other methods.
var mixes = []Head{
	{Method: "sparge", Knob: 0.9, Lambda: -3},
	{Method: "psa", Knob: 1},
	{Method: "window", Knob: 32},
	{Method: Dense},
	{Method: "sparge+psa", Knob: 0.7},
	{Method: "xattn", Knob: 0.9},
	{Method: "unisparse", Knob: 0.9},
	{Method: "flexprefill", Knob: 0.9},
	{Method: "minference", Knob: 0.02},
	{Method: "xattn+psa", Knob: 0.6},
	{Method: "sparge", Knob: 0.8}, // a second sparge knob, without λ
}

// TestPlannerMerge checks, on the awkward shapes (ragged N, GQA, causal
// and not, Nq ≠ Nk), that the merged plan equals each method's own plan
// on that method's heads (rows, levels and λ), that running it gives each
// head the output its own method's plan gives (within 4e-6 of the
// output's scale: the same float32 kernels, but a merged plan that holds
// another head's λ filter sends every head's P̃V through the row-group
// path, and diagonal blocks then sum in another order than the unfiltered
// plan's; a seed gave 1.07e-6 on unit-scale outputs), and that heads
// with binary plans and no λ match the float64 reference with their mask
// as weight within 1e-4 (float32 accumulation over at most 130 keys of
// unit-variance values).
func TestPlannerMerge(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	for si, s := range plantest.Select(plantest.Awkward()) {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 2, 2)
			heads := make([]Head, s.Hq)
			for h := range heads {
				heads[h] = mixes[(si*3+h)%len(mixes)]
			}
			merged, err := Planner{Heads: heads}.Plan(ctx, pr.Tiling, pr.Q, pr.K, pr.V)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := plantest.Run(t, merged, pr.Q, pr.K, pr.V)
			binary := map[int]bool{}
			for h, hd := range heads {
				pl, err := NewMethod(hd.Method, hd.Knob, hd.Lambda)
				if err != nil {
					t.Fatal(err)
				}
				own, err := pl.Plan(ctx, pr.Tiling, pr.Q, pr.K, pr.V)
				if err != nil {
					t.Fatal(err)
				}
				pooled := false
				for b := range s.B {
					for qb := range own.QBlocks() {
						ro, rm := own.Row(b, h, qb), merged.Row(b, h, qb)
						no, nm := own.RowStart[ro+1]-own.RowStart[ro], merged.RowStart[rm+1]-merged.RowStart[rm]
						if no != nm {
							t.Fatalf("head %d (%s) b %d qb %d: %d entries merged, %d in its own plan", h, hd.Method, b, qb, nm, no)
						}
						for i := range no {
							io, im := own.RowStart[ro]+i, merged.RowStart[rm]+i
							if own.KVBlock[io] != merged.KVBlock[im] || own.LevelAt(io) != merged.LevelAt(im) {
								t.Fatalf("head %d (%s) row %d entry %d: merged %d@%d, own %d@%d", h, hd.Method, rm, i,
									merged.KVBlock[im], merged.LevelAt(im), own.KVBlock[io], own.LevelAt(io))
							}
							pooled = pooled || own.LevelAt(io) > plan.Full
						}
					}
				}
				wantL, gotL := float32(math.Inf(-1)), float32(math.Inf(-1))
				if own.Filter != nil {
					wantL = own.Filter.LambdaFor(h)
				}
				if merged.Filter != nil {
					gotL = merged.Filter.LambdaFor(h)
					if own.Filter != nil && own.Filter.RowGroup != merged.Filter.RowGroup {
						t.Fatalf("row group %d merged, %d own", merged.Filter.RowGroup, own.Filter.RowGroup)
					}
				}
				if wantL != gotL {
					t.Fatalf("head %d (%s): λ %v merged, %v own", h, hd.Method, gotL, wantL)
				}
				ownOut, _ := plantest.Run(t, own, pr.Q, pr.K, pr.V)
				for b := range s.B {
					for n := range s.Nq {
						for d := range s.D {
							want := float64(ownOut.At(b, h, n, d))
							if diff := math.Abs(float64(out.At(b, h, n, d)) - want); diff > 4e-6*max(1, math.Abs(want)) {
								t.Fatalf("head %d (%s) [%d,%d,%d]: merged and own outputs differ by %g", h, hd.Method, b, n, d, diff)
							}
						}
					}
				}
				binary[h] = !pooled && hd.Lambda == 0
			}
			// Binary heads against the float64 reference with their mask.
			keep := blockSet(merged)
			ref, err := reference.Attention(ctx, pr.Q, pr.K, pr.V, s.Causal, 0, func(b, h, qi, kj int) float64 {
				if keep[[4]int{b, h, qi / s.BlockQ, kj / s.BlockK}] {
					return 1
				}
				return 0
			})
			if err != nil {
				t.Fatal(err)
			}
			for h := range heads {
				if !binary[h] {
					continue
				}
				for b := range s.B {
					for n := range s.Nq {
						for d := range s.D {
							if diff := math.Abs(ref.At(b, h, n, d) - float64(out.At(b, h, n, d))); diff > 1e-4 {
								t.Fatalf("head %d (%s) [%d,%d,%d]: %g from the masked float64 reference", h, heads[h].Method, b, n, d, diff)
							}
						}
					}
				}
			}
		})
	}
}

// blockSet lists the (b, h, qb, kb) a plan visits.
func blockSet(p *plan.Plan) map[[4]int]bool {
	out := map[[4]int]bool{}
	g := p.Geometry
	for b := range g.B {
		for h := range g.Hq {
			for qb := range p.QBlocks() {
				blocks, _ := p.Entries(p.Row(b, h, qb))
				for _, kb := range blocks {
					out[[4]int{b, h, qb, int(kb)}] = true
				}
			}
		}
	}
	return out
}

// TestCompose checks the composition's rule on the awkward shapes: every
// block the binary planner keeps is there at its level, every other entry
// is one the pooled planner visits, pooled at level ≥ 2 unless it needs
// causal masking, and nothing the pooled planner visits is dropped.
func TestCompose(t *testing.T) {
	r := testutil.Rand(t)
	ctx := context.Background()
	for _, s := range plantest.Select(plantest.Awkward()) {
		t.Run(s.Name, func(t *testing.T) {
			pr := s.Problem(t, r, 2, 2)
			bin, _ := spargeP(0.6, 0)
			pool := pooled()
			c := Compose{Binary: bin, Pooled: pool}
			got, err := c.Plan(ctx, pr.Tiling, pr.Q, pr.K, pr.V)
			if err != nil {
				t.Fatal(err)
			}
			bp, _ := bin.Plan(ctx, pr.Tiling, pr.Q, pr.K, pr.V)
			pp, _ := pool.Plan(ctx, pr.Tiling, pr.Q, pr.K, pr.V)
			for row := range got.Rows() {
				level := func(p *plan.Plan) map[int32]plan.Level {
					m := map[int32]plan.Level{}
					for i := p.RowStart[row]; i < p.RowStart[row+1]; i++ {
						if l := p.LevelAt(i); l != plan.Skip {
							m[p.KVBlock[i]] = l
						}
					}
					return m
				}
				g, b, pl := level(got), level(bp), level(pp)
				for kb, l := range b {
					if g[kb] != l {
						t.Fatalf("row %d: binary keeps block %d at %d, composed %d", row, kb, l, g[kb])
					}
				}
				for kb, l := range g {
					if _, ok := b[kb]; ok {
						continue
					}
					if _, ok := pl[kb]; !ok {
						t.Fatalf("row %d: block %d is in neither plan", row, kb)
					}
					_, partial := got.BlockVisibility(row%got.QBlocks(), int(kb))
					if (partial && l != plan.Full) || (!partial && l < 2) {
						t.Fatalf("row %d: block %d at level %d (needs masking: %v)", row, kb, l, partial)
					}
				}
				for kb := range pl {
					if _, ok := g[kb]; !ok {
						t.Fatalf("row %d: pooled planner's block %d dropped", row, kb)
					}
				}
			}
		})
	}
}

// TestPlannerErrors checks that a layer of the wrong width and bad choices
// give typed errors, not panics.
func TestPlannerErrors(t *testing.T) {
	s := plantest.Awkward()[0]
	pr := s.Problem(t, testutil.Rand(t), 1, 1)
	for _, heads := range [][]Head{
		{{Method: Dense}},
		{{Method: "nope"}, {Method: Dense}},
		{{Method: "psa", Knob: 1, Lambda: -2}, {Method: Dense}},
		{{Method: "window", Knob: 1.5}, {Method: Dense}},
		{{Method: "sparge", Knob: math.NaN()}, {Method: Dense}},
	} {
		_, err := Planner{Heads: heads}.Plan(context.Background(), pr.Tiling, pr.Q, pr.K, pr.V)
		if !isTyped(err) {
			t.Errorf("%+v: got %v, want a typed error", heads, err)
		}
	}
	var _ plan.Planner = Planner{}
	var _ *tensor.Tensor
}
