package cuda

import (
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
		{"sizeof GenParams", unsafe.Sizeof(gp), 432},
		{"offsetof PyramidArgs.dst", unsafe.Offsetof(pa.dst), 32},
		{"sizeof PyramidArgs", unsafe.Sizeof(pa), 80},
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
