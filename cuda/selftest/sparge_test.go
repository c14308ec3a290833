package selftest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// spargeHeadMix are the per-head parameters TestSpargeHeads cycles
// through: both selection modes, their keep-all limits, the judge off, at
// the noise level and at its default.
var spargeHeadMix = []sparge.Params{
	{CDF: 0.8, Theta: -1},
	{TopK: 0.2, Theta: 0.0078},
	{CDF: 1},
	{CDF: 0.5, Theta: 0.0156},
	{TopK: 1, Theta: -1},
	{TopK: sparge.DefaultTopK},
	{CDF: 0.95, Theta: 0.01},
	{TopK: 0.6, Theta: -1},
}

// TestSpargeHeads checks the sparge device planner with a profile's
// per-head τ, top-k and θ (sparge.Planner.Heads) against the CPU planner
// on every self-test shape and the llm workload.
func TestSpargeHeads(t *testing.T) {
	e := openEngine(t)
	var cases []PlannerCase
	for i, s := range append(shapes(), llmShape) {
		heads := make([]sparge.Params, s.Hq)
		for h := range heads {
			heads[h] = spargeHeadMix[(h+i)%len(spargeHeadMix)]
		}
		c := PlannerCase{Name: fmt.Sprintf("sparge heads/%s", s.Name), Planner: sparge.Planner{Heads: heads, Sink: i%2 == 0}, Case: s}
		if s.Name == llmShape.Name {
			c.Workload = workload.LLM
		}
		cases = append(cases, c)
	}
	runPlannerCases(t, e, cases)
}

// TestSpargeTiesAndWideRows checks the sparge device planner against the
// CPU planner where N(0, 1) inputs do not reach: key blocks that repeat
// (every fourth block the same tokens), so that a row's compressed logits
// tie and its order falls back to the block index, which the device's
// search for the last kept block must break as the CPU's stable sort does;
// and rows of 128, 200, 512 and 520 key blocks, past the self-test
// shapes' 64 and from spargeSearchMin (cuda) on, with and without
// repeating blocks.
// Plans must be identical row for row but for the θ judge's tie-break
// (spargeTieBreak).
func TestSpargeTiesAndWideRows(t *testing.T) {
	e := openEngine(t)
	r := testutil.Rand(t)
	ctx := context.Background()
	for _, c := range []struct {
		name         string
		n, bk        int
		causal, ties bool
	}{
		{"repeating key blocks causal", 2048, 64, true, true},
		{"repeating key blocks non-causal", 1536, 64, false, true},
		{"repeating key blocks, 128 a row, causal", 8192, 64, true, true},
		{"repeating key blocks, 200 a row, non-causal", 12800, 64, false, true},
		{"512 key blocks causal", 32768, 64, true, false},
		{"repeating key blocks, 520 a row, non-causal", 33280, 64, false, true},
		{"repeating key blocks, 512 a row, causal", 32768, 64, true, true},
	} {
		g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: c.n, Nk: c.n, D: 128, Dv: 128}
		tl := plan.Tiling{Geometry: g, Causal: c.causal, BlockQ: 128, BlockK: c.bk}
		q := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: g.Hq, N: c.n, D: g.D}, 1)
		k := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: g.Hkv, N: c.n, D: g.D}, 1)
		v := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: g.Hkv, N: c.n, D: g.D}, 1)
		if c.ties {
			row := make([]float32, g.D)
			for h := range g.Hkv {
				for n := 4 * c.bk; n < c.n; n++ {
					k.ReadRow(0, h, n%(4*c.bk), row)
					k.WriteRow(0, h, n, row)
				}
			}
		}
		for _, p := range []sparge.Planner{
			{Params: sparge.Params{TopK: 0.3, Theta: -1}},
			{Params: sparge.Params{CDF: 0.7, Theta: -1}, Sink: true},
			{Params: sparge.Params{CDF: 0.95, Theta: 0.0078}},
		} {
			t.Run(fmt.Sprintf("%s/%+v", c.name, p.Params), func(t *testing.T) {
				want, err := p.Plan(ctx, tl, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				run, err := e.NewRunner(ctx, tl, tensor.BFloat16, p)
				if err != nil {
					t.Fatal(err)
				}
				defer run.Close()
				var dev [3]*cuda.Tensor
				for i, h := range []*tensor.Tensor{q, k, v} {
					if dev[i], err = e.Upload(ctx, h); err != nil {
						t.Fatal(err)
					}
					defer dev[i].Free()
				}
				if _, err := run.Plan(ctx, dev[0], dev[1], dev[2]); err != nil {
					t.Fatal(err)
				}
				got, err := run.DownloadPlan(ctx)
				if err != nil {
					t.Fatal(err)
				}
				judge := spargeTieBreak(p, tl, q, k)
				differ, tied := 0, 0
				for row := range want.Rows() {
					a, _ := want.Entries(row)
					b, _ := got.Entries(row)
					if slices.Equal(a, b) {
						continue
					}
					if err := judge(ctx, row, a, b); err == nil {
						tied++
						continue
					} else if differ == 0 {
						t.Errorf("row %d: device %v, CPU %v: %v", row, b, a, err)
					}
					differ++
				}
				t.Logf("rows differ %d/%d (tie-break %d), kept %d/%d", differ, want.Rows(), tied, len(got.KVBlock), len(want.KVBlock))
				if differ > 0 {
					t.Errorf("%d rows differ beyond the θ judge's tie-break", differ)
				}
			})
		}
	}
}

// deviceCosSim repeats sparge_pool's float32 CosSim on the CPU, with
// rsqrtf's error pushed to its 2-ulp limit in the direction dir (±1): the
// worst the device may do, for TestSpargeSimTol.
func deviceCosSim(rows [][]float32, dir int) float64 {
	u := make([]float32, len(rows[0]))
	for _, x := range rows {
		var nn float32
		for _, v := range x {
			nn += v * v
		}
		if nn == 0 {
			continue
		}
		inv := float32(1 / math.Sqrt(float64(nn)))
		for range 2 {
			inv = math.Nextafter32(inv, float32(dir)*float32(math.Inf(1)))
		}
		for d, v := range x {
			u[d] += v * inv
		}
	}
	var s float64
	for _, v := range u {
		s += float64(v) * float64(v)
	}
	n := float64(len(rows))
	return s / (n * n)
}

// TestSpargeSimTol checks spargeSimTol against the device's float32 CosSim
// (deviceCosSim, rsqrtf at its error limit either way) on blocks from
// noise (CosSim about 1/n) to nearly parallel tokens (about 1, where the
// error is largest), at several magnitudes, and that the bound is tight
// enough to be useful: under 10⁻⁴ at 128 tokens of 128 dimensions, so
// that a judge decision flips only for CosSims that close to θ.
func TestSpargeSimTol(t *testing.T) {
	r := testutil.Rand(t)
	worst := 0.0
	for _, n := range []int{1, 17, 64, 128} {
		for _, d := range []int{64, 96, 128} {
			tol := spargeSimTol(n, d)
			for _, offset := range []float64{0, 0.3, 3, 100} {
				for _, mag := range []float64{1e-3, 1, 1e3} {
					rows32 := make([][]float32, n)
					rows64 := make([][]float64, n)
					for a := range rows32 {
						rows32[a], rows64[a] = make([]float32, d), make([]float64, d)
						for j := range d {
							v := float32(mag * (offset + r.NormFloat64()))
							rows32[a][j], rows64[a][j] = v, float64(v)
						}
					}
					want := sparge.CosSim(rows64)
					for _, dir := range []int{-1, 1} {
						got := deviceCosSim(rows32, dir)
						if diff := math.Abs(got - want); diff > tol {
							t.Errorf("n %d d %d offset %g mag %g: float32 CosSim %.9g, CPU %.9g: off by %.3g, over the bound %.3g", n, d, offset, mag, got, want, diff, tol)
						} else {
							worst = max(worst, diff/tol)
						}
					}
				}
			}
		}
	}
	if tol := spargeSimTol(128, 128); tol >= 1e-4 {
		t.Errorf("spargeSimTol(128, 128) = %.3g: too loose to be useful", tol)
	}
	t.Logf("largest error seen: %.3g of the bound", worst)
}

// TestSpargeRowWithin checks the judge of sparge's device rows on a
// hand-made head of 6 key blocks (logits falling with the block index,
// top-k 0.5: the 3 most probable candidates, θ 0.3): rows the CPU's rule
// gives under another judgement of a block within the bound of θ pass,
// others fail.
func TestSpargeRowWithin(t *testing.T) {
	const tol = 1e-5
	est := func(qsim float64, ksim4 float64) *sparge.HeadEstimate {
		return &sparge.HeadEstimate{
			QBlocks: 1, KBlocks: 6, QSim: []float64{qsim}, KSim: []float64{0.9, 0.9, 0.9, 0.9, ksim4, 0.9},
			Logits: []float64{5, 4, 3, 2, 1, 0}, Visible: []int{6}, Diag: []int{-1},
		}
	}
	p := sparge.Params{TopK: 0.5, Theta: 0.3}
	for _, c := range []struct {
		name        string
		e           *sparge.HeadEstimate
		p           sparge.Params
		got         []int32
		ok          bool
		description string
	}{
		{"query block near θ, judged non-self-similar", est(0.3+tol/2, 0.9), p, []int32{0, 1, 2, 3, 4, 5}, true, "the CPU predicts, the device computes in full"},
		{"query block near θ, predicted", est(0.3+tol/2, 0.9), p, []int32{0, 1, 2}, true, "the CPU's own row"},
		{"query block far from θ", est(0.9, 0.9), p, []int32{0, 1, 2, 3, 4, 5}, false, "no flip can explain a full row"},
		{"key block near θ, a candidate", est(0.9, 0.3-tol/2), p, []int32{0, 1, 2}, true, "the CPU fixes block 4, the device drops it"},
		{"key block near θ, fixed", est(0.9, 0.3-tol/2), p, []int32{0, 1, 2, 4}, true, "the CPU's own row"},
		{"key block near θ, wrong top block", est(0.9, 0.3-tol/2), p, []int32{0, 1, 3, 4}, false, "block 3 is not among the top 3 under either judgement"},
		{"key block just past the bound", est(0.9, 0.3-2*tol), p, []int32{0, 1, 2}, false, "block 4 is fixed under any perturbation within the bound"},
		{"judge off", est(0.3, 0.3), sparge.Params{TopK: 0.5, Theta: -1}, []int32{0, 1, 2, 3, 4, 5}, false, "without the judge nothing may differ"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := spargeRowWithin(c.e, 0, c.p, false, c.got, tol, tol)
			if (err == nil) != c.ok {
				t.Errorf("row %v (%s): judge says %v, want ok %v", c.got, c.description, err, c.ok)
			}
		})
	}
}
