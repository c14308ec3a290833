package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/tensorfile"
	"github.com/sparseattn/sparseattn/tune"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func decodeEval(t *testing.T, s string) evalReport {
	t.Helper()
	var r evalReport
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	return r
}

func TestEvalWorkloadJSON(t *testing.T) {
	code, out, errs := runCLI(t, "eval", "--workload", "llm", "--n", "512", "--heads", "2", "--kv-heads", "1", "--repeat", "1", "--warmup", "0",
		"--methods", "window,oracle", "--window-size", "128", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeEval(t, out)
	if !r.Causal || r.Geometry.Nq != 512 || r.Geometry.Hkv != 1 {
		t.Errorf("report header %+v", r)
	}
	if len(r.Rows) != 3 || r.Rows[0].Method != "dense" || r.Rows[1].Method != "window" || r.Rows[2].Method != "oracle" {
		t.Fatalf("methods %+v; want dense first (the reference), then window, oracle", r.Rows)
	}
	d, w := r.Rows[0], r.Rows[1]
	if d.Sparsity != 0 || d.RelL1 != 0 || d.Cosine < 0.999999 || d.NeedleRecall == nil || *d.NeedleRecall < 0.9 {
		t.Errorf("dense row %+v", d)
	}
	if got := 1 - (w.QKBlocks+w.PVBlocks)/(2*w.DenseBlocks); got != w.Sparsity || w.DenseBlocks != d.QKBlocks {
		t.Errorf("window counters %+v do not give its sparsity %v", w, w.Sparsity)
	}
	if w.Sparsity <= 0.2 || w.RelL1 <= 0 || w.TotalMS <= 0 || w.Speedup <= 0 || w.GFLOPS <= 0 {
		t.Errorf("window row %+v", w)
	}
}

// TestEvalDenseOnceFirst: dense runs once, first, wherever it is listed.
func TestEvalDenseOnceFirst(t *testing.T) {
	code, out, errs := runCLI(t, "eval", "--workload", "llm", "--n", "256", "--heads", "1", "--kv-heads", "1", "--repeat", "1", "--warmup", "0",
		"--methods", "window,dense", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeEval(t, out)
	if len(r.Rows) != 2 || r.Rows[0].Method != "dense" || r.Rows[1].Method != "window" {
		t.Fatalf("methods %+v, want dense then window", r.Rows)
	}
}

func TestBenchGridWorkloads(t *testing.T) {
	for _, kind := range []string{"video", "image"} {
		code, out, errs := runCLI(t, "bench", "--workload", kind, "--n", "300", "--heads", "1", "--kv-heads", "1", "--d", "32",
			"--repeat", "1", "--warmup", "0", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", kind, code, errs)
		}
		var b benchReport
		if err := json.Unmarshal([]byte(out), &b); err != nil || len(b.Rows) != 1 || b.Rows[0].N < 256 || b.Rows[0].N > 300 {
			t.Fatalf("%s: %q (%v)", kind, out, err)
		}
	}
}

func TestEvalTable(t *testing.T) {
	code, out, errs := runCLI(t, "eval", "--workload", "video", "--frames", "2", "--height", "8", "--width", "8", "--text", "4",
		"--heads", "2", "--kv-heads", "2", "--d", "32", "--repeat", "1", "--warmup", "0", "--methods", "dense,window")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"video:", "Nq=132", "causal=false", "method", "sparsity", "rel L1", "speedup", "window"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestEvalInputFiles(t *testing.T) {
	dir := t.TempDir()
	r := testutil.Rand(t)
	mk := func(s tensor.Shape) *tensor.Tensor {
		x, _ := tensor.New(tensor.BFloat16, tensor.BNHD, s)
		for b := range s.B {
			for h := range s.H {
				for n := range s.N {
					for d := range s.D {
						x.Set(b, h, n, d, float32(r.NormFloat64()))
					}
				}
			}
		}
		return x
	}
	q, k, v := mk(tensor.Shape{B: 1, H: 4, N: 100, D: 64}), mk(tensor.Shape{B: 1, H: 2, N: 100, D: 64}), mk(tensor.Shape{B: 1, H: 2, N: 100, D: 64})
	st := filepath.Join(dir, "qkv.safetensors")
	if err := tensorfile.Save(st, map[string]*tensorfile.Array{
		"query": tensorfile.FromTensor(q), "key": tensorfile.FromTensor(k), "value": tensorfile.FromTensor(v),
	}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "eval", "--input", st, "--q-name", "query", "--k-name", "key", "--v-name", "value",
		"--layout", "bnhd", "--causal", "true", "--repeat", "1", "--warmup", "0", "--json", "--block-q", "32", "--block-k", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rep := decodeEval(t, out)
	if g := rep.Geometry; g.Hq != 4 || g.Hkv != 2 || g.Nq != 100 || g.D != 64 || !rep.Causal || rep.DType != "bfloat16" {
		t.Errorf("report %+v", rep)
	}

	// The same tensors as three .npy files (float32: NumPy has no bfloat16).
	var paths []string
	for name, x := range map[string]*tensor.Tensor{"q": q, "k": k, "v": v} {
		f, _ := x.Convert(tensor.Float32, tensor.BNHD)
		p := filepath.Join(dir, name+".npy")
		if err := tensorfile.Save(p, map[string]*tensorfile.Array{name: tensorfile.FromTensor(f)}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	code, out2, errs := runCLI(t, "eval", "--q", filepath.Join(dir, "q.npy"), "--k", filepath.Join(dir, "k.npy"), "--v", filepath.Join(dir, "v.npy"),
		"--layout", "bnhd", "--causal", "true", "--repeat", "1", "--warmup", "0", "--json", "--methods", "dense", "--block-q", "32", "--block-k", "32")
	if code != 0 {
		t.Fatalf("npy: exit %d: %s", code, errs)
	}
	if rep2 := decodeEval(t, out2); rep2.Geometry != rep.Geometry || rep2.DType != "float32" {
		t.Errorf("npy report %+v, want geometry %+v", rep2, rep.Geometry)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "Usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"eval", "--methods", "magic"}, 2, "unknown method"},
		{[]string{"eval", "--causal", "maybe"}, 2, "--causal"},
		{[]string{"eval", "--workload", "llm", "--input", "x.npz"}, 2, "not both"},
		{[]string{"eval", "--q", "q.npy"}, 2, "--q, --k and --v"},
		{[]string{"eval", "--input", filepath.Join(dir, "missing.safetensors")}, 1, "missing.safetensors"},
		{[]string{"eval", "--workload", "llm", "--n", "64", "--heads", "3", "--kv-heads", "2"}, 1, "Hkv"},
		{[]string{"eval", "--nonsense"}, 2, "flag provided but not defined"},
		{[]string{"bench", "--n", "0"}, 2, "positive"},
		{[]string{"eval", "--n", "64", "--scale", "-1"}, 2, "--scale"},
		{[]string{"eval", "--block-q", "0"}, 2, "--block-q"},
		{[]string{"eval", "--input", "x.npz", "--dtype", "bf16"}, 2, "--dtype shapes a generated workload"},
		{[]string{"eval", "--workload", "llm", "--frames", "4"}, 2, "--frames applies to video"},
		{[]string{"eval", "--oracle-cdf", "2"}, 2, "--oracle-cdf"},
		{[]string{"bench", "--causal", "yes"}, 2, "--causal"},
		{[]string{"info", "extra"}, 2, "unexpected arguments"},
	} {
		code, out, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.msg) {
			t.Errorf("%v: exit %d, output %q; want exit %d mentioning %q", tc.args, code, out+errs, tc.code, tc.msg)
		}
	}
}

func TestJSONFloat(t *testing.T) {
	b, err := json.Marshal([]jsonFloat{1.5, jsonFloat(math.Inf(1)), jsonFloat(math.NaN())})
	if err != nil || string(b) != "[1.5,null,null]" {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var back []jsonFloat
	if err := json.Unmarshal(b, &back); err != nil || back[0] != 1.5 || !math.IsNaN(float64(back[1])) {
		t.Fatalf("unmarshal: %v, %v", back, err)
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	for _, cmd := range []string{"eval", "bench", "info"} {
		code, out, errs := runCLI(t, cmd, "--help")
		if code != 0 || !strings.Contains(out+errs, "Usage: sparseattn "+cmd) || !strings.Contains(out+errs, "-json") {
			t.Errorf("%s --help: exit %d, %q", cmd, code, out+errs)
		}
	}
	if code, out, _ := runCLI(t, "--help"); code != 0 || !strings.Contains(out, "eval") {
		t.Errorf("--help: exit %d, %q", code, out)
	}
}

func TestInfoAndBenchJSON(t *testing.T) {
	code, out, errs := runCLI(t, "info", "--json", "--peak-time", "20ms")
	if code != 0 {
		t.Fatalf("info: exit %d: %s", code, errs)
	}
	var info infoReport
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Kernels == "" || info.Peak.PerCore <= 0 {
		t.Fatalf("info %q: %v", out, err)
	}
	code, out, errs = runCLI(t, "bench", "--workload", "llm", "--n", "128,200", "--heads", "2", "--kv-heads", "1", "--d", "32", "--repeat", "1", "--warmup", "0", "--json", "--methods", "dense,window")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, errs)
	}
	var b benchReport
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 4 || b.Rows[0].N != 128 || b.Rows[3].N != 200 || b.Rows[3].Method != "window" {
		t.Fatalf("bench rows %+v", b.Rows)
	}
	for _, r := range b.Rows {
		if r.GFLOPS <= 0 || r.PeakPct <= 0 || r.MS <= 0 {
			t.Errorf("row %+v", r)
		}
	}
}

// TestEvalSparge: the sparge entry runs from the catalog; τ = 1 is the
// dense limit, a small top-k skips work, and bad values are usage errors.
func TestEvalSparge(t *testing.T) {
	base := []string{"eval", "--workload", "llm", "--n", "512", "--heads", "2", "--kv-heads", "1", "--d", "64", "--repeat", "1", "--warmup", "0",
		"--block-q", "128", "--block-k", "64", "--methods", "sparge", "--json"}
	code, out, errs := runCLI(t, append(base, "--sparge-cdf", "1")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeEval(t, out)
	if len(r.Rows) != 2 || r.Rows[1].Method != "sparge" || r.Rows[1].Sparsity != 0 || r.Rows[1].RelL1 > 1e-6 {
		t.Fatalf("τ=1 rows %+v, want sparge at sparsity 0 and dense error", r.Rows)
	}
	code, out, errs = runCLI(t, append(base, "--sparge-topk", "0.2", "--sparge-theta", "-1", "--sparge-lambda", "-4")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if s := decodeEval(t, out).Rows[1]; s.Sparsity <= 0.1 || s.PVBlocks > s.QKBlocks {
		t.Errorf("top-k 0.2 row %+v, want sparsity > 0.1 and no more PV than QK products", s)
	}
	for _, bad := range [][]string{{"--sparge-cdf", "1.5"}, {"--sparge-theta", "2"}, {"--sparge-lambda", "1"}, {"--sparge-cdf", "0.9", "--sparge-topk", "0.5"}} {
		if code, _, errs := runCLI(t, append(base, bad...)...); code != 2 || !strings.Contains(errs, "bad hyperparameter") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming the range", bad, code, errs)
		}
	}
}

// TestTune: tune writes a loadable profile, updates it by layer name,
// reports held-out errors, and refuses impossible bounds.
func TestTune(t *testing.T) {
	out := filepath.Join(t.TempDir(), "profile.json")
	args := func(layer string, extra ...string) []string {
		return append([]string{"tune", "--workload", "llm", "--n", "256", "--heads", "2", "--kv-heads", "1", "--d", "32", "--block-q", "64", "--block-k", "32",
			"--calib", "2", "--holdout", "1", "--layer", layer, "--out", out, "--json"}, extra...)
	}
	for _, layer := range []string{"a", "b", "a"} {
		code, stdout, errs := runCLI(t, args(layer)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var r tuneReport
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Heads) != 2 || r.HoldoutMax == nil || r.HoldoutMaskMax == nil || r.Heads[0].HoldoutL1 == nil || r.Heads[1].HoldoutMaskL1 == nil || r.Inputs != 2 {
			t.Fatalf("report %+v", r)
		}
		for _, h := range r.Heads {
			if !(h.L1Mask < 0.05 && h.L1 < 0.06) {
				t.Errorf("head %d: calibration L1 %v / %v above the default bounds", h.Index, h.L1Mask, h.L1)
			}
		}
	}
	prof, err := tune.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(prof.Layers) != 2 || prof.Layers[0].Name != "a" || prof.Layers[1].Name != "b" {
		t.Errorf("profile layers %+v, want a then b", prof.Layers)
	}
	for _, bad := range [][]string{{"--l1", "0.1", "--l2", "0.05"}, {"--l1", "0"}, {"--l2", "1.5"}, {"--calib", "0"}} {
		if code, _, errs := runCLI(t, args("c", bad...)...); code != 2 {
			t.Errorf("%v: exit %d (%s), want a usage error", bad, code, errs)
		}
	}
	// eval runs a tuned layer: per-head parameters from the profile, the
	// same workload as calibration, so its error stays near the bounds
	// (held-out inputs are not guaranteed to meet them exactly: 2× slack).
	evalArgs := []string{"eval", "--workload", "llm", "--n", "256", "--heads", "2", "--kv-heads", "1", "--d", "32", "--block-q", "64", "--block-k", "32",
		"--methods", "sparge", "--repeat", "1", "--warmup", "0", "--json", "--sparge-profile", out}
	code, stdout, errs := runCLI(t, append(evalArgs, "--sparge-layer", "b")...)
	if code != 0 {
		t.Fatalf("eval with the profile: exit %d: %s", code, errs)
	}
	var rep evalReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[1].Method != "sparge" || !(float64(rep.Rows[1].RelL1) < 2*0.06) {
		t.Errorf("eval with the profile: rows %+v", rep.Rows)
	}
	for _, bad := range [][]string{{}, {"--sparge-layer", "nope"}} {
		if code, _, errs := runCLI(t, append(evalArgs, bad...)...); code != 2 || !strings.Contains(errs, "layer") {
			t.Errorf("eval %v: exit %d (%s), want a usage error naming the layer", bad, code, errs)
		}
	}
	// Another tiling cannot update the same profile.
	if code, _, errs := runCLI(t, args("a", "--block-q", "128")...); code != 2 || !strings.Contains(errs, "was tuned with") {
		t.Errorf("tiling mismatch: exit %d, %s", code, errs)
	}
}
