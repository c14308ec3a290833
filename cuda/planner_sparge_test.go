package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
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
// for two blocks an SM where they can, shrink as rows grow, shrink while
// there are fewer than spargeSearchBlocksPerSM blocks an SM, and the
// layout fails with ErrUnsupported where one row does not fit.
func TestSpargeSearchLayout(t *testing.T) {
	const maxShared, sms = 227 << 10, 132 // an H100's opt-in shared memory and SMs
	for _, c := range []struct {
		nkb, per, nbkv, sr int
		fail               bool
	}{
		{spargeSearchMin, 256, 8, 4, false}, // 8K, Hq 32, Hkv 8: 8 rows make 256 blocks, 4 make 512
		{spargeSearchMin, 256, 1, 1, false}, // 256 blocks at most: the most blocks
		{1024, 1024 * 4, 8, 8, false},       // 105 KiB
		{2048, 2048 * 4, 8, 4, false},       // 85 KiB; 8 rows' 169 KiB would leave one block an SM
		{16384, 16384, 8, 1, false},         // 133 KiB: only one block fits
		{40000, 40000, 8, 0, true},
	} {
		sr, dyn, err := spargeSearchLayout(c.nkb, c.per, c.nbkv, sms, maxShared)
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

// TestSpargePoolMeans checks the pooled means of sparge's pool kernels
// bit for bit against the CPU's rule (sparge.blockStats: Σ_n x[n, d] in
// token order in float32, or in float64 where that overflows, divided by
// the count in float64, the query side times the softmax scale), and their
// CosSim against the float64 formula, on ragged blocks of bfloat16 and
// float16, D 128, 96 and 64, both layouts, with sparge_pool_vec (where it
// runs) and sparge_pool, and with blocks that hold a zero token,
// subnormals, a token whose float32 |x|² overflows and a column whose
// float32 sum does (bfloat16), and values 44 binades apart in one column.
// It needs a GPU.
func TestSpargePoolMeans(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	r := testutil.Rand(t)
	for _, c := range []struct {
		dt     tensor.DType
		layout tensor.Layout
		d, bq  int
	}{
		{tensor.BFloat16, tensor.BHND, 128, 128},
		{tensor.BFloat16, tensor.BNHD, 64, 64},
		{tensor.Float16, tensor.BHND, 64, 128},
		{tensor.Float16, tensor.BNHD, 128, 64},
		{tensor.BFloat16, tensor.BHND, 96, 128}, // sparge_pool: 96 is not 8 times a power of two
	} {
		t.Run(fmt.Sprintf("%v %v D%d bq%d", c.dt, c.layout, c.d, c.bq), func(t *testing.T) {
			const n = 300
			g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: n, Nk: n, D: c.d, Dv: c.d}
			tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: c.bq, BlockK: 64}
			q := testutil.Gaussian(t, r, c.dt, c.layout, tensor.Shape{B: 1, H: g.Hq, N: n, D: c.d}, 1)
			k := testutil.Gaussian(t, r, c.dt, c.layout, tensor.Shape{B: 1, H: g.Hkv, N: n, D: c.d}, 1)
			// Query block 0 of head 0: 2^14 and a small value in one column,
			// 44 binades apart in bfloat16, a subnormal in float16.
			small := float32(0x1p-30)
			if c.dt == tensor.Float16 {
				small = 0x1p-20
			}
			q.Set(0, 0, 5, 3, 0x1p14)
			q.Set(0, 0, 70, 3, small)
			q.Set(0, 1, 130, 7, -small)
			zero := make([]float32, c.d)
			k.WriteRow(0, 1, 65, zero) // a zero token: no unit vector
			q.WriteRow(0, 2, 200, zero)
			if c.dt == tensor.BFloat16 {
				big := make([]float32, c.d)
				for i := range big {
					big[i] = 0x1p60 // |x|² past float32: the float64 norm
				}
				k.WriteRow(0, 0, 130, big)
				q.WriteRow(0, 3, 10, big)
				// Query block 0 of head 1, column 9: 2^127 twice, a float32
				// sum of 2^128 (the float64 sum again).
				q.Set(0, 1, 20, 9, 0x1p127)
				q.Set(0, 1, 21, 9, 0x1p127)
			}
			var dev [3]*Tensor
			for i, h := range []*tensor.Tensor{q, k, k} {
				var err error
				if dev[i], err = e.Upload(ctx, h); err != nil {
					t.Fatal(err)
				}
				defer dev[i].Free()
			}
			for _, scalar := range []bool{false, true} {
				spargePoolCheck(t, e, tl, q, k, dev, scalar, !scalar && c.d != 96)
			}
		})
	}
}

// spargePoolCheck is TestSpargePoolMeans on one input: it plans with
// sparge_pool_vec where it runs unless scalar, and checks which kernel ran
// (vec) and the pooled means and CosSims.
func spargePoolCheck(t *testing.T, e *Engine, tl plan.Tiling, q, k *tensor.Tensor, dev [3]*Tensor, scalar, vec bool) {
	t.Helper()
	ctx := context.Background()
	g := tl.Geometry
	n, d, bq := g.Nq, g.D, tl.BlockQ
	run, err := e.NewRunner(ctx, tl, q.DType(), sparge.Planner{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	sp := run.planner.(*spargePlanner)
	sp.scalarPool = scalar
	if _, err := run.Plan(ctx, dev[0], dev[1], dev[2]); err != nil {
		t.Fatal(err)
	}
	l := &sp.launch
	if l.vec != vec {
		t.Fatalf("sparge_pool_vec chosen %v, want %v", l.vec, vec)
	}
	qm, qsim := make([]float64, l.qRows*int64(d)), make([]float64, l.qRows)
	km, ksim := make([]float64, l.kRows*int64(d)), make([]float64, l.kRows)
	err = e.dev.Do(ctx, func(dc *driver.Ctx) error {
		if err := dc.Sync(); err != nil {
			return err
		}
		for _, o := range []struct {
			dst []float64
			src uint64
		}{{qm, l.qm}, {qsim, l.qsim}, {km, l.kmt}, {ksim, l.ksim}} {
			if err := driver.CopyOut(dc, o.dst, driver.Ptr(o.src)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(side string, x *tensor.Tensor, h, lo, hi int, scale float64, mean []float64, sim float64) {
		want, wantSim := poolStats(x, h, lo, hi)
		for d := range want {
			if scale != 0 {
				want[d] *= scale
			}
			if math.Float64bits(mean[d]) != math.Float64bits(want[d]) {
				t.Errorf("vec %v: %s head %d tokens [%d, %d) dim %d: mean %x, CPU %x", vec, side, h, lo, hi, d, mean[d], want[d])
				return
			}
		}
		// Looser than the self-test's spargeSimTol (3.1e-5 at n = d = 128),
		// which checks the bound itself: here a gross error (a lost token,
		// a wrong norm) is what is looked for.
		if math.Abs(sim-wantSim) > 1e-4 {
			t.Errorf("vec %v: %s head %d tokens [%d, %d): CosSim %g, float64 %g", vec, side, h, lo, hi, sim, wantSim)
		}
	}
	nqb, nkb := (n+bq-1)/bq, (n+63)/64
	for h := range g.Hq {
		for qb := range nqb {
			i := h*nqb + qb
			check("query", q, h, qb*bq, min(n, (qb+1)*bq), float64(l.a.scale), qm[i*d:(i+1)*d], qsim[i])
		}
	}
	for h := range g.Hkv {
		for kb := range nkb {
			i := h*nkb + kb
			check("key", k, h, kb*64, min(n, (kb+1)*64), 0, km[i*d:(i+1)*d], ksim[i])
		}
	}
}

// poolStats is sparge.blockStats for tokens [lo, hi) of head h, batch 0:
// the mean token, summed in token order in float32 (in float64 where that
// overflows), and CosSim in float64.
func poolStats(x *tensor.Tensor, h, lo, hi int) ([]float64, float64) {
	d := x.Shape().D
	row := make([]float32, d)
	sum32, sum64 := make([]float32, d), make([]float64, d)
	mean, unit := make([]float64, d), make([]float64, d)
	for n := lo; n < hi; n++ {
		x.ReadRow(0, h, n, row)
		nn := 0.0
		for i, v := range row {
			sum32[i] += v
			sum64[i] += float64(v)
			nn += float64(v) * float64(v)
		}
		if nn == 0 {
			continue
		}
		inv := 1 / math.Sqrt(nn)
		for i, v := range row {
			unit[i] += float64(v) * inv
		}
	}
	cnt := float64(hi - lo)
	sim := 0.0
	for i := range mean {
		mean[i] = float64(sum32[i])
		if math.IsInf(mean[i], 0) {
			mean[i] = sum64[i]
		}
		mean[i] /= cnt
		sim += unit[i] * unit[i]
	}
	return mean, sim / (cnt * cnt)
}

// TestSpargeRowsLayouts checks sparge_rows_search's plans against the CPU
// planner's, row for row, with every plan-row count a block may take (1,
// 2, 4 and 8; and the layout's own choice), with the θ judge off (θ −1),
// so that nothing may differ: at 8K on the llm workload (B=1, Hq=32,
// Hkv=8, D=128, 128×64 blocks, causal: 128 key blocks, 128 threads, rows
// of at most 128 blocks sorted in registers), and on Gaussian inputs of
// 200 key blocks, not causal (256 threads, the radix select). It needs a
// GPU.
func TestSpargeRowsLayouts(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	r := testutil.Rand(t)
	w, err := workload.Generate(ctx, workload.Config{Kind: workload.LLM, Seed: 7, B: 1, Hq: 32, Hkv: 8, N: 8192, D: 128,
		DType: tensor.BFloat16, Layout: tensor.BHND})
	if err != nil {
		t.Fatal(err)
	}
	g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 12800, Nk: 12800, D: 128, Dv: 128}
	gauss := func(h int) *tensor.Tensor {
		return testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: h, N: g.Nq, D: g.D}, 1)
	}
	for _, c := range []struct {
		name    string
		causal  bool
		q, k, v *tensor.Tensor
	}{
		{"llm 8K causal", true, w.Q, w.K, w.V},
		{"Gaussian 12800 non-causal", false, gauss(4), gauss(2), gauss(2)},
	} {
		s := c.q.Shape()
		tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: s.H, Hkv: c.k.Shape().H, Nq: s.N, Nk: s.N, D: s.D, Dv: s.D},
			Causal: c.causal, BlockQ: 128, BlockK: 64}
		var dev [3]*Tensor
		for i, h := range []*tensor.Tensor{c.q, c.k, c.v} {
			if dev[i], err = e.Upload(ctx, h); err != nil {
				t.Fatal(err)
			}
			defer dev[i].Free()
		}
		for _, p := range []sparge.Planner{
			{Params: sparge.Params{CDF: 0.95, Theta: -1}},
			{Params: sparge.Params{TopK: 0.3, Theta: -1}, Sink: true},
		} {
			want, err := p.Plan(ctx, tl, c.q, c.k, c.v)
			if err != nil {
				t.Fatal(err)
			}
			for _, rows := range []int{0, 1, 2, 4, 8} {
				run, err := e.NewRunner(ctx, tl, tensor.BFloat16, p)
				if err != nil {
					t.Fatal(err)
				}
				sp := run.planner.(*spargePlanner)
				sp.rows = rows
				if _, err := run.Plan(ctx, dev[0], dev[1], dev[2]); err != nil {
					t.Fatal(err)
				}
				got, err := run.DownloadPlan(ctx)
				run.Close()
				if err != nil {
					t.Fatal(err)
				}
				differ := 0
				for row := range want.Rows() {
					a, _ := want.Entries(row)
					b, _ := got.Entries(row)
					if !slices.Equal(a, b) {
						if differ == 0 {
							t.Errorf("%s %+v, %d rows a block: row %d: device %v, CPU %v", c.name, p.Params, sp.launch.sr, row, b, a)
						}
						differ++
					}
				}
				t.Logf("%s %+v: %d rows a block (%d threads): rows differ %d/%d, kept %d/%d", c.name, p.Params, sp.launch.sr, sp.launch.threads,
					differ, want.Rows(), len(got.KVBlock), len(want.KVBlock))
			}
		}
	}
}
