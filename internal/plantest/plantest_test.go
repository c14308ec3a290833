package plantest

import (
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestTablesCoverAwkwardCases checks that each table keeps every property
// the planner tests rely on, so that an edit cannot silently drop one, and
// that its names are unique and its tilings valid.
func TestTablesCoverAwkwardCases(t *testing.T) {
	props := map[string]func(s Shape) bool{
		"ragged last block":       func(s Shape) bool { return s.Nq%s.BlockQ != 0 || s.Nk%s.BlockK != 0 },
		"N below one block":       func(s Shape) bool { return s.Nq < s.BlockQ && s.Nk < s.BlockK },
		"GQA":                     func(s Shape) bool { return s.Hq > s.Hkv },
		"non-causal":              func(s Shape) bool { return !s.Causal },
		"causal Nq < Nk":          func(s Shape) bool { return s.Causal && s.Nq < s.Nk },
		"Nq > Nk":                 func(s Shape) bool { return s.Nq > s.Nk },
		"batch > 1":               func(s Shape) bool { return s.B > 1 },
		"BlockQ ≠ BlockK":         func(s Shape) bool { return s.BlockQ != s.BlockK },
		"non-causal with Nq ≠ Nk": func(s Shape) bool { return !s.Causal && s.Nq != s.Nk },
	}
	for name, tc := range map[string]struct {
		shapes []Shape
		want   []string
		dims   []int // head dims that must occur
	}{
		"Awkward": {Awkward(), []string{"ragged last block", "N below one block", "GQA", "non-causal", "causal Nq < Nk", "Nq > Nk", "batch > 1", "BlockQ ≠ BlockK"}, []int{32, 64, 128, 256}},
		"Prefill": {Prefill(), []string{"ragged last block", "N below one block", "GQA", "non-causal", "causal Nq < Nk", "Nq > Nk", "batch > 1", "BlockQ ≠ BlockK", "non-causal with Nq ≠ Nk"}, []int{32, 48, 64}},
	} {
		names := map[string]bool{}
		dims := map[int]bool{}
		for _, s := range tc.shapes {
			if names[s.Name] {
				t.Errorf("%s: name %q twice", name, s.Name)
			}
			names[s.Name] = true
			dims[s.D] = true
			if _, err := plan.Dense(s.Tiling()); err != nil {
				t.Errorf("%s %s: %v", name, s.Name, err)
			}
		}
		for _, p := range tc.want {
			found := false
			for _, s := range tc.shapes {
				found = found || props[p](s)
			}
			if !found {
				t.Errorf("%s: no shape with %s", name, p)
			}
		}
		for _, d := range tc.dims {
			if !dims[d] {
				t.Errorf("%s: no shape with D=%d", name, d)
			}
		}
	}
}

// TestProblemAndDenseRun: a problem's tensors fit its tiling, and Run of
// the dense plan matches Reference within 2e-5 max abs (the float32
// executor against float64 on unit-scale values over ≤ 190 keys), with a
// fully masked row (Nq > Nk) giving zeros, not NaN. -short leaves out
// the heavy shapes.
func TestProblemAndDenseRun(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range Select(append(Awkward(), Prefill()...)) {
		pr := s.Problem(t, r, 1.5, 1)
		g, err := tensor.Validate(pr.Q, pr.K, pr.V)
		if err != nil || g != pr.Tiling.Geometry {
			t.Fatalf("%s: geometry %+v (%v), want %+v", s.Name, g, err, pr.Tiling.Geometry)
		}
		p, err := plan.Dense(pr.Tiling)
		if err != nil {
			t.Fatal(err)
		}
		out, st := Run(t, p, pr.Q, pr.K, pr.V)
		if st.Sparsity() != 0 {
			t.Errorf("%s: dense plan sparsity %v", s.Name, st.Sparsity())
		}
		if e := Compare(t, Reference(t, pr.Q, pr.K, pr.V, s.Causal), out); !(e.MaxAbs <= 2e-5) {
			t.Errorf("%s: max abs error %.3g against the reference", s.Name, e.MaxAbs)
		}
	}
}

// TestSelect keeps every shape in normal mode and drops exactly the heavy
// ones under -short, for Shape and for a type embedding it.
func TestSelect(t *testing.T) {
	type own struct {
		Shape
		extra int
	}
	all := []own{{Shape{Name: "a", Heavy: true}, 1}, {Shape{Name: "b"}, 2}}
	got := Select(all)
	want := 2
	if testing.Short() {
		want = 1
	}
	if len(got) != want || got[len(got)-1].extra != 2 {
		t.Errorf("Select kept %+v, want %d shapes ending with b", got, want)
	}
	if n := len(Select(Prefill())); testing.Short() && n != len(Prefill())-1 {
		t.Errorf("Select(Prefill()) under -short kept %d of %d, want all but the heavy one", n, len(Prefill()))
	}
}
