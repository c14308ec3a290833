package cuda

import (
	"testing"
	"unsafe"
)

// TestBmArgsLayout checks bmOp and bmArgs against struct BmOp (2
// pointers, 3 int64, 4 int32: 56 bytes) and struct BmArgs (2 BmOp, 2
// pointers, 15 int32, 1 float, 1 double: 200 bytes, the double at 192) in
// kernels/block_mass.cuh.
func TestBmArgsLayout(t *testing.T) {
	if got := unsafe.Sizeof(bmOp{}); got != 56 {
		t.Errorf("bmOp is %d bytes, struct BmOp 56", got)
	}
	var a bmArgs
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"size", unsafe.Sizeof(a), 200},
		{"ework", unsafe.Offsetof(a.ework), 112},
		{"chunks", unsafe.Offsetof(a.chunks), 128},
		{"rule", unsafe.Offsetof(a.rule), 184},
		{"lscale", unsafe.Offsetof(a.lscale), 188},
		{"thresh", unsafe.Offsetof(a.thresh), 192},
	} {
		if c.got != c.want {
			t.Errorf("bmArgs %s at %d, struct BmArgs at %d", c.name, c.got, c.want)
		}
	}
}
