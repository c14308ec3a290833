package cuda

import (
	"testing"
	"unsafe"
)

// TestUniArgsLayout checks uniArgs and xattnArgs against struct UniArgs in
// kernels/plan_unisparse.cu (3 pointers, 12 int32, 1 double) and struct
// XattnArgs in kernels/plan_xattn.cu.
func TestUniArgsLayout(t *testing.T) {
	if got := unsafe.Sizeof(uniArgs{}); got != 80 {
		t.Errorf("uniArgs is %d bytes, struct UniArgs 80", got)
	}
	// struct XattnArgs: 3 pointers, 4 int32, 1 double.
	if got := unsafe.Sizeof(xattnArgs{}); got != 48 {
		t.Errorf("xattnArgs is %d bytes, struct XattnArgs 48", got)
	}
}
