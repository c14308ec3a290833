package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/method/auto"
)

// TestTuneAuto tunes auto on two generated inputs, checks the report and
// the profile (the layer within budget·(1−margin) on calibration, each head
// within the cap), runs the profile with eval on a calibration input, and
// checks that eval refuses it at another tiling.
func TestTuneAuto(t *testing.T) {
	out := filepath.Join(t.TempDir(), "auto.json")
	geo := []string{"--workload", "llm", "--n", "256", "--heads", "4", "--kv-heads", "2", "--d", "32"}
	code, stdout, errs := runCLI(t, append([]string{"tune", "--method", "auto", "--budget", "0.05", "--calib", "2", "--out", out, "--json"}, geo...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r tuneAutoReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Heads) != 4 || r.Inputs != 2 || r.Margin != auto.DefaultMargin || math.Abs(r.HeadCap-auto.DefaultHeadCap*0.05) > 1e-15 {
		t.Fatalf("report %+v", r)
	}
	if r.L1 > 0.05*(1-auto.DefaultMargin) {
		t.Errorf("layer rel L1 %v over the budget less the margin", r.L1)
	}
	var mean float64
	for h, hd := range r.Heads {
		if hd.L1 > r.HeadCap {
			t.Errorf("head %d: rel L1 %v over the cap %v", h, hd.L1, r.HeadCap)
		}
		mean += hd.Sparsity / 4
	}
	if d := mean - r.Mean; d > 1e-12 || d < -1e-12 {
		t.Errorf("mean sparsity %v, heads' mean %v", r.Mean, mean)
	}
	prof, err := auto.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if prof.BlockQ != auto.DefaultBlockQ || prof.BlockK != auto.DefaultBlockK || len(prof.Layers) != 1 || prof.Layers[0].L1 != r.L1 {
		t.Errorf("profile %+v", prof)
	}
	// eval on the first calibration input (the default seed) runs the
	// heads' plans merged into one: the layer's rel L1 is what tuning
	// measured head by head, up to float32 summation order (1e-6).
	evalArgs := append([]string{"eval", "--methods", "auto", "--auto-profile", out, "--repeat", "1", "--warmup", "0", "--json"}, geo...)
	code, stdout, errs = runCLI(t, evalArgs...)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errs)
	}
	rep := decodeEval(t, stdout)
	if len(rep.Rows) != 2 || rep.Rows[1].Method != "auto" || !(float64(rep.Rows[1].RelL1) <= r.L1+1e-6) {
		t.Errorf("eval rows %+v", rep.Rows)
	}
	if code, _, errs := runCLI(t, append(evalArgs, "--block-q", "128")...); code != 2 || !strings.Contains(errs, "tuned at 64×64") {
		t.Errorf("another tiling: exit %d (%s), want a usage error naming the profile's tiling", code, errs)
	}
}

// TestTuneAutoDevice: --method auto reads --device as sparge's tuner does
// (its passes run on the GPU session's executor under cuda); a bad value
// is a usage error before anything loads.
func TestTuneAutoDevice(t *testing.T) {
	code, _, errs := runCLI(t, "tune", "--method", "auto", "--device", "tpu", "--workload", "llm", "--n", "64")
	if code != 2 || !strings.Contains(errs, "--device must be cpu, cuda or auto") {
		t.Errorf("exit %d, %q; want a usage error naming --device", code, errs)
	}
}
