package auto

import (
	"errors"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestChoices checks what Plan merges, and what the device twin plans:
// one planner per distinct (method, knob, λ), in the order of its first
// head, each head's index, none without Heads, and typed errors for a
// layer of the wrong width or a bad choice.
func TestChoices(t *testing.T) {
	tl := func(hq int) plan.Tiling {
		return plan.Tiling{Geometry: tensor.Geometry{B: 1, Hq: hq, Hkv: 1, Nq: 64, Nk: 64, D: 16, Dv: 16}, BlockQ: 16, BlockK: 16}
	}
	sp := Head{Method: "sparge", Knob: 0.9}
	spL := Head{Method: "sparge", Knob: 0.9, Lambda: -3}
	for _, tc := range []struct {
		name  string
		heads []Head
		hq    int // the input's heads; 0: len(heads), at least 1
		names []string
		owner []int
		err   error
	}{
		{"no heads", nil, 0, nil, nil, nil},
		{"one choice", []Head{sp, sp}, 0, []string{"sparge"}, []int{0, 0}, nil},
		{"λ tells choices apart", []Head{sp, spL, sp, {Method: Dense}}, 0, []string{"sparge", "sparge", "dense"}, []int{0, 1, 0, 2}, nil},
		{"compositions", []Head{{Method: "xattn+psa", Knob: 0.8}, {Method: "psa", Knob: 1}, {Method: "xattn+psa", Knob: 0.8}}, 0, []string{"xattn+psa", "psa"}, []int{0, 1, 0}, nil},
		{"wrong width", []Head{sp}, 2, nil, nil, ErrPlan},
		{"bad knob", []Head{sp, {Method: "window", Knob: 1.5}}, 0, nil, nil, ErrProfile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hq := tc.hq
			if hq == 0 {
				hq = max(len(tc.heads), 1)
			}
			planners, owner, err := Planner{Heads: tc.heads}.Choices(tl(hq))
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			var names []string
			for _, p := range planners {
				names = append(names, p.Name())
			}
			if !slices.Equal(names, tc.names) || !slices.Equal(owner, tc.owner) {
				t.Errorf("planners %v, owner %v; want %v, %v", names, owner, tc.names, tc.owner)
			}
		})
	}
}
