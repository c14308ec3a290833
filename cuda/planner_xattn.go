package cuda

import (
	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// xattnPlanner is xattn.Planner on the device (kernels/plan_xattn.cu and
// block_mass.cuh). The antidiagonal scores are float32 tensor-core sums
// (of bf16 halves for float32 inputs) where the CPU sums in float64, so a
// block whose cumulative mass lands within rounding of the threshold may
// be kept by one side only; every other block is decided as on the CPU
// (the self-test's xattnTieBreak states the bound).
type xattnPlanner struct{ x xattn.Planner }

// newXattnPlanner returns the device planner of p.
func newXattnPlanner(p xattn.Planner) (devicePlanner, error) {
	return xattnPlanner{p}, nil
}

func (p xattnPlanner) header(t plan.Tiling) (*plan.Plan, error) {
	if err := p.x.Check(t); err != nil {
		return nil, err
	}
	if err := bmCheck(t.BlockQ / p.x.Stride); err != nil {
		return nil, err
	}
	return &plan.Plan{Tiling: t}, nil
}

func (xattnPlanner) sparse() bool { return true }

func (p xattnPlanner) plan(c *driver.Ctx, in *planInput) error {
	if err := p.x.Check(in.t); err != nil {
		return err
	}
	g := in.t.Geometry
	S := p.x.Stride
	const file = "plan_xattn.cu"
	m := bmMass{file: file, nrows: (g.Nq + S - 1) / S, ncols: (g.Nk + S - 1) / S, cq: S, ck: S, per: in.t.BlockK / S,
		hk: g.Hkv, hpi: g.Hq / g.Hkv, ch: 1, rule: bmRuleThreshold, thresh: p.x.Threshold,
		// XAttention §2.1: the antidiagonal sums times scale/S.
		lscale: float64(in.t.SoftmaxScale()) / float64(S)}
	// Query group i is Q[iS+S−1], …, Q[iS]; key group j is K[jS], …, K[jS+S−1].
	if isF32(in.q) || isF32(in.k) || in.q.dtype != in.k.dtype {
		m.split = true
		for _, o := range []struct {
			x    view
			name string
			op   *bmOp
			rev  bool
		}{{in.q, "xattn.q", &m.q, true}, {in.k, "xattn.k", &m.k, false}} {
			hi, lo, sb, sh, sn, err := bmSplit(c, in, file, o.name, o.x)
			if err != nil {
				return err
			}
			*o.op = bmOpOf(hi, lo, sb, sh, sn, int(o.x.n), g.D, S, o.rev)
		}
	} else {
		m.f16 = in.q.dtype == dtypeCode(tensor.Float16)
		m.q, m.k = bmViewOp(in.q, S, true), bmViewOp(in.k, S, false)
	}
	return m.launch(c, in, "xattn")
}
