package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestPsaArgsLayout checks the Go mirror of struct PsaArgs
// (kernels/psa.cuh): twelve pointers, 15 doubles, the seed, 18 ints and
// a float, padded to 8 bytes: 304 bytes.
func TestPsaArgsLayout(t *testing.T) {
	var a psaArgs
	if got := unsafe.Sizeof(a); got != 304 {
		t.Errorf("psaArgs is %d bytes, PsaArgs 304", got)
	}
	if got := unsafe.Offsetof(a.seed); got != 216 {
		t.Errorf("seed at %d, want 216", got)
	}
	if got := unsafe.Offsetof(a.oq); got != 248 {
		t.Errorf("oq at %d, want 248", got)
	}
	if got := unsafe.Offsetof(a.blocks); got != 292 {
		t.Errorf("blocks (P) at %d, want 292", got)
	}
	if got := unsafe.Offsetof(a.lscale); got != 296 {
		t.Errorf("lscale at %d, want 296", got)
	}
}

// TestPsaShape checks the estimator layouts the device planner derives:
// rows padded to 16, columns per block to a power of two, widths to 64,
// the tiles and units of the longest row, and psa_score's work item
// (query heads G, query blocks P, pipeline stages and their head dims
// kc): the most rows per multiprocessor within 128 rows a CTA, two CTAs
// when the shared memory (rows·(wp+8)·2 + stages·256·(kc+8) bytes, twice
// when split) is at most 104 KiB, one up to 220 KiB; then stages of 128
// head dims where wp allows, then the most stages.
func TestPsaShape(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 1000, Nk: 1000, D: 96, Dv: 96}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	for _, c := range []struct {
		p                                  psa.Planner
		rq, cp, w, wp, tiles, units, heads int
		blocks, stages, kc                 int
	}{
		// 32 sampled queries, 16 keys per block; 16 blocks of 16 columns.
		// Both heads by 2 blocks: 128 rows; two stages of 128 dims,
		// 104448 bytes, two CTAs (three would take 139264: one).
		{psa.Planner{}, 32, 16, 96, 128, 4, 16, 2, 2, 2, 128},
		// 13 → 16 rows, 5 → 8 columns: 128 columns, 8 per unit; 2 heads
		// by 4 blocks.
		{psa.Planner{SampleQ: 13, SampleK: 5}, 16, 8, 96, 128, 2, 16, 2, 4, 2, 128},
		// Stride 8: 16 query groups, 8 key groups, width 8·96. Rows of
		// 776 elements: 112 rows (1 head by 7 blocks) and 2 stages fill
		// 210688 bytes, one CTA; 128 rows exceed 220 KiB, and 32 rows
		// with 2 stages fit two CTAs (64 rows), which is less; stages of
		// 128 dims would hold only 96 rows.
		{psa.Planner{Estimator: psa.Antidiagonal}, 16, 8, 768, 768, 2, 16, 1, 7, 2, 64},
		// Stride 3: 43 → 48 rows, 22 → 32 columns, width 288 → 320;
		// 512 columns in 8 tiles, one unit per block. 96 rows with 2
		// stages (99840 bytes) fit two CTAs; 320 is no multiple of 128.
		{psa.Planner{Estimator: psa.Antidiagonal, Stride: 3}, 48, 32, 288, 320, 8, 16, 2, 1, 2, 64},
	} {
		dp, err := newPsaPlanner(c.p)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := dp.(psaPlanner).shape(tl, false)
		if err != nil {
			t.Fatal(err)
		}
		if sh.rq != c.rq || sh.cp != c.cp || sh.w != c.w || sh.wp != c.wp || sh.tiles != c.tiles || sh.units != c.units || sh.heads != c.heads || sh.blocks != c.blocks || sh.stages != c.stages || sh.kc != c.kc {
			t.Errorf("%+v: shape rq %d cp %d w %d wp %d tiles %d units %d heads %d blocks %d stages %d kc %d, want %d %d %d %d %d %d %d %d %d %d", c.p,
				sh.rq, sh.cp, sh.w, sh.wp, sh.tiles, sh.units, sh.heads, sh.blocks, sh.stages, sh.kc,
				c.rq, c.cp, c.w, c.wp, c.tiles, c.units, c.heads, c.blocks, c.stages, c.kc)
		}
	}
}

// TestPsaScoreDefines: psa_score is compiled for the plan's estimator,
// operand split and unit width (min(CP, 64) columns).
func TestPsaScoreDefines(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 1024, Nk: 1024, D: 64, Dv: 64}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	for _, c := range []struct {
		p     psa.Planner
		split bool
		want  []string
	}{
		{psa.Planner{}, false, []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=16", "PSA_NS=3", "PSA_KC=64", "PSA_DIRECT=0"}},
		// Split: 96 rows (2 heads by 3 blocks) with 2 stages fit two CTAs.
		{psa.Planner{SampleQ: 13, SampleK: 5}, true, []string{"PSA_EST=0", "PSA_SPLIT=1", "PSA_CPU=8", "PSA_NS=2", "PSA_KC=64", "PSA_DIRECT=0"}},
		// Stride 8: 8 key groups a block, width 512, stages of 128 dims.
		{psa.Planner{Estimator: psa.Antidiagonal}, false, []string{"PSA_EST=1", "PSA_SPLIT=0", "PSA_CPU=8", "PSA_NS=2", "PSA_KC=128", "PSA_DIRECT=0"}},
	} {
		dp, err := devicePlannerFor(c.p)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := dp.(psaPlanner).shape(tl, c.split)
		if err != nil {
			t.Fatal(err)
		}
		if got := sh.scoreDefines(); !slices.Equal(got, c.want) {
			t.Errorf("%+v split=%v: %v, want %v", c.p, c.split, got, c.want)
		}
	}
}

// TestPsaDirect checks which plans psa_score reads q and k for
// (PSA_DIRECT, skipping psa_gather): Sampling on bf16 inputs with D a
// multiple of 64 and 16-byte aligned rows, in either layout or as a head
// slice of a fused QKV buffer; not Antidiagonal, split (f16, f32) inputs,
// a D whose rows are padded (96), a pointer or stride off 16 bytes, a
// token stride of 2³¹ bytes, or a last key token 2³² bytes or more in.
func TestPsaDirect(t *testing.T) {
	bf16, f16, f32 := dtypeCode(tensor.BFloat16), dtypeCode(tensor.Float16), dtypeCode(tensor.Float32)
	g := tensor.Geometry{B: 2, Hq: 8, Hkv: 2, Nq: 1000, Nk: 1000, D: 128, Dv: 128}
	dense := func(dt int32, h, d int, l tensor.Layout) view {
		st := DenseStrides(tensor.Shape{B: g.B, H: h, N: g.Nk, D: d}, l)
		return view{ptr: 1 << 20, sb: st.B, sh: st.H, sn: st.N, dtype: dt, b: int32(g.B), h: int32(h), n: int32(g.Nk), d: int32(d)}
	}
	with := func(v view, f func(*view)) view { f(&v); return v }
	// Heads of a fused [B, N, Hq + 2·Hkv, D] buffer: K starts Hq heads in.
	fused := func(lo, h int) view {
		w := int64(g.Hq+2*g.Hkv) * int64(g.D)
		return view{ptr: 1<<20 + uint64(lo*g.D*2), sb: int64(g.Nk) * w, sh: int64(g.D), sn: w, dtype: bf16, b: int32(g.B), h: int32(h), n: int32(g.Nk), d: int32(g.D)}
	}
	q, k := dense(bf16, g.Hq, 128, tensor.BHND), dense(bf16, g.Hkv, 128, tensor.BHND)
	for _, c := range []struct {
		name  string
		p     psa.Planner
		d     int
		q, k  view
		split bool
		want  bool
	}{
		{"bf16 BHND", psa.Planner{}, 128, q, k, false, true},
		{"bf16 BNHD", psa.Planner{}, 128, dense(bf16, g.Hq, 128, tensor.BNHD), dense(bf16, g.Hkv, 128, tensor.BNHD), false, true},
		{"bf16 D64", psa.Planner{SampleQ: 13, SampleK: 5}, 64, dense(bf16, g.Hq, 64, tensor.BHND), dense(bf16, g.Hkv, 64, tensor.BHND), false, true},
		{"fused QKV heads", psa.Planner{}, 128, fused(0, g.Hq), fused(g.Hq, g.Hkv), false, true},
		{"antidiagonal", psa.Planner{Estimator: psa.Antidiagonal}, 128, q, k, false, false},
		{"f16", psa.Planner{}, 128, dense(f16, g.Hq, 128, tensor.BHND), dense(f16, g.Hkv, 128, tensor.BHND), true, false},
		{"f32 keys", psa.Planner{}, 128, q, dense(f32, g.Hkv, 128, tensor.BHND), true, false},
		{"D96 padded rows", psa.Planner{}, 96, dense(bf16, g.Hq, 96, tensor.BHND), dense(bf16, g.Hkv, 96, tensor.BHND), false, false},
		{"q pointer off 8 bytes", psa.Planner{}, 128, with(q, func(v *view) { v.ptr += 8 }), k, false, false},
		{"k pointer off 2 bytes", psa.Planner{}, 128, q, with(k, func(v *view) { v.ptr += 2 }), false, false},
		{"token stride 130", psa.Planner{}, 128, with(q, func(v *view) { v.sn = 130 }), k, false, false},
		{"head stride off 8", psa.Planner{}, 128, q, with(k, func(v *view) { v.sh += 4 }), false, false},
		{"batch stride off 8", psa.Planner{}, 128, with(q, func(v *view) { v.sb += 2 }), k, false, false},
		{"token stride 2^30 elements", psa.Planner{}, 128, q, with(k, func(v *view) { v.sn = 1 << 30 }), false, false},
		{"null pointer", psa.Planner{}, 128, with(q, func(v *view) { v.ptr = 0 }), k, false, false},
		{"last key 2^32 bytes in", psa.Planner{}, 128, q, with(k, func(v *view) { v.sn, v.n = 1<<16, 1<<15+1 }), false, false},
		{"last key just below 2^32 bytes", psa.Planner{}, 128, q, with(k, func(v *view) { v.sn, v.n = 1<<16, 1<<15 }), false, true},
	} {
		gd := g
		gd.D, gd.Dv = c.d, c.d
		dp, err := newPsaPlanner(c.p)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := dp.(psaPlanner).shape(plan.Tiling{Geometry: gd, Causal: true, BlockQ: 128, BlockK: 64}, c.split)
		if err != nil {
			t.Fatal(err)
		}
		if got := psaDirect(sh, c.q, c.k); got != c.want {
			t.Errorf("%s: direct %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPsaOutlierSmem checks psa_outliers' shared memory at the timed
// shape (bf16, D 128, 128 × 64 blocks: both sides staged, the queries'
// 34 KiB leaving room for six CTAs a multiprocessor) and that an f32 block of 256 keys falls back to
// reading its input.
func TestPsaOutlierSmem(t *testing.T) {
	bf16, f32 := dtypeCode(tensor.BFloat16), dtypeCode(tensor.Float32)
	for _, c := range []struct {
		d, bs  int
		dtype  int32
		staged bool
		want   int
	}{
		{128, 128, bf16, true, (2*128+128)*4 + 128*65*4},
		{128, 64, bf16, true, (2*128+64)*4 + 64*65*4},
		{37, 64, bf16, true, (2*40+64)*4 + 64*19*4},
		{96, 64, f32, true, (2*96+64)*4 + 64*97*4},
		{128, 256, f32, false, (2*128 + 256) * 4},
	} {
		if got := psaOutlierSmem(c.d, c.bs, c.dtype, c.staged); got != c.want {
			t.Errorf("d %d bs %d dtype %d staged %v: %d bytes, want %d", c.d, c.bs, c.dtype, c.staged, got, c.want)
		}
	}
	if n := psaOutlierSmem(128, 256, f32, true); n <= psaOutlierStageMax {
		t.Errorf("an f32 block of 256 keys stages in %d bytes, within %d", n, psaOutlierStageMax)
	}
}

// TestPsaSmemLimits: on an H100 (227 KiB a CTA) the device limits are the
// constants shape uses, so shapeOn there is shape; on a GPU with 99 KiB a
// CTA (sm_86, sm_89) the default layout at D 128 keeps 64-dim stages and
// fits the device.
func TestPsaSmemLimits(t *testing.T) {
	if one, two := psaSmemLimits(232448); one != psaMaxSmem || two != psaItemSmem {
		t.Errorf("H100: limits %d, %d, want %d, %d", one, two, psaMaxSmem, psaItemSmem)
	}
	g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: 32768, Nk: 32768, D: 128, Dv: 128}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	dp, err := newPsaPlanner(psa.Planner{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		optin, kc int
	}{{232448, 128}, {101376, 64}} {
		one, two := psaSmemLimits(c.optin)
		sh, err := dp.(psaPlanner).shapeOn(tl, false, false, one, two)
		if err != nil {
			t.Fatal(err)
		}
		if sh.smem() > one || sh.kc != c.kc {
			t.Errorf("opt-in %d: %d bytes (at most %d), stages of %d dims, want %d", c.optin, sh.smem(), one, sh.kc, c.kc)
		}
	}
}

// TestPsaWarpgroupShape: psa_score takes warpgroup MMA for Sampling on
// bf16 rows where the engine has wgmma, and its layout there still leaves
// two CTAs a multiprocessor at D 128 (H100 limits); the split operands and
// Antidiagonal keep mma.sync.
func TestPsaWarpgroupShape(t *testing.T) {
	g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: 32768, Nk: 32768, D: 128, Dv: 128}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: 64}
	for _, c := range []struct {
		name         string
		p            psa.Planner
		split, wgmma bool
		want         bool
	}{
		{"sampling", psa.Planner{}, false, true, true},
		{"no wgmma", psa.Planner{}, false, false, false},
		{"split", psa.Planner{}, true, true, false},
		{"antidiagonal", psa.Planner{Estimator: psa.Antidiagonal}, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dp, err := newPsaPlanner(c.p)
			if err != nil {
				t.Fatal(err)
			}
			sh, err := dp.(psaPlanner).shapeOn(tl, c.split, c.wgmma, psaMaxSmem, psaItemSmem)
			if err != nil {
				t.Fatal(err)
			}
			if sh.wg != c.want {
				t.Fatalf("wg %v, want %v", sh.wg, c.want)
			}
			if !slices.Contains(sh.scoreDefines(), "PSA_WG=1") != !c.want {
				t.Errorf("defines %v disagree with wg %v", sh.scoreDefines(), c.want)
			}
			if c.want && (sh.smem() > psaItemSmem || sh.kc != 128 || sh.rows() != 128) {
				t.Errorf("%d bytes (two CTAs take %d), %d-dim stages, %d rows; want 128-dim stages of 128-row items", sh.smem(), psaItemSmem, sh.kc, sh.rows())
			}
		})
	}
}

// TestPsaSortNetwork runs psa_sort_regs' network (kernels/plan_psa.cu) on
// the host, position for position (64·E positions: 32E·w + E·lane + e),
// with its three kinds of step: slots of a thread, lanes of a warp, and
// the two warps. On random importances with ties and padding it must give
// the stable order psa_assign needs: heavier first, then lower index.
func TestPsaSortNetwork(t *testing.T) {
	type pair struct {
		k uint64
		x int32
	}
	precedes := func(a, b pair) bool { return a.k > b.k || (a.k == b.k && a.x < b.x) }
	r := rand.New(rand.NewPCG(7, 9))
	for _, e := range []int{1, 2, 4, 8, 16, 32} {
		for _, n := range []int{1, 33 * e, 64 * e} {
			n = min(n, 64*e)
			N := 64 * e
			v := make([]pair, N)
			for i := range v {
				v[i] = pair{0, 0x7fffffff}
				if i < n {
					v[i] = pair{math.Float64bits(float64(r.IntN(8)) / 8), int32(i)} // ties
				}
			}
			want := slices.Clone(v)
			slices.SortStableFunc(want, func(a, b pair) int {
				switch {
				case precedes(a, b):
					return -1
				case precedes(b, a):
					return 1
				}
				return 0
			})
			for kq := 2; kq <= N; kq <<= 1 {
				for j := kq >> 1; j > 0; j >>= 1 {
					next := slices.Clone(v)
					for w := 0; w < 2; w++ {
						for lane := 0; lane < 32; lane++ {
							i0 := 32*e*w + e*lane
							for s := 0; s < e; s++ {
								i := i0 + s
								up := i&kq == 0
								switch {
								case j < e: // slots: the lower one swaps
									if s&j == 0 && precedes(v[i+j], v[i]) == up {
										next[i], next[i+j] = v[i+j], v[i]
									}
								default: // lanes, or the other warp
									lower := i&j == 0
									o := v[i^j]
									if precedes(v[i], o) != (lower == up) {
										next[i] = o
									}
								}
							}
						}
					}
					v = next
				}
			}
			if !slices.Equal(v, want) {
				t.Errorf("E %d, n %d: network order differs from the stable sort", e, n)
			}
		}
	}
}

// TestPsaAssignLayout checks psa_assign's compile-time CTA, sort size and
// shared memory for rows of n2 blocks: 64 threads up to 512 blocks, then a
// thread per 8 blocks up to 256; register sorts only as wide as the
// longest row (8 positions a thread up to 2048 blocks, then 16 and 32),
// and room for the keys, importances, indices, levels and chunk sums.
func TestPsaAssignLayout(t *testing.T) {
	for _, tc := range []struct{ n2, at, e, smem int }{
		{64, 64, 8, 64*21 + 2*8},
		{512, 64, 8, 512*21 + 16*8},
		{1024, 128, 8, 1024*21 + 32*8},
		{2048, 256, 8, 2048*21 + 64*8},
		{4096, 256, 16, 4096*21 + 128*8},
		{8192, 256, 32, 8192*21 + 256*8},
		{16384, 256, 32, 16384*21 + 512*8}, // past 8192 blocks: the shared-memory network
	} {
		if at := psaAssignThreads(tc.n2); at != tc.at {
			t.Errorf("rows of %d blocks: PSA_AT %d, want %d", tc.n2, at, tc.at)
		}
		if e := psaSortPositions(tc.n2); e != tc.e {
			t.Errorf("rows of %d blocks: PSA_SORT_E %d, want %d", tc.n2, e, tc.e)
		}
		if s := psaAssignSmem(tc.n2); s != tc.smem {
			t.Errorf("rows of %d blocks: %d bytes of shared memory, want %d", tc.n2, s, tc.smem)
		}
	}
}
