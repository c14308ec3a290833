package selftest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/sparge"
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
