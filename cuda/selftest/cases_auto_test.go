package selftest

import (
	"context"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/plan"
)

// TestAutoCases checks without a GPU that the auto cases reach the device
// run: every profile on every shape, each layer as wide as its shape,
// and each one plans on the CPU (on random inputs; the llm workload's
// cases only outside -short). The merged cases mix choices; the last
// profile has one.
func TestAutoCases(t *testing.T) {
	cs := autoCases()
	if want := len(autoProfiles()) * (len(shapes()) + 1); len(cs) != want {
		t.Fatalf("%d auto cases, want %d", len(cs), want)
	}
	r := testutil.Rand(t)
	for _, c := range cs {
		if !strings.HasPrefix(c.Name, "auto ") {
			t.Errorf("case %q: the device run selects auto cases by the prefix \"auto \"", c.Name)
		}
		if c.Workload != "" && testing.Short() {
			continue
		}
		p := c.Planner.(auto.Planner)
		tl := plan.Tiling{Geometry: c.Case.Geometry(), Causal: c.Case.Causal, BlockQ: c.Case.BlockQ, BlockK: c.Case.BlockK}
		planners, _, err := p.Choices(tl)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if len(planners) < 2 && !strings.HasPrefix(c.Name, "auto one choice/") && c.Case.Hq > 1 {
			t.Errorf("%s: %d distinct choices, want a mix", c.Name, len(planners))
		}
		q, k, v, err := c.inputs(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Plan(context.Background(), tl, q, k, v); err != nil {
			t.Errorf("%s: CPU plan: %v", c.Name, err)
		}
	}
}
