package cuda

// The launch order of a plan's rows (longest first, rows alike) and the
// ping-pong choice of the warp-specialized kernel.

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

func TestLongestFirst(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rowStart []int
		window   int
		want     []int32
	}{
		{"empty plan", []int{0}, 4, []int32{}},
		{"one row", []int{0, 3}, 1, []int32{0}},
		{"ties keep plan order", []int{0, 2, 4, 6}, 3, []int32{0, 1, 2}},
		{"causal rows grow", []int{0, 1, 3, 6, 10}, 4, []int32{3, 2, 1, 0}},
		{"sparse", []int{0, 2, 7, 7, 10, 15}, 5, []int32{1, 4, 3, 0, 2}},
		{"windows of two", []int{0, 1, 3, 6, 10, 11}, 2, []int32{1, 0, 3, 2, 4}},
		{"window past the end", []int{0, 1, 3}, 8, []int32{1, 0}},
		{"window of one keeps plan order", []int{0, 1, 3, 6}, 1, []int32{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := longestFirst(tc.rowStart, tc.window)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("longestFirst(%v, %d) = %v, want %v", tc.rowStart, tc.window, got, tc.want)
			}
		})
	}
}

// TestLongestFirstRandom checks longestFirst's contract on random row
// lengths: a permutation that keeps each window's rows in that window,
// longest first, ties in plan order.
func TestLongestFirstRandom(t *testing.T) {
	r := testutil.Rand(t)
	for range 50 {
		n, window := r.IntN(300), 1+r.IntN(80)
		rowStart := make([]int, n+1)
		for i := range n {
			rowStart[i+1] = rowStart[i] + r.IntN(6)
		}
		got := longestFirst(rowStart, window)
		if len(got) != n {
			t.Fatalf("n=%d window=%d: %d rows", n, window, len(got))
		}
		for i, row := range got {
			if int(row)/window != i/window {
				t.Fatalf("n=%d window=%d: row %d at %d, outside its window", n, window, row, i)
			}
			if i%window == 0 {
				continue
			}
			prev := got[i-1]
			lp, lr := rowStart[prev+1]-rowStart[prev], rowStart[row+1]-rowStart[row]
			if lp < lr || (lp == lr && prev > row) {
				t.Fatalf("n=%d window=%d: row %d (length %d) after row %d (length %d)", n, window, row, lr, prev, lp)
			}
		}
		seen := make([]bool, n)
		for _, row := range got {
			if seen[row] {
				t.Fatalf("n=%d window=%d: row %d twice", n, window, row)
			}
			seen[row] = true
		}
	}
}

func TestRowsAlike(t *testing.T) {
	for _, tc := range []struct {
		rowStart []int
		want     bool
	}{
		{[]int{0}, true},
		{[]int{0, 5}, true},
		{[]int{0, 3, 6, 9}, true},
		{[]int{0, 0, 0}, true},
		{[]int{0, 3, 6, 8}, false},
		{[]int{0, 1, 3, 6}, false},
		{[]int{0, 2, 2, 4}, false},
	} {
		if got := rowsAlike(tc.rowStart); got != tc.want {
			t.Errorf("rowsAlike(%v) = %v, want %v", tc.rowStart, got, tc.want)
		}
	}
}

// parseCase is one input of a flag-value parser and what it must give;
// a zero want with wantErr is the value returned with the error.
type parseCase[T comparable] struct {
	in      string
	want    T
	wantErr bool
}

// checkParse runs parse over the cases; every error must wrap
// ErrUnsupported.
func checkParse[T comparable](t *testing.T, name string, parse func(string) (T, error), cases []parseCase[T]) {
	t.Helper()
	for _, tc := range cases {
		got, err := parse(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s(%q) = %v, %v; want %v, error %v", name, tc.in, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s(%q) error %v does not wrap ErrUnsupported", name, tc.in, err)
		}
	}
}

func TestLaunchOrder(t *testing.T) {
	checkParse(t, "ParseLaunchOrder", ParseLaunchOrder, []parseCase[LaunchOrder]{
		{"auto", OrderAuto, false}, {"", OrderAuto, false}, {"head", OrderHead, false}, {"longest", OrderLongest, false}, {"random", OrderAuto, true},
	})
	// window 0: head by head (no uploaded order); -1: one window of all
	// rows.
	for _, tc := range []struct {
		o      LaunchOrder
		nk, d  int
		heads  int
		ws     bool
		window int
	}{
		{OrderAuto, 16384, 128, 2, false, -1},
		{OrderAuto, 16385, 128, 2, false, 0},
		{OrderAuto, 32768, 64, 1, false, -1},
		{OrderAuto, 65536, 128, 1, false, 0},
		// Windows of one head: 64 rows at 8K, 512 at 64K.
		{OrderAuto, 8192, 128, 8, true, 64},
		{OrderAuto, 65536, 128, 2, true, 512},
		{OrderHead, 1024, 128, 2, false, 0},
		{OrderHead, 8192, 128, 2, true, 0},
		{OrderLongest, 1 << 20, 128, 1, false, -1},
		{OrderLongest, 8192, 128, 8, true, -1},
	} {
		g := tensor.Geometry{B: 1, Hq: tc.heads, Hkv: 1, Nq: tc.nk, Nk: tc.nk, D: tc.d, Dv: tc.d}
		p, err := plan.Dense(plan.Tiling{Geometry: g, BlockQ: 128, BlockK: 128, Causal: true})
		if err != nil {
			t.Fatal(err)
		}
		got := rowOrder(tc.o, p, variant{ws: tc.ws})
		var want []int32
		switch tc.window {
		case 0:
		case -1:
			want = longestFirst(p.RowStart, len(p.RowStart)-1)
		default:
			want = longestFirst(p.RowStart, tc.window)
		}
		if !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("rowOrder(%v, Nk=%d, D=%d, %d heads, ws %v) differs from the window of %d rows", tc.o, tc.nk, tc.d, tc.heads, tc.ws, tc.window)
		}
	}
	// Rows all alike (dense non-causal): the persistent kernel needs no
	// uploaded order.
	g := tensor.Geometry{B: 1, Hq: 4, Hkv: 1, Nq: 8192, Nk: 8192, D: 128, Dv: 128}
	p, err := plan.Dense(plan.Tiling{Geometry: g, BlockQ: 128, BlockK: 128})
	if err != nil {
		t.Fatal(err)
	}
	if got := rowOrder(OrderAuto, p, variant{ws: true}); got != nil {
		t.Errorf("rowOrder(auto, dense non-causal, ws) = %d rows, want nil", len(got))
	}
}

func TestPingPong(t *testing.T) {
	checkParse(t, "ParsePingPong", ParsePingPong, []parseCase[PingPongMode]{
		{"auto", PingPongAuto, false}, {"", PingPongAuto, false}, {"on", PingPongOn, false}, {"off", PingPongOff, false}, {"yes", PingPongAuto, true},
	})
	// Nq ≠ Nk and a ragged last block: a dense non-causal plan still lists
	// every block.
	g := tensor.Geometry{B: 2, Hq: 4, Hkv: 2, Nq: 300, Nk: 1000, D: 128, Dv: 128}
	tl := plan.Tiling{Geometry: g, BlockQ: 128, BlockK: 128}
	dense, err := plan.Dense(tl)
	if err != nil {
		t.Fatal(err)
	}
	// Rows alike but sparse: every query block keeps key blocks 0 and 2.
	alike, err := plan.FromMask(tl, func(b, h, qb, kb int) bool { return kb%2 == 0 && kb < 4 })
	if err != nil {
		t.Fatal(err)
	}
	tl.Causal = true
	causal, err := plan.Dense(tl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    PingPongMode
		p    *plan.Plan
		want bool
	}{
		{"auto dense", PingPongAuto, dense, false},
		{"auto sparse rows alike", PingPongAuto, alike, true},
		{"auto causal", PingPongAuto, causal, true},
		{"on dense", PingPongOn, dense, true},
		{"off causal", PingPongOff, causal, false},
		{"off sparse", PingPongOff, alike, false},
	} {
		if got := pingPong(tc.m, tc.p.Causal, skipsBlocks(tc.p)); got != tc.want {
			t.Errorf("%s: pingPong = %v, want %v", tc.name, got, tc.want)
		}
	}
}
