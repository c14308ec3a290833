package tensor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// finiteShapes are a small tensor (one chunk, scanned inline) and one of
// three chunks, scanned by several goroutines.
var finiteShapes = []Shape{
	{B: 2, H: 2, N: 3, D: 5},
	{B: 2, H: 4, N: 300, D: 64},
}

// filled returns a tensor of finite, non-zero values (so that the scan is
// not timed or tested on zeros), the largest finite value included.
func filled(t *testing.T, dt DType, l Layout, s Shape) *Tensor {
	t.Helper()
	x, err := New(dt, l, s)
	if err != nil {
		t.Fatal(err)
	}
	for b := range s.B {
		for h := range s.H {
			for n := range s.N {
				for d := range s.D {
					x.Set(b, h, n, d, float32((b+3*h+5*n+7*d)%11)-5.5)
				}
			}
		}
	}
	big := map[DType]float32{Float32: math.MaxFloat32, Float16: 65504, BFloat16: 3.3895314e38}[dt]
	x.Set(s.B-1, 0, s.N/2, 0, -big)
	return x
}

func TestCheckFiniteAll(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, s := range finiteShapes {
		for _, dt := range []DType{Float32, Float16, BFloat16} {
			for _, l := range []Layout{BHND, BNHD} {
				x := filled(t, dt, l, s)
				name := fmt.Sprintf("%v/%v/%v", s, dt, l)
				if err := x.CheckFinite("q"); err != nil {
					t.Fatalf("%s finite: %v", name, err)
				}
				for _, c := range []struct {
					what string
					v    float32
				}{{"NaN", nan}, {"+Inf", inf}, {"-Inf", -inf}} {
					for _, at := range [][4]int{
						{0, 0, 0, 0},
						{s.B / 2, s.H / 2, s.N / 2, s.D / 2},
						{s.B - 1, s.H - 1, s.N - 1, s.D - 1},
					} {
						old := x.At(at[0], at[1], at[2], at[3])
						x.Set(at[0], at[1], at[2], at[3], c.v)
						checkAt(t, fmt.Sprintf("%s %s at %v", name, c.what, at), x.CheckFinite("q"), "q", at, c.v)
						x.Set(at[0], at[1], at[2], at[3], old)
					}
				}
				// Several non-finite elements: the first in (b, h, n, d)
				// order is reported, although in BNHD the second comes
				// first in memory.
				first := [4]int{0, 0, s.N - 1, 1}
				x.Set(0, 0, s.N-1, 1, -inf)
				x.Set(0, 1, 0, 0, nan)
				x.Set(s.B-1, s.H-1, s.N-1, s.D-1, inf)
				checkAt(t, name+" several", x.CheckFinite("q"), "q", first, -inf)
			}
		}
	}
}

// checkAt fails unless err is a *NonFiniteError for tensor name at the
// logical index want, holding v.
func checkAt(t *testing.T, what string, err error, name string, want [4]int, v float32) {
	t.Helper()
	var nf *NonFiniteError
	if !errors.As(err, &nf) || !errors.Is(err, ErrNonFinite) {
		t.Fatalf("%s: got %v, want a NonFiniteError", what, err)
	}
	if got := [4]int{nf.B, nf.H, nf.N, nf.D}; got != want || nf.Name != name {
		t.Errorf("%s: reported %s at %v, want %s at %v", what, nf.Name, got, name, want)
	}
	if nf.Value != v && !(v != v && nf.Value != nf.Value) {
		t.Errorf("%s: value %v, want %v", what, nf.Value, v)
	}
}

func TestCheckFiniteAllOrder(t *testing.T) {
	s := finiteShapes[1]
	for _, dt := range []DType{Float32, BFloat16} {
		q, k, v := filled(t, dt, BHND, s), filled(t, dt, BNHD, s), filled(t, dt, BHND, s)
		ctx := context.Background()
		if err := CheckFiniteAll(ctx, Named{"q", q}, Named{"k", k}, Named{"v", v}, Named{"none", nil}); err != nil {
			t.Fatalf("%v finite: %v", dt, err)
		}
		// k's non-finite element sits in its last chunk, v's in its first:
		// k is named, being first in argument order.
		k.Set(s.B-1, s.H-1, s.N-1, s.D-1, float32(math.NaN()))
		v.Set(0, 0, 0, 0, float32(math.Inf(-1)))
		checkAt(t, dt.String(), CheckFiniteAll(ctx, Named{"q", q}, Named{"k", k}, Named{"v", v}), "k", [4]int{s.B - 1, s.H - 1, s.N - 1, s.D - 1}, float32(math.NaN()))
		checkAt(t, dt.String()+" v first", CheckFiniteAll(ctx, Named{"v", v}, Named{"k", k}), "v", [4]int{}, float32(math.Inf(-1)))

		canceled, cancel := context.WithCancel(ctx)
		cancel()
		if err := CheckFiniteAll(canceled, Named{"q", q}); !errors.Is(err, context.Canceled) {
			t.Errorf("%v canceled: got %v, want context.Canceled", dt, err)
		}
	}
}

// TestCheckFinitePortable reruns the tests above in a child process with
// GODEBUG=cpu.avx2=off, which selects the portable scan on amd64.
func TestCheckFinitePortable(t *testing.T) {
	if strings.Contains(os.Getenv("GODEBUG"), "cpu.avx2=off") {
		t.Skip("already on the portable path")
	}
	if testing.Short() {
		t.Skip("short")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckFiniteAll", "-test.count=1")
	cmd.Env = append(os.Environ(), "GODEBUG=cpu.avx2=off")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("portable path: %v\n%s", err, out)
	}
}
