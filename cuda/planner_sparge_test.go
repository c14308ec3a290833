package cuda

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestSpargeHeader: the device planner's header carries the λ filter of
// the CPU planner's plans, and refuses what the CPU planner refuses. It
// needs no GPU.
func TestSpargeHeader(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 300, Nk: 300, D: 64, Dv: 64}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 64, BlockK: 64}
	r := testutil.Rand(t)
	q := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: 4, N: 300, D: 64}, 1)
	k := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 300, D: 64}, 1)
	for _, p := range []sparge.Planner{
		{},
		{Params: sparge.Params{CDF: 0.9, Lambda: -6}},
		{Params: sparge.Params{Lambda: -4}, RowGroup: 8},
		{Heads: []sparge.Params{{Lambda: -3}, {}, {CDF: 0.5, Lambda: -3}, {TopK: 0.2}}},
	} {
		dp, err := devicePlannerFor(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := dp.header(tl)
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.Plan(context.Background(), tl, q, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(h.Filter, want.Filter) || h.Tiling != want.Tiling {
			t.Errorf("%+v: header filter %+v, CPU plan's %+v", p, h.Filter, want.Filter)
		}
	}
	for _, p := range []sparge.Planner{
		{Params: sparge.Params{CDF: 1.5}},
		{Heads: []sparge.Params{{}}},
		{Params: sparge.Params{Lambda: -1}, RowGroup: 7},
	} {
		dp, err := devicePlannerFor(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dp.header(tl); !errors.Is(err, sparge.ErrParams) {
			t.Errorf("%+v: header error %v, want sparge.ErrParams", p, err)
		}
	}
}

// TestSpargeSearchLayout: sparge_rows_search's rows per block leave room
// for two blocks an SM where they can, shrink as rows grow, and the
// layout fails with ErrUnsupported where one row does not fit.
func TestSpargeSearchLayout(t *testing.T) {
	const maxShared = 227 << 10 // an H100's opt-in shared memory
	for _, c := range []struct {
		nkb, sr int
		fail    bool
	}{
		{spargeSearchMin, 8, false},
		{1024, 8, false},  // 105 KiB
		{2048, 4, false},  // 85 KiB; 8 rows' 169 KiB would leave one block an SM
		{16384, 1, false}, // 133 KiB: only one block fits
		{40000, 0, true},
	} {
		sr, dyn, err := spargeSearchLayout(c.nkb, maxShared)
		if c.fail {
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("%d key blocks: error %v, want ErrUnsupported", c.nkb, err)
			}
			continue
		}
		if want := c.sr * (c.nkb*8 + spargeSearchRowBytes); err != nil || sr != c.sr || dyn != want {
			t.Errorf("%d key blocks: SR %d, %d bytes, %v; want SR %d, %d bytes", c.nkb, sr, dyn, err, c.sr, want)
		}
	}
}
