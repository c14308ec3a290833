package main

import (
	"math"
	"strings"
	"testing"
)

// TestEvalPSA runs PSA through eval on a small video grid: its sparsity
// column is 1 − psa.Budget (pooled blocks counted by their share of keys),
// the knob at its dense end reproduces dense, and bad flags are usage
// errors naming the flag.
func TestEvalPSA(t *testing.T) {
	base := []string{"eval", "--workload", "video", "--frames", "2", "--height", "8", "--width", "16",
		"--heads", "2", "--kv-heads", "1", "--d", "32", "--repeat", "1", "--warmup", "0", "--block-q", "16", "--block-k", "16", "--methods", "psa", "--json"}
	code, out, errs := runCLI(t, base...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeEval(t, out)
	if len(r.Rows) != 2 || r.Rows[1].Method != "psa" {
		t.Fatalf("rows %+v", r.Rows)
	}
	p := r.Rows[1]
	if !(p.Sparsity > 0.05 && p.Sparsity < 1) || !(p.RelL1 > 0) || math.Abs(p.Sparsity-(1-(p.QKBlocks+p.PVBlocks)/(2*p.DenseBlocks))) > 1e-12 {
		t.Errorf("psa row %+v", p)
	}
	code, out, errs = runCLI(t, append(base, "--psa-scale", "1.43", "--psa-estimator", "antidiagonal", "--psa-sim", "0.7,0.65,0.6")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if d := decodeEval(t, out).Rows[1]; d.Sparsity != 0 || d.RelL1 > 1e-5 {
		t.Errorf("psa at the dense end of its knob: %+v", d)
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"--psa-rule", "topk", "--psa-rule"},
		{"--psa-estimator", "max", "--psa-estimator"},
		{"--psa-thresholds", "0.5,x", "--psa-thresholds"},
		{"--psa-thresholds", "0.9,0.5", "non-decreasing"},
		{"--psa-thresholds", "1,1,1,1,1,1,1,1,1", "1 to 8"},
		{"--psa-quantiles", "2", "--psa-quantiles"},
		{"--psa-sim", "0.5", "needs 3"},
		{"--psa-scale", "0", "--psa-scale"},
		{"--psa-sample-q", "-1", "--psa-sample-q"},
		{"--psa-outliers-k", "-2", "--psa-outliers-k"},
		{"--psa-stride", "-2", "--psa-stride"},
	} {
		code, _, errs := runCLI(t, append(base, tc.flag, tc.value)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s %s: exit %d, stderr %q; want 2 mentioning %q", tc.flag, tc.value, code, errs, tc.want)
		}
	}
}
