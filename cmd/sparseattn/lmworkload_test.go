package main

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/workload/lm"
)

// The default workload is the LM's real attention, and each row's bits
// per byte is the model's with that method in every layer: the same as
// running the model directly with the planner.
func TestEvalLMWorkload(t *testing.T) {
	code, out, errs := runCLI(t, "eval", "--n", "512", "--repeat", "1", "--warmup", "0",
		"--methods", "window", "--window-size", "128", "--window-sink", "64", "--block-q", "32", "--block-k", "32", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeEval(t, out)
	m, err := lm.Default()
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	g := r.Geometry
	if !r.Causal || g.Nq != 512 || g.Hq != c.Layers*c.Heads || g.Hkv != c.Layers*c.KVHeads || g.D != c.HeadDim || !strings.HasPrefix(r.Source, "lm") {
		t.Fatalf("report header %+v", r)
	}
	if len(r.Rows) != 2 || r.Rows[0].BitsPerByte == nil || r.Rows[1].BitsPerByte == nil {
		t.Fatalf("rows %+v; want dense and window, each with bits per byte", r.Rows)
	}
	text := lm.EvalText()[:512]
	for i, pl := range []sparseattn.Options{{}, {Planner: window.Planner{Sink: 64, Window: 128}}} {
		pl.BlockQ, pl.BlockK = 32, 32
		p, err := m.Forward(context.Background(), text, lm.Options{Attention: pl})
		if err != nil {
			t.Fatal(err)
		}
		// The same computation: only the worker split can reorder sums.
		if got, want := *r.Rows[i].BitsPerByte, p.BitsPerByte(); math.Abs(got-want) > 1e-6 {
			t.Errorf("%s: eval's bits per byte %v, the model's %v", r.Rows[i].Method, got, want)
		}
	}
	if r.Rows[1].Sparsity <= 0 {
		t.Errorf("window sparsity %v on 512 tokens with a 192-token view", r.Rows[1].Sparsity)
	}
}

func TestLMWorkloadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--heads", "2"}, "add --workload llm"},
		{[]string{"eval", "--n", "70000"}, "the lm workload reads 2 to 65537 bytes"},
		{[]string{"eval", "--workload", "llm", "--lm-text", "calib"}, "--lm-text applies to --workload lm"},
		{[]string{"eval", "--lm-text", "/nonexistent/text"}, "nonexistent"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want an error containing %q", c.args, code, errs, c.want)
		}
	}
}

// tune calibrates on the calib text by default, one window of --n bytes
// per input, so eval's default (the eval text) is held out.
func TestTuneLMWorkloadWindows(t *testing.T) {
	code, out, errs := runCLI(t, "tune", "--calib", "2", "--n", "256", "--block-q", "32", "--block-k", "32", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "bytes of the calib text") || !strings.Contains(out, `"calibration_inputs": 2`) {
		t.Errorf("report does not say it tuned on 2 windows of the calib text:\n%s", out)
	}
	code, _, errs = runCLI(t, "tune", "--calib", "3", "--n", "32768")
	if code == 0 || !strings.Contains(errs, "3 inputs of --n 32768 bytes need 98304 bytes") {
		t.Errorf("3 windows of 32K in a 64K text: exit %d, %q", code, errs)
	}
}
