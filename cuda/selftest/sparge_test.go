package selftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/cuda/driver"
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
	{},
	{CDF: 0.95, Theta: 0.01},
	{TopK: 0.6, Theta: -1},
}

// TestSpargeHeads checks the sparge device planner with a profile's
// per-head τ, top-k and θ (sparge.Planner.Heads) against the CPU planner
// on every self-test shape and the llm workload.
func TestSpargeHeads(t *testing.T) {
	e, err := cuda.Open(cuda.Config{CacheDir: t.TempDir()})
	if errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrUnsupportedDevice) {
		t.Skipf("no usable GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := testutil.Rand(t)
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
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			_, err := RunPlanners(context.Background(), e, r, []PlannerCase{c}, func(c PlannerCheck) {
				t.Logf("rows differ %d/%d QK %v/%v PV %v/%v rel L1 %.2e plan %.3f ms", c.RowsDiffer, c.Rows, c.GPU.QKBlocks, c.CPU.QKBlocks, c.GPU.PVBlocks, c.CPU.PVBlocks, c.Errors.RelL1, c.PlanMS)
				if c.Err != nil {
					t.Error(c.Err)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSpargeTiesAndWideRows checks the sparge device planner against the
// CPU planner where N(0, 1) inputs do not reach: key blocks that repeat
// (every fourth block the same tokens), so that a row's compressed logits
// tie and its order falls back to the block index, which the device's
// search for the last kept block must break as the CPU's stable sort does;
// and N = 32768, 512 key blocks a row, past the self-test shapes' 64. Plans must be identical row for row.
func TestSpargeTiesAndWideRows(t *testing.T) {
	e, err := cuda.Open(cuda.Config{CacheDir: t.TempDir()})
	if errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrUnsupportedDevice) {
		t.Skipf("no usable GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := testutil.Rand(t)
	ctx := context.Background()
	for _, c := range []struct {
		name         string
		n, bk        int
		causal, ties bool
	}{
		{"repeating key blocks causal", 2048, 64, true, true},
		{"repeating key blocks non-causal", 1536, 64, false, true},
		{"512 key blocks causal", 32768, 64, true, false},
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
				differ := 0
				for row := range want.Rows() {
					a, _ := want.Entries(row)
					b, _ := got.Entries(row)
					if !slices.Equal(a, b) {
						if differ == 0 {
							t.Errorf("row %d: device %v, CPU %v", row, b, a)
						}
						differ++
					}
				}
				t.Logf("rows differ %d/%d, kept %d/%d", differ, want.Rows(), len(got.KVBlock), len(want.KVBlock))
				if differ > 0 {
					t.Errorf("%d rows differ", differ)
				}
			})
		}
	}
}
