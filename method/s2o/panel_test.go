package s2o

import (
	"context"
	"reflect"
	"testing"

	"github.com/sparseattn/sparseattn/internal/plantest"
)

// TestPanelPathsAgree plans every test shape with the key scores in
// kernel.Dot64Panel8's panels and with plan.Dot64x4 on row-major keys (the
// path taken without AVX-512), with and without outlier queries, and
// requires the same plans: both are plan.Dot64's bits.
func TestPanelPathsAgree(t *testing.T) {
	saved := panels
	defer func() { panels = saved }()
	for _, s := range plantest.Select(shapes) {
		q, k, v, tl := inputs(t, s)
		for _, outliers := range []int{NoOutliers, 0, 3} {
			pl := s.planner(0.01)
			pl.Outliers = outliers
			var got [2]any
			for i, use := range []bool{true, false} {
				panels = use
				p, err := pl.Plan(context.Background(), tl, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				got[i] = p
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Fatalf("%s outliers=%d: the panel and row-major scores give different plans", s.Name, outliers)
			}
		}
	}
}
