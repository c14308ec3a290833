package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

type problem struct {
	name          string
	b, hq, hkv    int
	nq, nk, d, dv int
	bq, bk        int
	causal        bool
	dtype         tensor.DType
	layout        tensor.Layout
}

// problems covers the awkward shapes: ragged last blocks, N below one
// block, head dims 32..256 including ones that are not multiples of the
// vector width, GQA, decode (Nq = 1), Nq > Nk (fully masked rows when
// causal), and every storage type and layout.
var problems = []problem{
	{"square-causal", 1, 2, 2, 128, 128, 64, 64, 64, 64, true, tensor.Float32, tensor.BHND},
	{"ragged-causal", 1, 2, 1, 100, 100, 32, 32, 32, 32, true, tensor.Float32, tensor.BHND},
	{"ragged-noncausal", 2, 2, 2, 77, 77, 48, 48, 16, 32, false, tensor.Float32, tensor.BHND},
	{"below-one-block", 1, 1, 1, 5, 5, 64, 64, 64, 64, true, tensor.Float32, tensor.BHND},
	{"gqa-4-to-1", 1, 8, 2, 70, 70, 80, 80, 32, 16, true, tensor.Float32, tensor.BHND},
	{"d256", 1, 1, 1, 40, 40, 256, 256, 16, 16, false, tensor.Float32, tensor.BHND},
	{"d200-dv96", 1, 2, 2, 33, 33, 200, 96, 8, 8, true, tensor.Float32, tensor.BHND},
	{"decode", 1, 4, 2, 1, 300, 128, 128, 64, 64, true, tensor.Float32, tensor.BHND},
	{"chunked-prefill", 1, 2, 2, 50, 200, 64, 64, 32, 32, true, tensor.Float32, tensor.BHND},
	{"chunk-16-keys-in-place", 1, 2, 1, 16, 150, 64, 64, 16, 32, true, tensor.Float32, tensor.BHND},
	{"chunk-13-bnhd-in-place", 1, 2, 2, 13, 100, 48, 48, 32, 16, true, tensor.Float32, tensor.BNHD},
	{"more-queries-than-keys", 1, 2, 2, 60, 20, 32, 32, 16, 16, true, tensor.Float32, tensor.BHND},
	{"bnhd", 2, 4, 2, 65, 65, 96, 96, 32, 32, true, tensor.Float32, tensor.BNHD},
	{"float16", 1, 2, 2, 90, 90, 64, 64, 32, 32, true, tensor.Float16, tensor.BHND},
	{"bfloat16-bnhd", 1, 2, 1, 90, 90, 128, 128, 64, 32, false, tensor.BFloat16, tensor.BNHD},
	{"odd-d", 1, 1, 1, 37, 37, 33, 35, 7, 9, true, tensor.Float32, tensor.BHND},
}

func (pr problem) inputs(t *testing.T, r *rand.Rand) (q, k, v *tensor.Tensor) {
	q = testutil.Gaussian(t, r, pr.dtype, pr.layout, tensor.Shape{B: pr.b, H: pr.hq, N: pr.nq, D: pr.d}, 1)
	k = testutil.Gaussian(t, r, pr.dtype, pr.layout, tensor.Shape{B: pr.b, H: pr.hkv, N: pr.nk, D: pr.d}, 1)
	v = testutil.Gaussian(t, r, pr.dtype, pr.layout, tensor.Shape{B: pr.b, H: pr.hkv, N: pr.nk, D: pr.dv}, 1)
	return q, k, v
}

func (pr problem) tiling() plan.Tiling {
	return plan.Tiling{
		Geometry: tensor.Geometry{B: pr.b, Hq: pr.hq, Hkv: pr.hkv, Nq: pr.nq, Nk: pr.nk, D: pr.d, Dv: pr.dv},
		Causal:   pr.causal, BlockQ: pr.bq, BlockK: pr.bk,
	}
}

// Tolerance of the float32 executor against the float64 reference, for
// unit-Gaussian inputs. Inputs are rounded to their storage type before
// either side reads them, so both see identical values. The remaining error
// comes from float32 dot products over D ≤ 256 terms (logit error about
// sqrt(D)·2⁻²⁴·|q||k|/sqrt(D) ≈ 1e-6), the vector exp (≤ 1e-6 relative),
// and the float32 P·V accumulation; outputs are convex combinations of
// unit-scale values, so 2e-5 absolute is about 10× the observed worst case
// and still 1000× below any error a planner could hide in.
const maxAbsTol = 2e-5

func checkClose(t *testing.T, ref *reference.Output, got *tensor.Tensor) {
	t.Helper()
	e, err := metrics.Compare(ref, metrics.Tensor{Tensor: got})
	if err != nil {
		t.Fatal(err)
	}
	if !(e.MaxAbs <= maxAbsTol) {
		t.Fatalf("max abs error %.3g > %.3g (rel L1 %.3g)", e.MaxAbs, maxAbsTol, e.RelL1)
	}
}

func TestDensePlanMatchesReference(t *testing.T) {
	r := testutil.Rand(t)
	for _, pr := range problems {
		t.Run(pr.name, func(t *testing.T) {
			q, k, v := pr.inputs(t, r)
			p, err := plan.Dense(pr.tiling())
			if err != nil {
				t.Fatal(err)
			}
			out, stats, err := Executor{Workers: 3}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := reference.Attention(context.Background(), q, k, v, pr.causal, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkClose(t, ref, out)
			if s := stats.Sparsity(); math.Abs(s) > 1e-12 {
				t.Errorf("dense plan sparsity %v, want 0", s)
			}
		})
	}
}

func TestFullyMaskedRowsAreZero(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 2, 2, 60, 20, 32, 32, 16, 16, true, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	// Queries 0..39 sit before the first key (offset Nk-Nq = -40): nothing visible.
	p, err := plan.Dense(pr.tiling())
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	for h := range 2 {
		for n := range 60 {
			for d := range 32 {
				x := out.At(0, h, n, d)
				if math.IsNaN(float64(x)) || (n < 40 && x != 0) {
					t.Fatalf("out[%d,%d,%d] = %v, want 0 for a fully masked row and never NaN", h, n, d, x)
				}
			}
		}
	}
	// An empty plan row gives zeros too.
	bld, _ := plan.NewBuilder(pr.tiling())
	empty, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	out, stats, err := Executor{}.Run(context.Background(), empty, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range out.Float32s() {
		if x != 0 {
			t.Fatalf("empty plan gave %v, want zeros", x)
		}
	}
	if stats.Sparsity() != 1 {
		t.Errorf("empty plan sparsity %v, want 1", stats.Sparsity())
	}
}

// randomPlan keeps each visible block with probability keep and returns the
// plan with the token-level mask it implies.
func randomPlan(t *testing.T, r *rand.Rand, tl plan.Tiling, keep float64) (*plan.Plan, map[[4]int]bool) {
	kept := map[[4]int]bool{}
	p, err := plan.FromMask(tl, func(b, h, qb, kb int) bool {
		if r.Float64() < keep {
			kept[[4]int{b, h, qb, kb}] = true
			return true
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, kept
}

func TestSparsePlanMatchesMaskedReference(t *testing.T) {
	r := testutil.Rand(t)
	for _, pr := range problems {
		t.Run(pr.name, func(t *testing.T) {
			q, k, v := pr.inputs(t, r)
			tl := pr.tiling()
			p, kept := randomPlan(t, r, tl, 0.5)
			out, stats, err := Executor{Workers: 2}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := reference.Attention(context.Background(), q, k, v, pr.causal, 0, func(b, h, i, j int) float64 {
				if kept[[4]int{b, h, i / pr.bq, j / pr.bk}] {
					return 1
				}
				return 0
			})
			if err != nil {
				t.Fatal(err)
			}
			checkClose(t, ref, out)
			want := 1 - float64(len(kept))/float64(p.DenseBlocks())
			if got := stats.Sparsity(); math.Abs(got-want) > 1e-12 {
				t.Errorf("sparsity %v, want %v from %d kept of %d", got, want, len(kept), p.DenseBlocks())
			}
		})
	}
}

func TestPooledLevelsMatchReference(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 2, 1, 96, 96, 32, 40, 16, 16, true, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	tl := pr.tiling()
	levels := map[[2]int]plan.Level{} // (row, kb) -> level
	bld, _ := plan.NewBuilder(tl)
	p0, _ := plan.Dense(tl)
	for h := range pr.hq {
		for qb := range p0.QBlocks() {
			row := p0.Row(0, h, qb)
			blocks, _ := p0.Entries(row)
			for _, kb := range blocks {
				lv := plan.Full
				if _, partial := p0.BlockVisibility(qb, int(kb)); !partial {
					lv = plan.Level(1 + r.IntN(4)) // pool 1, 2, 4 or 8
				}
				levels[[2]int{row, int(kb)}] = lv
				bld.Add(row, int(kb), lv)
			}
		}
	}
	p, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	out, stats, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Reference: append every pooled key and value (the mean of up to
	// 2^(l-1) consecutive tokens of a block) after the real ones, and weight
	// each by its token count; real keys count once where the block is Full.
	type pooledKey struct{ kb, lv, lo, hi int }
	var extra []pooledKey
	for kb := range p.KBlocks() {
		klo, khi := p.KeyRange(kb)
		for lv := 2; lv <= 4; lv++ {
			size := 1 << (lv - 1)
			for lo := klo; lo < khi; lo += size {
				extra = append(extra, pooledKey{kb, lv, lo, min(lo+size, khi)})
			}
		}
	}
	nk2 := pr.nk + len(extra)
	k2, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: nk2, D: pr.d})
	v2, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: nk2, D: pr.dv})
	for j := range pr.nk {
		for d := range pr.d {
			k2.Set(0, 0, j, d, k.At(0, 0, j, d))
		}
		for d := range pr.dv {
			v2.Set(0, 0, j, d, v.At(0, 0, j, d))
		}
	}
	for e, pk := range extra {
		n := float32(pk.hi - pk.lo)
		for d := range pr.d {
			var s float32
			for j := pk.lo; j < pk.hi; j++ {
				s += k.At(0, 0, j, d)
			}
			k2.Set(0, 0, pr.nk+e, d, s/n)
		}
		for d := range pr.dv {
			var s float32
			for j := pk.lo; j < pk.hi; j++ {
				s += v.At(0, 0, j, d)
			}
			v2.Set(0, 0, pr.nk+e, d, s/n)
		}
	}
	ref, err := reference.Attention(context.Background(), q, k2, v2, false, 1/math.Sqrt(float64(pr.d)), func(b, h, i, j int) float64 {
		row := p.Row(b, h, i/pr.bq)
		if j < pr.nk {
			if j > i || levels[[2]int{row, j / pr.bk}] != plan.Full {
				return 0
			}
			return 1
		}
		pk := extra[j-pr.nk]
		if levels[[2]int{row, pk.kb}] != plan.Level(pk.lv) {
			return 0
		}
		return float64(pk.hi - pk.lo)
	})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, ref, out)
	var wantQK float64
	for _, lv := range levels {
		wantQK += 1 / float64(lv.Pool())
	}
	if math.Abs(stats.QKBlocks-wantQK) > 1e-9 || math.Abs(stats.PVBlocks-wantQK) > 1e-9 {
		t.Errorf("QK %v PV %v block products, want %v each", stats.QKBlocks, stats.PVBlocks, wantQK)
	}
}

// plantSink adds a shared random direction u to every query and to keys
// 0..31 of every KV head. It raises those logits by about 2·2·|u|²/sqrt(D)
// ≈ 32, so later blocks fall far below the running max, as they do behind
// real attention sinks.
func plantSink(r *rand.Rand, pr problem, q, k *tensor.Tensor) {
	// u is a random direction of norm √d exactly, so that the sink's logit
	// (about 4|u|²/√d = 4√d) does not vary with the draw: with |u|² drawn
	// as a χ² of d degrees of freedom, a small draw left no row group 20
	// below its row max and TestLambdaFilter's λ = -20 case skipped
	// nothing (2 runs in 300).
	u := make([]float32, pr.d)
	var norm float64
	for d := range u {
		x := r.NormFloat64()
		u[d], norm = float32(x), norm+x*x
	}
	for d := range u {
		u[d] *= float32(math.Sqrt(float64(pr.d) / norm))
	}
	for h := range pr.hq {
		for n := range pr.nq {
			for d := range pr.d {
				q.Set(0, h, n, d, q.At(0, h, n, d)+2*u[d])
				if n < 32 && h < pr.hkv {
					k.Set(0, h, n, d, k.At(0, h, n, d)+2*u[d])
				}
			}
		}
	}
}

func TestLambdaFilter(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 2, 2, 256, 256, 64, 64, 64, 32, true, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	plantSink(r, pr, q, k)
	ref, _ := reference.Attention(context.Background(), q, k, v, true, 0, nil)
	for _, tc := range []struct {
		lambda   float32
		exact    bool    // λ so low nothing is skipped
		maxRelL1 float64 // bound on the error the skipped P̃V products may add
	}{
		{-1e30, true, 0},
		// A skipped group's weights are each below e^λ of its row max, so a
		// row loses at most (keys skipped)·e^λ of its mass: ≤ 256·e^-20 ≈ 5e-7.
		// On top comes float32 rounding of logits near 40 (relative 2.4e-6
		// per weight), which the exact run shows too.
		{-20, false, 5e-6},
		// The same bound is loose at λ = -5 (256·e^-5 ≈ 1.7); real losses are
		// far smaller because few blocks sit just under the cut.
		{-5, false, 0.05},
	} {
		t.Run(fmt.Sprint(tc.lambda), func(t *testing.T) {
			p, err := plan.Dense(pr.tiling())
			if err != nil {
				t.Fatal(err)
			}
			p.Filter = &plan.Filter{Lambda: tc.lambda, RowGroup: 16}
			out, stats, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			e, _ := metrics.Compare(ref, metrics.Tensor{Tensor: out})
			if tc.exact {
				// Only row groups with no visible key in a diagonal block
				// (all weights zero) may skip P̃V. The planted sink makes
				// logits near 40, whose float32 rounding (2.4e-6 relative)
				// is 8× that of the unit-scale logits maxAbsTol assumes.
				if e.MaxAbs > 8*maxAbsTol {
					t.Fatalf("max abs error %.3g > %.3g", e.MaxAbs, 8*maxAbsTol)
				}
				if want := stats.DenseBlocks - maskedGroups(p, 16); stats.PVBlocks != want {
					t.Errorf("λ=%v: PV %v block products, want %v", tc.lambda, stats.PVBlocks, want)
				}
				return
			}
			if e.RelL1 > tc.maxRelL1 {
				t.Errorf("λ=%v rel L1 %v > %v", tc.lambda, e.RelL1, tc.maxRelL1)
			}
			if stats.QKBlocks != stats.DenseBlocks || stats.PVBlocks >= stats.DenseBlocks-maskedGroups(p, 16) {
				t.Errorf("λ=%v: QK %v PV %v dense %v; want full QK and less PV", tc.lambda, stats.QKBlocks, stats.PVBlocks, stats.DenseBlocks)
			}
			t.Logf("λ=%v: PV %.1f of %.0f block products, rel L1 %.2g", tc.lambda, stats.PVBlocks, stats.DenseBlocks, e.RelL1)
		})
	}
}

// maskedGroups counts, in block products, the row groups of visited blocks
// in which no query sees any key.
func maskedGroups(p *plan.Plan, group int) float64 {
	var n float64
	for qb := range p.QBlocks() {
		qlo, qhi := p.QueryRange(qb)
		groups := (qhi - qlo + group - 1) / group
		for kb := range p.KBlocks() {
			if any, _ := p.BlockVisibility(qb, kb); !any {
				continue
			}
			klo, _ := p.KeyRange(kb)
			for lo := qlo; lo < qhi; lo += group {
				if !p.Visible(min(lo+group, qhi)-1, klo) {
					n += 1 / float64(groups)
				}
			}
		}
	}
	return n * float64(p.Geometry.B*p.Geometry.Hq)
}

// TestTokenOrders: every row visits a random subset of the blocks of a
// random key order, in a random sequence; queries are permuted too. The
// result must equal attention over exactly the tokens of the visited
// blocks, with token-exact causality. With shared orders, the rows of a
// head read one key order (as an S2O segment's rows do) and run as one
// group that gathers each block once for the rows listing it.
func TestTokenOrders(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			r := testutil.Rand(t)
			pr := problem{"", 1, 2, 1, 96, 96, 32, 32, 16, 16, true, tensor.Float32, tensor.BHND}
			q, k, v := pr.inputs(t, r)
			tl := pr.tiling()
			g := tl.Geometry
			base, _ := plan.Dense(tl)
			order := &plan.TokenOrder{Query: make([]int32, g.Hq*g.Nq), KVStart: []int{0}, RowKV: make([]int32, base.Rows())}
			for h := range g.Hq {
				for i, x := range r.Perm(g.Nq) {
					order.Query[h*g.Nq+i] = int32(x)
				}
			}
			bld, _ := plan.NewBuilder(tl)
			visible := map[[3]int]bool{} // (h, query token, key token)
			var perm []int
			for row := range base.Rows() {
				h, qb := row/base.QBlocks(), row%base.QBlocks()
				if !shared || qb == 0 {
					perm = r.Perm(g.Nk)
					for _, x := range perm {
						order.KV = append(order.KV, int32(x))
					}
					order.KVStart = append(order.KVStart, len(order.KV))
				}
				order.RowKV[row] = int32(len(order.KVStart) - 2)
				for _, kb := range r.Perm(base.KBlocks()) {
					if r.IntN(2) == 0 {
						continue
					}
					bld.Add(row, kb, plan.Full)
					lo, hi := base.QueryRange(qb)
					for _, qi := range order.Query[h*g.Nq+lo : h*g.Nq+hi] {
						for _, kj := range perm[kb*pr.bk : min(kb*pr.bk+pr.bk, g.Nk)] {
							visible[[3]int{h, int(qi), kj}] = true
						}
					}
				}
			}
			bld.SetOrder(order)
			p, err := bld.Build()
			if err != nil {
				t.Fatal(err)
			}
			out, stats, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := float64(len(p.KVBlock)); stats.QKBlocks != want {
				t.Fatalf("computed %v blocks, want %v", stats.QKBlocks, want)
			}
			ref, _ := reference.Attention(context.Background(), q, k, v, true, 0, func(b, h, i, j int) float64 {
				if visible[[3]int{h, i, j}] {
					return 1
				}
				return 0
			})
			checkClose(t, ref, out)
		})
	}
}

func TestStopRule(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 1, 1, 16, 512, 32, 32, 16, 32, false, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	p, _ := plan.Dense(pr.tiling())
	p.Stop = &plan.StopRule{Tau: 0.2, After: 2}
	out, stats, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := int(stats.QKBlocks)
	if stats.Stopped != 1 || done < 3 || done >= p.KBlocks() {
		t.Fatalf("stopped %d rows after %d of %d blocks; want one early stop after the first 2", stats.Stopped, done, p.KBlocks())
	}
	// The output is exactly attention over the blocks computed.
	ref, _ := reference.Attention(context.Background(), q, k, v, false, 0, func(b, h, i, j int) float64 {
		if j/pr.bk < done {
			return 1
		}
		return 0
	})
	checkClose(t, ref, out)
	// And stopping was right: the last block added less than τ·ℓ for every query.
	for i := range pr.nq {
		var before, last float64
		for j := range done * pr.bk {
			var s float64
			for d := range pr.d {
				s += float64(q.At(0, 0, i, d) * k.At(0, 0, j, d))
			}
			w := math.Exp(s / math.Sqrt(float64(pr.d)))
			if j >= (done-1)*pr.bk {
				last += w
			} else {
				before += w
			}
		}
		if last >= 0.2*before {
			t.Errorf("query %d: last block gain %.3g ≥ τ·ℓ = %.3g", i, last, 0.2*before)
		}
	}
}

// TestLogitOverflow: finite inputs whose logits overflow float32 must give
// ErrNonFinite, not NaN outputs.
func TestLogitOverflow(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 1, 1, 8, 8, 32, 32, 8, 8, false, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	tl := pr.tiling()
	tl.Scale = 1e38
	p, _ := plan.Dense(tl)
	if _, _, err := (Executor{}).Run(context.Background(), p, q, k, v, nil); !errors.Is(err, tensor.ErrNonFinite) {
		t.Fatalf("scale 1e38: %v, want ErrNonFinite", err)
	}
}

func TestRunErrors(t *testing.T) {
	r := testutil.Rand(t)
	pr := problems[0]
	q, k, v := pr.inputs(t, r)
	p, _ := plan.Dense(pr.tiling())
	other := pr
	other.nq = 64
	qs, _, _ := other.inputs(t, r)
	badOut, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 1, D: 1})
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	broken, _ := plan.Dense(pr.tiling())
	broken.KVBlock[0] = 99
	for _, tc := range []struct {
		name string
		ctx  context.Context
		p    *plan.Plan
		q    *tensor.Tensor
		out  *tensor.Tensor
		want error
	}{
		{"nil-plan", context.Background(), nil, q, nil, plan.ErrInvalid},
		{"wrong-geometry", context.Background(), p, qs, nil, ErrMismatch},
		{"bad-out", context.Background(), p, q, badOut, ErrMismatch},
		{"invalid-plan", context.Background(), broken, q, nil, plan.ErrInvalid},
		{"canceled", canceled, p, q, nil, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Executor{}.Run(tc.ctx, tc.p, tc.q, k, v, tc.out)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestPackChunks runs with budgets that pack one, two and all KV heads at a
// time; the chunking must not change a single bit of the output.
func TestPackChunks(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 3, 4, 2, 70, 70, 32, 32, 16, 16, true, tensor.BFloat16, tensor.BNHD}
	q, k, v := pr.inputs(t, r)
	p, _ := plan.Dense(pr.tiling())
	perHead := p.KBlocks() * pr.bk * (pr.d + pr.dv + 1) * 4
	want, _, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, budget := range []int{1, 2 * perHead, 5 * perHead} {
		got, _, err := Executor{PackBudget: budget, Workers: 3}.Run(context.Background(), p, q, k, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range got.Float32s() {
			if x != want.Float32s()[i] {
				t.Fatalf("budget %d: element %d is %v, want %v", budget, i, x, want.Float32s()[i])
			}
		}
	}
}

func TestConcurrentRuns(t *testing.T) {
	r := testutil.Rand(t)
	pr := problems[4]
	q, k, v := pr.inputs(t, r)
	p, _ := plan.Dense(pr.tiling())
	want, _, err := Executor{Workers: 1}.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := Executor{Workers: 2}.Run(context.Background(), p, q, k, v, nil)
			if err == nil {
				for j, x := range got.Float32s() {
					if x != want.Float32s()[j] {
						err = fmt.Errorf("element %d: %v vs %v single-threaded", j, x, want.Float32s()[j])
						break
					}
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSplitRows covers the split-KV path taken when there are fewer rows
// than workers (decode, short chunks): results must match the reference and
// the unsplit run's counters.
func TestSplitRows(t *testing.T) {
	r := testutil.Rand(t)
	for _, pr := range []problem{
		{"decode", 1, 4, 1, 1, 2000, 64, 64, 16, 16, true, tensor.Float32, tensor.BHND},
		{"decode-stacked-heads", 1, 8, 2, 2, 3000, 64, 64, 16, 16, true, tensor.Float32, tensor.BNHD},
		{"decode-bf16-bnhd", 2, 2, 2, 1, 777, 128, 96, 64, 8, true, tensor.BFloat16, tensor.BNHD},
		{"short-chunk", 1, 2, 1, 20, 1500, 32, 32, 32, 16, true, tensor.Float32, tensor.BHND},
		{"noncausal", 1, 1, 1, 3, 900, 48, 48, 4, 16, false, tensor.Float16, tensor.BHND},
	} {
		t.Run(pr.name, func(t *testing.T) {
			q, k, v := pr.inputs(t, r)
			tl := pr.tiling()
			keep := 0.7
			if strings.HasSuffix(pr.name, "stacked-heads") {
				keep = 1 // every head of a group has the same row: heads share tiles
			}
			p, kept := randomPlan(t, r, tl, keep)
			if want := map[bool]int{true: pr.hq / pr.hkv, false: 1}[keep == 1]; stackedHeads(p) != want {
				t.Fatalf("stackedHeads = %d, want %d", stackedHeads(p), want)
			}
			if n := splitCount(p, pr.b*pr.hq*p.QBlocks(), 16); n < 2 {
				t.Fatalf("plan would not be split (%d parts)", n)
			}
			whole, ws, err := Executor{Workers: 1}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			split, ss, err := Executor{Workers: 16}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ws != ss {
				t.Errorf("counters differ: whole %+v, split %+v", ws, ss)
			}
			ref, _ := reference.Attention(context.Background(), q, k, v, pr.causal, 0, func(b, h, i, j int) float64 {
				if kept[[4]int{b, h, i / pr.bq, j / pr.bk}] {
					return 1
				}
				return 0
			})
			checkClose(t, ref, whole)
			checkClose(t, ref, split)
		})
	}
}

// TestHeadLambda: a per-head λ slice filters each head with its own λ. Each
// head's output must equal, bit for bit, the same head's output under a
// uniform filter with that head's λ; a head whose λ is −Inf skips nothing
// and matches the float64 reference; and the P̃V counts of the two per-head
// assignments add up to those of the two uniform runs.
func TestHeadLambda(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 2, 1, 200, 200, 64, 64, 64, 32, true, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	// A planted sink makes λ = -3 really skip work.
	plantSink(r, pr, q, k)
	run := func(f *plan.Filter) (*tensor.Tensor, plan.Stats) {
		t.Helper()
		p, err := plan.Dense(pr.tiling())
		if err != nil {
			t.Fatal(err)
		}
		p.Filter = f
		out, st, err := Executor{Workers: 2}.Run(context.Background(), p, q, k, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out, st
	}
	inf := float32(math.Inf(-1))
	offOut, offStats := run(&plan.Filter{RowGroup: 16, HeadLambda: []float32{inf, inf}})
	onOut, onStats := run(&plan.Filter{Lambda: -3, RowGroup: 16})
	mixOut, mixStats := run(&plan.Filter{RowGroup: 16, HeadLambda: []float32{inf, -3}})
	_, swapStats := run(&plan.Filter{RowGroup: 16, HeadLambda: []float32{-3, inf}})
	row, want := make([]float32, pr.dv), make([]float32, pr.dv)
	for n := range pr.nq {
		for h, src := range []*tensor.Tensor{offOut, onOut} {
			mixOut.ReadRow(0, h, n, row)
			src.ReadRow(0, h, n, want)
			if !slices.Equal(row, want) {
				t.Fatalf("head %d row %d differs from the uniform run with its λ", h, n)
			}
		}
	}
	if got, want := mixStats.PVBlocks+swapStats.PVBlocks, offStats.PVBlocks+onStats.PVBlocks; math.Abs(got-want) > 1e-9 {
		t.Errorf("per-head PV counts sum to %v, uniform runs to %v", got, want)
	}
	if !(onStats.PVBlocks < offStats.PVBlocks) {
		t.Errorf("λ=-3 skipped nothing (PV %v of %v); the test input lost its sink", onStats.PVBlocks, offStats.PVBlocks)
	}
	ref, err := reference.Attention(context.Background(), q, k, v, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := range pr.nq {
		mixOut.ReadRow(0, 0, n, row)
		for d, x := range ref.Row(0, 0, n) {
			// The planted sink makes logits near 40, whose float32 rounding is
			// 8× that of the unit-scale logits maxAbsTol assumes (as in
			// TestLambdaFilter).
			if math.Abs(float64(row[d])-x) > 8*maxAbsTol {
				t.Fatalf("head 0 (λ = −Inf) row %d dim %d: %v, reference %v", n, d, row[d], x)
			}
		}
	}
}

// TestStopRuleRowAfter: with RowAfter, each row is protected for its own
// number of entries. Every row visits all its blocks in key order; the test
// replays the rule in float64 (stop after the first block past the row's
// own After whose gain is below τ·ℓ for every query) and checks both the
// blocks computed and the output.
func TestStopRuleRowAfter(t *testing.T) {
	r := testutil.Rand(t)
	pr := problem{"", 1, 2, 1, 64, 256, 32, 32, 16, 16, false, tensor.Float32, tensor.BHND}
	q, k, v := pr.inputs(t, r)
	p, _ := plan.Dense(pr.tiling())
	const tau = 0.15
	after := make([]int32, p.Rows())
	for i := range after {
		after[i] = int32(i % 5)
	}
	p.Stop = &plan.StopRule{Tau: tau, After: 99, RowAfter: after}
	out, stats, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	scale := 1 / math.Sqrt(float64(pr.d))
	done := map[[2]int]int{} // (h, qb) -> blocks computed
	var wantBlocks float64
	for h := range pr.hq {
		for qb := range p.QBlocks() {
			row := p.Row(0, h, qb)
			qlo, qhi := p.QueryRange(qb)
			l := make([]float64, qhi-qlo)
			n := p.KBlocks()
			for kb := range p.KBlocks() {
				// The block is small when the largest relative excess of the
				// gain over τ·ℓ is negative; near zero, rounding decides.
				worst := math.Inf(-1)
				for i := qlo; i < qhi; i++ {
					var gain float64
					for j := kb * pr.bk; j < (kb+1)*pr.bk; j++ {
						var s float64
						for d := range pr.d {
							s += float64(q.At(0, h, i, d)) * float64(k.At(0, 0, j, d))
						}
						gain += math.Exp(s * scale)
					}
					worst = max(worst, (gain-tau*l[i-qlo])/gain)
					l[i-qlo] += gain
				}
				small := worst < 0
				if kb >= int(after[row]) && math.Abs(worst) < 1e-3 {
					t.Skipf("row %d: a stop decision within 0.1%% of τ; float32 and float64 may differ", row)
				}
				if kb >= int(after[row]) && small {
					n = kb + 1
					break
				}
			}
			done[[2]int{h, qb}] = n
			wantBlocks += float64(n)
		}
	}
	if stats.Stopped == 0 {
		t.Fatal("no row stopped early; the test exercises nothing")
	}
	if stats.QKBlocks != wantBlocks {
		t.Fatalf("computed %v blocks, the float64 replay of the rule computes %v", stats.QKBlocks, wantBlocks)
	}
	ref, _ := reference.Attention(context.Background(), q, k, v, false, 0, func(b, h, i, j int) float64 {
		if j/pr.bk < done[[2]int{h, i / pr.bq}] {
			return 1
		}
		return 0
	})
	checkClose(t, ref, out)
}

// TestInitPlan: a main plan resumes the softmax states its Init plan
// leaves. The Init plan visits, in natural order, the KV blocks below a
// cut; the main plan permutes the queries and visits the keys above the
// cut in a random order per row. Together they cover every visible pair
// once, so the output is dense attention, and the work is the two plans'
// blocks added up.
func TestInitPlan(t *testing.T) {
	r := testutil.Rand(t)
	for _, pr := range []problem{
		{"gqa-causal", 1, 4, 2, 96, 96, 32, 32, 16, 16, true, tensor.Float32, tensor.BHND},
		{"chunked-noncausal-ragged", 2, 2, 1, 50, 130, 48, 40, 16, 32, false, tensor.Float32, tensor.BHND},
	} {
		t.Run(pr.name, func(t *testing.T) {
			q, k, v := pr.inputs(t, r)
			tl := pr.tiling()
			g := tl.Geometry
			cut := (g.Nk / pr.bk / 2) * pr.bk // keys below the cut go to the Init plan
			init, err := plan.FromMask(tl, func(b, h, qb, kb int) bool { return kb*pr.bk < cut })
			if err != nil {
				t.Fatal(err)
			}
			bld, _ := plan.NewBuilder(tl)
			order := &plan.TokenOrder{Query: make([]int32, g.B*g.Hq*g.Nq), KVStart: []int{0}, RowKV: make([]int32, init.Rows())}
			for i := range g.B * g.Hq {
				for p, x := range r.Perm(g.Nq) {
					order.Query[i*g.Nq+p] = int32(x)
				}
			}
			for row := range init.Rows() {
				for _, x := range r.Perm(g.Nk - cut) {
					order.KV = append(order.KV, int32(cut+x))
				}
				order.KVStart = append(order.KVStart, len(order.KV))
				order.RowKV[row] = int32(row)
				for kb := range (g.Nk - cut + pr.bk - 1) / pr.bk {
					bld.Add(row, kb, plan.Full)
				}
			}
			bld.SetOrder(order)
			bld.SetInit(init)
			p, err := bld.Build()
			if err != nil {
				t.Fatal(err)
			}
			out, stats, err := Executor{}.Run(context.Background(), p, q, k, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := reference.Attention(context.Background(), q, k, v, pr.causal, 0, nil)
			checkClose(t, ref, out)
			want := float64(len(init.KVBlock) + len(p.KVBlock))
			if stats.QKBlocks != want {
				t.Fatalf("computed %v blocks, want the two plans' %v", stats.QKBlocks, want)
			}
		})
	}
}
