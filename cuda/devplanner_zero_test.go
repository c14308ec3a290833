package cuda

import (
	"fmt"
	"testing"

	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestDevicePlannerZeroValues: a planner's zero value reaches the device
// planner with its defaults filled in, as the CPU planner reads it, and
// its header (the parameter check) passes. No GPU needed.
func TestDevicePlannerZeroValues(t *testing.T) {
	tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 256, Nk: 256, D: 64, Dv: 64}, Causal: true, BlockQ: 64, BlockK: 64}
	for _, tc := range []struct {
		p    plan.Planner
		want devicePlanner
	}{
		{oracle.Planner{}, oraclePlanner{oracle.Planner{CDF: oracle.DefaultCDF}}},
		{&oracle.Planner{}, oraclePlanner{oracle.Planner{CDF: oracle.DefaultCDF}}},
		{xattn.Planner{}, xattnPlanner{xattn.Planner{Stride: xattn.DefaultStride, Threshold: xattn.DefaultThreshold}}},
		{&xattn.Planner{Threshold: 0.5}, xattnPlanner{xattn.Planner{Stride: xattn.DefaultStride, Threshold: 0.5}}},
		{flexprefill.Planner{}, flexprefillPlanner{flexprefill.Planner{Gamma: flexprefill.DefaultGamma, Tau: flexprefill.DefaultTau}}},
		{&flexprefill.Planner{Tau: 0.1}, flexprefillPlanner{flexprefill.Planner{Gamma: flexprefill.DefaultGamma, Tau: 0.1}}},
		{flexprefill.Planner{Tau: flexprefill.NoQueryAware}, flexprefillPlanner{flexprefill.Planner{Gamma: flexprefill.DefaultGamma, Tau: flexprefill.NoQueryAware}}},
	} {
		t.Run(fmt.Sprintf("%T", tc.p), func(t *testing.T) {
			got, err := devicePlannerFor(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("device planner %+v, want %+v", got, tc.want)
			}
			if _, err := got.header(tl); err != nil {
				t.Errorf("header: %v", err)
			}
		})
	}
}
