package selftest

import (
	"context"
	"testing"

	"github.com/sparseattn/sparseattn/cpu"
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/internal/testutil"
)

// TestRunGen runs the gathering kernel's suite (PSA levels, S2O orders,
// stops and two passes) against the CPU executor. Without a GPU it skips.
func TestRunGen(t *testing.T) {
	e := openEngine(t)
	r := testutil.Rand(t)
	failed, err := RunGen(context.Background(), e, r, GenCases(), func(c Check) {
		t.Logf("%-40s %-34s rel L1 %.2e (runner %.2e, tol %.0e) QK %v/%v PV %v/%v stopped %d/%d err=%v", c.Name, c.Kernel, c.Errors.RelL1, c.Runner, c.Tol,
			c.GPU.QKBlocks, c.CPU.QKBlocks, c.GPU.PVBlocks, c.CPU.PVBlocks, c.GPU.Stopped, c.CPU.Stopped, c.Err)
	})
	if err != nil || failed > 0 {
		t.Fatalf("%d cases failed (%v)", failed, err)
	}
}

// TestGenCasesPlan builds every gathering case's plan on random inputs
// (no GPU needed): each must be one the GPU kernels take, and the cases
// that claim to stop must stop a row on the CPU.
func TestGenCasesPlan(t *testing.T) {
	r := testutil.Rand(t)
	for _, c := range GenCases() {
		q, k, v, err := cuda.RandomInputs(r, c.Case, 1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Build(r, tilingOf(c.Case), q, k, v)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if err := cuda.Supports(p); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		_, st, err := cpu.Executor{}.Run(context.Background(), p, q, k, v, nil)
		if err != nil {
			t.Fatalf("%s: cpu: %v", c.Name, err)
		}
		t.Logf("%-40s QK %.2f of %v dense, %d rows stopped", c.Name, st.QKBlocks, st.DenseBlocks, st.Stopped)
		if c.WantStop && st.Stopped == 0 {
			t.Errorf("%s: wants a stop but no row stopped on the CPU", c.Name)
		}
	}
}
