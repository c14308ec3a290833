package sparseattn_test

import (
	"context"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Both backends meet the one executor contract.
var (
	_ plan.Executor = cpu.Executor{}
	_ plan.Executor = (*cuda.Engine)(nil)
)

// countingExecutor runs plans on the CPU and counts the calls.
type countingExecutor struct {
	cpu.Executor
	calls *int
}

func (c countingExecutor) Run(ctx context.Context, p *plan.Plan, q, k, v, out *tensor.Tensor) (*tensor.Tensor, plan.Stats, error) {
	*c.calls++
	return c.Executor.Run(ctx, p, q, k, v, out)
}

// TestOptionsExecutor: a caller's executor runs the plan, whatever Device
// says.
func TestOptionsExecutor(t *testing.T) {
	r := testutil.Rand(t)
	s := tensor.Shape{B: 1, H: 2, N: 70, D: 32}
	q := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	k := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	v := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, s, 1)
	calls := 0
	res, err := sparseattn.Attention(context.Background(), q, k, v, sparseattn.Options{Causal: true, Device: sparseattn.DeviceCUDA, Executor: countingExecutor{calls: &calls}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := sparseattn.Attention(context.Background(), q, k, v, sparseattn.Options{Causal: true})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || res.Device != sparseattn.DeviceCaller || res.Stats != want.Stats {
		t.Errorf("calls %d, device %v, stats %+v (want %+v)", calls, res.Device, res.Stats, want.Stats)
	}
}
