package selftest

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/internal/testutil"
)

// TestRun runs the device self-test suite: GPU against the CPU executor
// on fresh random inputs. Without a GPU it checks that opening fails
// cleanly and skips.
func TestRun(t *testing.T) {
	e := openEngine(t)
	r := testutil.Rand(t)
	failed, err := Run(context.Background(), e, r, cuda.Cases(), func(c Check) {
		t.Logf("%-32s %-22s rel L1 %.2e (tol %.0e) QK %v PV %v/%v err=%v", c.Name, c.Kernel, c.Errors.RelL1, c.Tol, c.GPU.QKBlocks, c.GPU.PVBlocks, c.CPU.PVBlocks, c.Err)
	})
	if err != nil || failed > 0 {
		t.Fatalf("%d cases failed (%v)", failed, err)
	}
}

// TestRunPlanners checks every device planner against its CPU planner:
// identical plans and counters, outputs within the 16-bit tolerance.
func TestRunPlanners(t *testing.T) {
	runPlannerCases(t, openEngine(t), PlannerCases())
}

// runPlannerCases runs each planner case as a subtest: its check logged,
// and failed on the case's error.
func runPlannerCases(t *testing.T, e *cuda.Engine, cases []PlannerCase) {
	r := testutil.Rand(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			_, err := RunPlanners(context.Background(), e, r, []PlannerCase{c}, func(c PlannerCheck) {
				t.Logf("rows differ %d/%d (tie-break %d) orders differ %d QK %v/%v PV %v/%v rel L1 %.2e plan %.3f ms", c.RowsDiffer, c.Rows, c.RowsTied, c.OrdersDiffer, c.GPU.QKBlocks, c.CPU.QKBlocks, c.GPU.PVBlocks, c.CPU.PVBlocks, c.Errors.RelL1, c.PlanMS)
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

// TestRunQuantized runs the quantized self-test cases: the GPU's INT8-QK
// kernels against the CPU emulation. It skips without a GPU, and on GPUs
// the quantized kernels do not run on (before Hopper).
func TestRunQuantized(t *testing.T) {
	e := openEngine(t)
	cs := QuantCases()
	if len(cs) == 0 {
		t.Fatal("no quantized cases")
	}
	p, err := cs[0].Plan(testutil.Rand(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SupportsQuantized(p); err != nil {
		t.Skipf("quantized kernels: %v", err)
	}
	failed, err := RunQuantized(context.Background(), e, testutil.Rand(t), cs, func(c Check) {
		t.Logf("%-40s rel L1 vs CPU emulation %.2e (tol %.0e) QK %v/%v PV %v/%v err=%v", c.Name, c.Errors.RelL1, c.Tol, c.GPU.QKBlocks, c.CPU.QKBlocks, c.GPU.PVBlocks, c.CPU.PVBlocks, c.Err)
	})
	if err != nil || failed > 0 {
		t.Fatalf("%d cases failed (%v)", failed, err)
	}
}

// openEngine opens a device engine for t, closed when t ends, and skips t
// where no usable GPU is present (CI): the check that opening fails
// cleanly there, with a typed error, rather than panicking.
// SPARSEATTN_KERNEL_DIR sets Tactics.KernelDir, so that kernel variants
// are checked with one build.
func openEngine(t *testing.T) *cuda.Engine {
	t.Helper()
	e, err := cuda.Open(cuda.Config{CacheDir: t.TempDir(), Tactics: cuda.Tactics{KernelDir: os.Getenv("SPARSEATTN_KERNEL_DIR")}})
	if errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrUnsupportedDevice) {
		t.Skipf("no usable GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
