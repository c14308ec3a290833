package heads

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestForEachVisitsEveryIndexOnce counts the calls per index, including
// n = 0 and n below and above GOMAXPROCS.
func TestForEachVisitsEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 3, 100} {
		calls := make([]atomic.Int32, n)
		var workers atomic.Int32
		err := ForEachWorker(context.Background(), n, func() func(int) {
			workers.Add(1)
			return func(i int) { calls[i].Add(1) }
		})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for i := range calls {
			if c := calls[i].Load(); c != 1 {
				t.Errorf("n=%d: index %d called %d times, want 1", n, i, c)
			}
		}
		if w, want := int(workers.Load()), min(runtime.GOMAXPROCS(0), n); w != want {
			t.Errorf("n=%d: %d workers, want min(GOMAXPROCS, n) = %d", n, w, want)
		}
		var plain atomic.Int32
		if err := ForEach(context.Background(), n, func(int) { plain.Add(1) }); err != nil || int(plain.Load()) != n {
			t.Errorf("n=%d: ForEach made %d calls (err %v), want %d", n, plain.Load(), err, n)
		}
	}
}

// TestForEachStopsOnCancel: a cancelled context starts no call and is
// returned; cancelling from inside a call stops the rest, each goroutine
// finishing at most the call it had taken.
func TestForEachStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int32
	if err := ForEach(ctx, 50, func(int) { calls.Add(1) }); !errors.Is(err, context.Canceled) || calls.Load() != 0 {
		t.Errorf("pre-cancelled: err %v after %d calls, want context.Canceled after 0", err, calls.Load())
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	// Other goroutines may run any number of calls before the one at index
	// 0 cancels; after it, each may finish only the call it had already
	// taken. late counts the calls that start once cancel has returned.
	var cancelled atomic.Bool
	var late atomic.Int32
	const n = 10000
	err := ForEach(ctx, n, func(i int) {
		if cancelled.Load() {
			late.Add(1)
		}
		if i == 0 {
			cancel()
			cancelled.Store(true)
		}
	})
	if !errors.Is(err, context.Canceled) || int(late.Load()) > runtime.GOMAXPROCS(0) {
		t.Errorf("cancelled at index 0: err %v with %d calls started after the cancel, want context.Canceled and at most GOMAXPROCS", err, late.Load())
	}
}

// TestCheckInputs: nil or misshapen q and k give plan.ErrInvalid naming
// the planner, the tensor and the shape the tiling needs.
func TestCheckInputs(t *testing.T) {
	g := tensor.Geometry{B: 2, Hq: 4, Hkv: 2, Nq: 10, Nk: 30, D: 8, Dv: 8}
	tl := plan.Tiling{Geometry: g, BlockQ: 16, BlockK: 16}
	mk := func(h, n, d int) *tensor.Tensor {
		x, err := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 2, H: h, N: n, D: d})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	q, k := mk(4, 10, 8), mk(2, 30, 8)
	for _, tc := range []struct {
		name string
		q, k *tensor.Tensor
		want string // "" for no error
	}{
		{"ok", q, k, ""},
		{"nil-q", nil, k, "test needs Q and K"},
		{"nil-k", q, nil, "test needs Q and K"},
		{"q-heads", mk(2, 10, 8), k, "Q is [B=2 H=2 N=10 D=8], the tiling's geometry needs [B=2 H=4 N=10 D=8]"},
		{"k-tokens", q, mk(2, 10, 8), "K is [B=2 H=2 N=10 D=8], the tiling's geometry needs [B=2 H=2 N=30 D=8]"},
		{"swapped", k, q, "Q is"},
	} {
		err := CheckInputs(tl, tc.q, tc.k, "test")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", tc.name, err)
		case tc.want != "" && (!errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalid mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestSelectBlocks: every row of the plan holds exactly the blocks its
// head's picker returned, in the picked order, at full level; each head's
// work runs once; a cancelled context is returned.
func TestSelectBlocks(t *testing.T) {
	g := tensor.Geometry{B: 2, Hq: 3, Hkv: 1, Nq: 50, Nk: 70, D: 8, Dv: 8}
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 16, BlockK: 8}
	var headCalls atomic.Int32
	// Keep the visible blocks of odd index (relative to b+h+qb), reversed.
	pick := func(b, h, qb int, visible []int32) []int32 {
		var out []int32
		for i := len(visible) - 1; i >= 0; i-- {
			if (i+b+h+qb)%2 == 1 {
				out = append(out, visible[i])
			}
		}
		return out
	}
	p, err := SelectBlocks(context.Background(), tl, func(dense *plan.Plan, b, h int) func(int, []int32) []int32 {
		headCalls.Add(1)
		return func(qb int, visible []int32) []int32 { return pick(b, h, qb, visible) }
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := int(headCalls.Load()); n != g.B*g.Hq {
		t.Errorf("%d head calls, want %d", n, g.B*g.Hq)
	}
	dense, _ := plan.Dense(tl)
	for b := range g.B {
		for h := range g.Hq {
			for qb := range dense.QBlocks() {
				visible, _ := dense.Entries(dense.Row(b, h, qb))
				want := pick(b, h, qb, visible)
				got, levels := p.Entries(p.Row(b, h, qb))
				if len(got) != len(want) {
					t.Fatalf("b%d h%d qb%d: blocks %v, want %v", b, h, qb, got, want)
				}
				for i := range want {
					if got[i] != want[i] || (levels != nil && levels[i] != plan.Full) {
						t.Fatalf("b%d h%d qb%d: blocks %v levels %v, want %v at full level", b, h, qb, got, levels, want)
					}
				}
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SelectBlocks(ctx, tl, func(*plan.Plan, int, int) func(int, []int32) []int32 {
		return func(int, []int32) []int32 { return nil }
	}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}
