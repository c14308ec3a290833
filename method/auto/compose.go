package auto

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Compose is a binary planner whose skipped blocks are read pooled instead
// of dropped (PSA §3.2, multi-level masks): every block Binary keeps runs
// at Binary's level, and every other block that Pooled visits gets Pooled's
// level raised to at least 2, so the plan keeps a cheap approximation of
// what Binary drops. A block needing causal masking cannot be pooled; it
// runs Full. Binary's λ filter carries over; token orders, stop rules and
// two-pass plans are refused.
type Compose struct {
	Binary, Pooled plan.Planner
}

// Name is "<binary>+<pooled>", e.g. "sparge+psa".
func (c Compose) Name() string {
	if c.Binary == nil || c.Pooled == nil {
		return "compose"
	}
	return c.Binary.Name() + "+" + c.Pooled.Name()
}

// Parts returns Binary and Pooled: how a device twin (package cuda)
// recognizes a composition without importing this package.
func (c Compose) Parts() (binary, pooled plan.Planner) { return c.Binary, c.Pooled }

// simple checks that a sub-plan has the tiling asked for and nothing a
// row-wise merge cannot carry.
func simple(name string, p *plan.Plan, t plan.Tiling) error {
	switch {
	case p.Tiling != t:
		return fmt.Errorf("%w: %s planned tiling %+v, asked for %+v", ErrPlan, name, p.Tiling, t)
	case p.Order != nil || p.Stop != nil || p.Init != nil:
		return fmt.Errorf("%w: %s's plan has token orders, a stop rule or a first pass, which a merge cannot carry", ErrPlan, name)
	}
	return nil
}

// Plan runs both planners and merges their rows.
func (c Compose) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	if c.Binary == nil || c.Pooled == nil {
		return nil, fmt.Errorf("%w: Compose needs a Binary and a Pooled planner", ErrPlan)
	}
	bp, err := c.Binary.Plan(ctx, t, q, k, v)
	if err != nil {
		return nil, err
	}
	pp, err := c.Pooled.Plan(ctx, t, q, k, v)
	if err != nil {
		return nil, err
	}
	if err := simple(c.Binary.Name(), bp, t); err != nil {
		return nil, err
	}
	if err := simple(c.Pooled.Name(), pp, t); err != nil {
		return nil, err
	}
	b, err := plan.NewBuilder(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	kept := make([]int, bp.KBlocks()) // kept[kb] == r+1 when row r keeps kb
	for r := range bp.Rows() {
		qb := r % bp.QBlocks()
		for i := bp.RowStart[r]; i < bp.RowStart[r+1]; i++ {
			if lv := bp.LevelAt(i); lv != plan.Skip {
				kept[bp.KVBlock[i]] = r + 1
				b.Add(r, int(bp.KVBlock[i]), lv)
			}
		}
		for i := pp.RowStart[r]; i < pp.RowStart[r+1]; i++ {
			kb, lv := int(pp.KVBlock[i]), pp.LevelAt(i)
			if lv == plan.Skip || kept[kb] == r+1 {
				continue
			}
			lv = max(lv, 2)
			if _, partial := pp.BlockVisibility(qb, kb); partial {
				lv = plan.Full
			}
			b.Add(r, kb, lv)
		}
	}
	b.SetFilter(bp.Filter)
	out, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	return out, nil
}
