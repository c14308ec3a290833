package auto

import (
	"testing"

	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/plan"
)

// TestCandidatesRunCLIDefaults: a candidate's hyperparameters other than
// its knob are pinned in this package, because a profile's knob means a
// planner only together with them; they must equal the method packages'
// defaults, which the CLI runs (NewMethod's promise). When a package
// default moves, this fails: move the pinned value with it and raise
// Version, or stored profiles silently name other planners.
func TestCandidatesRunCLIDefaults(t *testing.T) {
	for _, tc := range []struct {
		method string
		knob   float64
		want   plan.Planner
	}{
		{"flexprefill", 0.9, flexprefill.Planner{Gamma: 0.9, Tau: flexprefill.DefaultTau}},
		{"xattn", 0.9, xattn.Planner{Stride: xattn.DefaultStride, Threshold: 0.9}},
		{"window", 512, window.Planner{Sink: window.DefaultSink, Window: 512}},
		{"minference", 1, minference.Planner{LastQ: minference.DefaultLastQ, Vertical: 1000, Slash: 6096}},
		{"unisparse", 0.9, unisparse.Planner{TopP: 0.9}}, // the outlier query on, as the CLI's default
	} {
		got, err := NewMethod(tc.method, tc.knob, 0)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.method, tc.knob, err)
		}
		if got != tc.want {
			t.Errorf("%s %v: candidate %+v, want %+v (the package defaults; moving a pinned value needs a new profile Version)", tc.method, tc.knob, got, tc.want)
		}
	}
}
