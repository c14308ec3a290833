package cuda

import (
	"context"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestWideDense checks which tilings a dense runner widens by default, and
// that the wider blocks keep the problem: the same geometry, masking and
// query blocks.
func TestWideDense(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 1000, Nk: 1000, D: 64, Dv: 64}
	for _, c := range []struct {
		name   string
		bq, bk int
		causal bool
		ok     bool
	}{
		{"128x64 causal", 128, 64, true, true},
		{"128x64 non-causal", 128, 64, false, true},
		{"128x128 already wide", 128, 128, true, false},
		{"64x64", 64, 64, true, false},
		{"128x32", 128, 32, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tl := plan.Tiling{Geometry: g, Causal: c.causal, BlockQ: c.bq, BlockK: c.bk}
			w, ok := wideDense(tl)
			if ok != c.ok {
				t.Fatalf("widened = %v, want %v", ok, c.ok)
			}
			want := tl
			if ok {
				want.BlockK = 128
			}
			if w != want {
				t.Fatalf("got %+v, want %+v", w, want)
			}
		})
	}
}

// TestAskedStats checks that counters of a widened dense pass come back in
// the caller's blocks: a whole pass exactly as the caller's dense count, a
// partial one as the same share, and an unwidened runner's unchanged.
func TestAskedStats(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 1000, Nk: 1000, D: 64, Dv: 64}
	asked := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	wide, _ := wideDense(asked)
	pa, err := plan.Dense(asked)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := plan.Dense(wide)
	if err != nil {
		t.Fatal(err)
	}
	na, nw := pa.DenseBlocks(), pw.DenseBlocks()
	if na == nw {
		t.Fatalf("dense blocks %d at both widths: the test needs them to differ", na)
	}
	r := &Runner{askedN: na}
	for _, c := range []struct {
		name string
		in   plan.Stats
		want plan.Stats
	}{
		{"whole pass", plan.Stats{DenseBlocks: float64(nw), QKBlocks: float64(nw), PVBlocks: float64(nw)},
			plan.Stats{DenseBlocks: float64(na), QKBlocks: float64(na), PVBlocks: float64(na)}},
		{"half the QK", plan.Stats{DenseBlocks: float64(nw), QKBlocks: float64(nw) / 2, PVBlocks: float64(nw)},
			plan.Stats{DenseBlocks: float64(na), QKBlocks: float64(na) / 2, PVBlocks: float64(na)}},
		{"nothing", plan.Stats{DenseBlocks: float64(nw)}, plan.Stats{DenseBlocks: float64(na)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := r.askedStats(c.in); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	same := plan.Stats{DenseBlocks: float64(na), QKBlocks: 3, PVBlocks: 2}
	if got := (&Runner{}).askedStats(same); got != same {
		t.Fatalf("unwidened runner: got %+v, want %+v", got, same)
	}
}

// TestRunnerWideTiles runs dense runners with the default tactics on
// the shapes it widens (128×64 blocks: causal, non-causal, ragged N, GQA,
// BNHD, Nq < Nk) and compares them with the host path at the caller's
// tiling: the outputs within twice the rounding of P̃, which both keep in
// the inputs' 16-bit type (2^-9 relative for bfloat16) but round at
// different running maxima, so rel-L1 4e-3; and the counters equal, in the
// caller's blocks.
func TestRunnerWideTiles(t *testing.T) {
	e := openOrSkip(t)
	if !e.ws {
		t.Skip("the warp-specialized kernel (sm_90a with tensor maps) is not available")
	}
	ctx := context.Background()
	r := testutil.Rand(t)
	for _, c := range []Case{Cases()[0], Cases()[1], Cases()[4], Cases()[6], Cases()[11]} {
		t.Run(c.Name, func(t *testing.T) {
			tl, q, k, v, want, ws := hostDense(t, e, r, c)
			run, err := e.NewRunner(ctx, tl, q.DType(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer run.Close()
			if run.Tiling() != tl {
				t.Errorf("Tiling() = %+v, want the caller's %+v", run.Tiling(), tl)
			}
			dq, dk, dv := upload3(t, e, q, k, v)
			out, rep, err := run.Run(ctx, dq, dk, dv, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Free()
			if !strings.Contains(string(rep.Kernel), "_k128_") {
				t.Errorf("kernel %s: want 128-key tiles", rep.Kernel)
			}
			if rep.Stats != ws {
				t.Errorf("counters %+v, host path at the caller's blocks %+v", rep.Stats, ws)
			}
			got, err := out.Download(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m, err := metrics.CompareTensors(want, got); err != nil || m.RelL1 > 4e-3 {
				t.Errorf("wide runner vs host path: %+v %v", m, err)
			}
			t.Logf("%s: kernel %s, counters %+v", c.Name, rep.Kernel, rep.Stats)
		})
	}
}
