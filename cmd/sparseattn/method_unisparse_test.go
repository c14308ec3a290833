package main

import (
	"strings"
	"testing"
)

// TestEvalUniSparse runs UniSparse through eval: it skips work at its
// default Top-P, reproduces dense at Top-P 1, the outlier query only adds
// blocks to the paper's rule (--unisparse-outlier=false skips at least as
// much), and bad flags are usage errors naming the flag.
func TestEvalUniSparse(t *testing.T) {
	base := []string{"eval", "--workload", "llm", "--n", "512", "--heads", "2", "--kv-heads", "1", "--d", "64", "--repeat", "1", "--warmup", "0",
		"--block-q", "32", "--block-k", "32", "--methods", "unisparse", "--json"}
	code, out, errs := runCLI(t, append(base, "--unisparse-top-p", "0.8")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeEval(t, out)
	if len(r.Rows) != 2 || r.Rows[1].Method != "unisparse" || !(r.Rows[1].Sparsity > 0) || !(r.Rows[1].RelL1 > 0) {
		t.Fatalf("rows %+v", r.Rows)
	}
	code, out, errs = runCLI(t, append(base, "--unisparse-top-p", "0.8", "--unisparse-outlier=false")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if paper := decodeEval(t, out).Rows[1]; paper.Sparsity < r.Rows[1].Sparsity {
		t.Errorf("the paper's rule skips %v, with the outlier query %v: the extension only adds blocks", paper.Sparsity, r.Rows[1].Sparsity)
	}
	code, out, errs = runCLI(t, append(base, "--unisparse-top-p", "1", "--unisparse-pool", "max", "--unisparse-ch", "2")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if d := decodeEval(t, out).Rows[1]; d.Sparsity != 0 || d.RelL1 > 1e-5 {
		t.Errorf("unisparse at Top-P 1: %+v", d)
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"--unisparse-top-p", "0", "--unisparse-top-p"},
		{"--unisparse-top-p", "1.1", "--unisparse-top-p"},
		{"--unisparse-cq", "0", "--unisparse-cq"},
		{"--unisparse-ch", "0", "--unisparse-ch"},
		{"--unisparse-pool", "mean", "--unisparse-pool"},
	} {
		code, _, errs := runCLI(t, append(base, tc.flag, tc.value)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s %s: exit %d, stderr %q; want 2 mentioning %q", tc.flag, tc.value, code, errs, tc.want)
		}
	}
	// A factor that does not divide the block is the planner's error.
	if code, _, errs := runCLI(t, append(base, "--unisparse-cq", "5")...); code == 0 || !strings.Contains(errs, "divisor of BlockQ") {
		t.Errorf("--unisparse-cq 5: exit %d, %q", code, errs)
	}
}
