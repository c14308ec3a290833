package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/plan"
)

// oraclePlanner is oracle.Planner on the device (kernels/plan_oracle.cu):
// the exact block masses from QKᵀ on the tensor cores, then TopCdf. It is
// a reference, not a predictor: it costs two QKᵀ passes, about half a dense
// pass or more. The logits are summed in another order than the CPU's, so
// the masses agree to about 1e-6 relative and a block whose cumulative mass
// lands within that of the CDF may be kept by one side only; every other
// block is decided as on the CPU.
type oraclePlanner struct{ o oracle.Planner }

// newOraclePlanner returns the device planner of p.
func newOraclePlanner(p oracle.Planner) (devicePlanner, error) {
	return oraclePlanner{p}, nil
}

func (p oraclePlanner) header(t plan.Tiling) (*plan.Plan, error) {
	if !(p.o.CDF > 0 && p.o.CDF <= 1) {
		return nil, fmt.Errorf("%w: oracle CDF %v must be in (0, 1]", plan.ErrInvalid, p.o.CDF)
	}
	if t.BlockQ%16 != 0 || t.BlockQ > 128 {
		return nil, fmt.Errorf("%w: the device oracle takes BlockQ a multiple of 16 up to 128, got %d", ErrUnsupported, t.BlockQ)
	}
	return &plan.Plan{Tiling: t}, nil
}

func (oraclePlanner) sparse() bool { return true }

func (p oraclePlanner) plan(c *driver.Ctx, in *planInput) error {
	if in.q.dtype != in.k.dtype {
		return fmt.Errorf("%w: oracle with q in dtype %d and k in %d", ErrMismatch, in.q.dtype, in.k.dtype)
	}
	defs := []string{fmt.Sprintf("HEAD_DIM_PAD=%d", (in.t.Geometry.D+15)/16*16), fmt.Sprintf("DTYPE=%d", in.q.dtype)}
	massFn, err := in.e.auxFunction(c, "plan_oracle.cu", "oracle_mass", defs...)
	if err != nil {
		return err
	}
	selFn, err := in.e.auxFunction(c, "plan_oracle.cu", "oracle_select", defs...)
	if err != nil {
		return err
	}
	rows := in.rows()
	mass, err := in.scratch.get(c, "oracle.mass", int64(rows)*int64(in.stride)*4)
	if err != nil {
		return err
	}
	a := in.args()
	grid := driver.Dim3{X: uint32(rows), Y: 1, Z: 1}
	m := uint64(mass)
	if err := c.Launch(massFn, grid, driver.Dim3{X: 256, Y: 1, Z: 1}, 0, driver.Arg(&a), driver.Arg(&in.q), driver.Arg(&in.k), driver.Arg(&m)); err != nil {
		return err
	}
	cdf := p.o.CDF
	return c.Launch(selFn, grid, driver.Dim3{X: 256, Y: 1, Z: 1}, 0, driver.Arg(&a), driver.Arg(&m), driver.Arg(&cdf))
}
