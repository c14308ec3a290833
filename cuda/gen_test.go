package cuda

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestGenParamsLayout pins the Go mirrors of the gathering kernel's and
// the pyramid kernel's parameter blocks to the offsets the C structs have
// (natural alignment, 8-byte pointers): a field added on one side only
// shifts everything after it.
func TestGenParamsLayout(t *testing.T) {
	var gp genParams
	var pa pyramidArgs
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof Params", unsafe.Sizeof(gp.kernelParams), 224},
		{"offsetof level", unsafe.Offsetof(gp.level), 224},
		{"offsetof lvl_row", unsafe.Offsetof(gp.lvlRow), 248},
		{"offsetof lvl_width", unsafe.Offsetof(gp.lvlWidth), 320},
		{"offsetof k_blocks", unsafe.Offsetof(gp.kBlocks), 356},
		{"offsetof q_order", unsafe.Offsetof(gp.qOrder), 360},
		{"offsetof st_m", unsafe.Offsetof(gp.stM), 392},
		{"offsetof row_after", unsafe.Offsetof(gp.rowAfter), 416},
		{"offsetof tau", unsafe.Offsetof(gp.tau), 428},
		{"offsetof tickets", unsafe.Offsetof(gp.tickets), 432},
		{"sizeof GenParams", unsafe.Sizeof(gp), 440},
		{"offsetof PyramidArgs.sn", unsafe.Offsetof(pa.sn), 48},
		{"offsetof PyramidArgs.dst", unsafe.Offsetof(pa.dst), 64},
		{"offsetof PyramidArgs.lvl_width", unsafe.Offsetof(pa.lvlWidth), 152},
		{"offsetof PyramidArgs.top", unsafe.Offsetof(pa.top), 208},
		{"sizeof PyramidArgs", unsafe.Sizeof(pa), 224},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

// TestGenStats checks the host's weighting of pooled entries against the
// CPU executor's rule, ⌈n/2^(h-1)⌉/n of a block of n keys, on a plan
// whose last block is short.
func TestGenStats(t *testing.T) {
	tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 64, Nk: 200, D: 64, Dv: 64}, BlockQ: 64, BlockK: 64}
	p := &plan.Plan{Tiling: tl}
	n := make([]uint64, genCounters)
	n[0], n[1], n[5] = 3, 3, 2
	n[6+2*(2-2)] = 1   // level 2, a full block: 32/64
	n[6+2*(4-2)+1] = 2 // level 4 on the last block of 8 keys: 1/8 each
	n[6+2*(8-2)+1] = 1 // level 8 on it: one pooled row for 8 keys
	s := genStats(n, p, 4)
	want := 3 + 0.5 + 2*1.0/8 + 1.0/8
	if s.QKBlocks != want || s.PVBlocks != want || s.Stopped != 2 || s.DenseBlocks != 4 {
		t.Fatalf("genStats = %+v, want QK = PV = %v, 2 stopped, 4 dense", s, want)
	}
}

// TestChooseGenKernel checks which gathering kernel a plan gets: the
// warp-specialized one on Hopper for 128-row blocks, in both passes of a
// two-pass plan, within the shared memory an H100 allows, at 128-key tiles
// in 2 stages for levels and 128-key blocks unless Tactics.GenNarrowTiles
// (else 64 in 4); the mma.sync one for 64-row blocks and off Hopper.
func TestChooseGenKernel(t *testing.T) {
	hopper := kernelChoice{warpRows: 32, tileK: 64, wgmma: true, ws: true, ctaRows: 128, gen: true}
	ampere := kernelChoice{warpRows: 32, tileK: 64, gen: true}
	narrow := hopper
	narrow.genNarrow = true
	const h100Shared = 227 * 1024
	for _, c := range []struct {
		name       string
		kc         kernelChoice
		bq, bk, d  int
		levels     bool
		ws         bool
		kt, stages int // the tiles and slots chosen
	}{
		{"hopper, 128-row blocks, orders", hopper, 128, 64, 128, false, true, 64, 4},
		{"hopper, 128-row blocks, levels", hopper, 128, 64, 128, true, true, 128, 2},
		{"hopper, levels, narrow tiles", narrow, 128, 64, 128, true, true, 64, 4},
		{"hopper, 128-key blocks, orders", hopper, 128, 128, 128, false, true, 128, 2},
		{"hopper, 128-key blocks, narrow tiles", narrow, 128, 128, 128, false, true, 64, 4},
		{"hopper, 128-row blocks, D64", hopper, 128, 64, 64, false, true, 64, 4},
		{"hopper, 64-row blocks", hopper, 64, 64, 128, false, false, 64, 2},
		{"sm_80, 128-row blocks", ampere, 128, 64, 128, false, false, 64, 2},
	} {
		tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 300, Nk: 300, D: c.d, Dv: c.d}, Causal: !c.levels, BlockQ: c.bq, BlockK: c.bk}
		b, err := plan.NewBuilder(tl)
		if err != nil {
			t.Fatal(err)
		}
		probe := plan.Plan{Tiling: tl}
		lv := plan.Full
		if c.levels {
			lv = plan.Level(2)
		}
		for row := range probe.Rows() {
			b.Add(row, 0, lv)
		}
		if !c.levels {
			b.SetStop(&plan.StopRule{Tau: 0.1})
		}
		p, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if !c.levels {
			init := *p
			init.Stop = nil
			p.Init = &init
		}
		v, err := chooseVariant(p, tensor.BFloat16, c.kc)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !v.gen.on || v.gen.ws != c.ws {
			t.Errorf("%s: kernel %s, want the gathering kernel with ws = %v", c.name, v, c.ws)
		}
		if v.kt != c.kt || v.stages != c.stages {
			t.Errorf("%s: kernel %s, want %d-key tiles in %d stages", c.name, v, c.kt, c.stages)
		}
		if c.ws && (v.threads() != 384 || v.sharedBytes() > h100Shared) {
			t.Errorf("%s: %d threads, %d bytes of shared memory; want 384 and at most %d", c.name, v.threads(), v.sharedBytes(), h100Shared)
		}
		if p.Init != nil {
			vi, err := initVariant(p, v)
			if err != nil {
				t.Fatal(err)
			}
			if vi.gen.ws != v.gen.ws || vi.gen.state != 1 || v.gen.state != 2 {
				t.Errorf("%s: Init pass %s after %s, want the same kernel saving what the main pass resumes", c.name, vi, v)
			}
		}
	}
}

// TestGenRowOrder checks the persistent gathering kernel's launch order:
// none for rows all alike; otherwise every row once, each head's rows
// together and longest first.
func TestGenRowOrder(t *testing.T) {
	tl := plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: 2, Hkv: 1, Nq: 512, Nk: 512, D: 64, Dv: 64}, Causal: true, BlockQ: 128, BlockK: 64}
	dense, err := plan.Dense(tl)
	if err != nil {
		t.Fatal(err)
	}
	alike, err := plan.FromMask(tl, func(b, h, qb, kb int) bool { return kb == 0 })
	if err != nil {
		t.Fatal(err)
	}
	// Levels: rows by key slots, not entries. Row 0 has 4 entries at
	// level 4 (32 slots), row 1 one Full (64), row 2 two at level 2 (64),
	// row 3 three Full (192), of head 0; head 1 has none.
	lt := tl
	lt.Causal = false
	bld, err := plan.NewBuilder(lt)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		row, n int
		lv     plan.Level
	}{{0, 4, 4}, {1, 1, plan.Full}, {2, 2, 2}, {3, 3, plan.Full}} {
		for kb := range a.n {
			bld.Add(a.row, kb, a.lv)
		}
	}
	leveled, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := genRowOrder(leveled), []int32{3, 1, 2, 0, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("levels: order %v, want %v", got, want)
	}
	for _, c := range []struct {
		name string
		p    *plan.Plan
		nil  bool
	}{
		{"causal dense", dense, false},
		{"one block a row", alike, true},
	} {
		o := genRowOrder(c.p)
		if c.nil {
			if o != nil {
				t.Errorf("%s: order %v, want none", c.name, o)
			}
			continue
		}
		qb, rows := c.p.QBlocks(), c.p.Rows()
		if len(o) != rows {
			t.Fatalf("%s: %d rows ordered, want %d", c.name, len(o), rows)
		}
		seen := make([]bool, rows)
		length := func(r int32) int { return c.p.RowStart[r+1] - c.p.RowStart[r] }
		for i, r := range o {
			if seen[r] || int(r)/qb != i/qb {
				t.Fatalf("%s: order %v: row %d repeated or outside its head", c.name, o, r)
			}
			seen[r] = true
			if i%qb > 0 && length(r) > length(o[i-1]) {
				t.Fatalf("%s: order %v: row %d longer than the one before", c.name, o, r)
			}
		}
	}
}
