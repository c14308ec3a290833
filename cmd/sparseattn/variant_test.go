package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/tensorfile"
)

// TestEvalOrderAndInt8 runs eval with a token order and INT8 QK on a small
// video: float dense comes first as the reference, the reordered dense run
// matches it to float32 rounding (attention is permutation-invariant), and
// INT8 adds a small, nonzero error.
func TestEvalOrderAndInt8(t *testing.T) {
	base := []string{"eval", "--workload", "video", "--frames", "2", "--height", "8", "--width", "8", "--text", "5",
		"--heads", "2", "--kv-heads", "1", "--d", "64", "--repeat", "1", "--warmup", "0", "--json", "--block-q", "32", "--block-k", "16"}
	code, out, errs := runCLI(t, append(base, "--methods", "dense,window", "--window-sink", "8", "--window-size", "32", "--order", "hilbert")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decodeEval(t, out)
	if r.Order != "hilbert" || r.Int8QK || r.Sim == nil || r.Sim.OrderedQ == nil || r.Sim.BlockQ != 32 || r.Sim.BlockK != 16 {
		t.Fatalf("report header %+v, sim %+v", r, r.Sim)
	}
	names := []string{"dense", "dense+hilbert", "window+hilbert"}
	if len(r.Rows) != len(names) {
		t.Fatalf("rows %+v, want %v", r.Rows, names)
	}
	for i, want := range names {
		if r.Rows[i].Method != want {
			t.Fatalf("row %d is %q, want %q", i, r.Rows[i].Method, want)
		}
	}
	// Reordering is exact up to float32 summation order.
	if d := r.Rows[1]; d.RelL1 > 1e-5 || d.Sparsity != 0 {
		t.Errorf("dense+hilbert: rel L1 %g, sparsity %g; want ≤ 1e-5 and 0", d.RelL1, d.Sparsity)
	}
	if w := r.Rows[2]; w.Sparsity <= 0 || w.RelL1 <= 0 {
		t.Errorf("window+hilbert row %+v", w)
	}
	if len(r.Sim.InputQHeads) != 2 || len(r.Sim.OrderedQHeads) != 2 || len(r.Sim.InputKHeads) != 1 || len(r.Sim.OrderedKHeads) != 1 {
		t.Errorf("per-head similarity %+v, want 2 query heads and 1 KV head", r.Sim)
	}
	if d := (r.Sim.InputQHeads[0]+r.Sim.InputQHeads[1])/2 - r.Sim.InputQ; d > 1e-12 || d < -1e-12 {
		t.Errorf("Sim-q %g is not the mean of its heads %v", r.Sim.InputQ, r.Sim.InputQHeads)
	}
	for _, s := range []float64{r.Sim.InputQ, r.Sim.InputK, *r.Sim.OrderedQ, *r.Sim.OrderedK} {
		if !(s > -1 && s <= 1) {
			t.Errorf("similarity %g outside (-1, 1]", s)
		}
	}

	code, out, errs = runCLI(t, append(base, "--methods", "dense", "--int8-qk")...)
	if code != 0 {
		t.Fatalf("int8: exit %d: %s", code, errs)
	}
	r = decodeEval(t, out)
	if !r.Int8QK || r.Sim != nil || len(r.Rows) != 2 || r.Rows[1].Method != "dense+int8" {
		t.Fatalf("int8 report %+v", r)
	}
	// SageAttention-style INT8 on a structured video: well below 5% rel
	// L1, and not zero (the quantized run really ran).
	if e := r.Rows[1].RelL1; e <= 0 || e > 0.05 {
		t.Errorf("dense+int8 rel L1 %g, want in (0, 0.05]", e)
	}
}

// TestEvalOrderInputFiles describes a file's token grid with --grid and
// --text.
func TestEvalOrderInputFiles(t *testing.T) {
	r := testutil.Rand(t)
	dir := t.TempDir()
	arrays := map[string]*tensorfile.Array{}
	for _, name := range []string{"q", "k", "v"} {
		x := testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 3*4*5 + 2, D: 32}, 1)
		arrays[name] = tensorfile.FromTensor(x)
	}
	path := filepath.Join(dir, "qkv.safetensors")
	if err := tensorfile.Save(path, arrays); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "eval", "--input", path, "--grid", "3,4,5", "--text", "2", "--order", "time", "--sim",
		"--methods", "dense", "--repeat", "1", "--warmup", "0", "--block-q", "16", "--block-k", "16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"dense+time", "Sim-q", "time order"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestVariantUsageErrors(t *testing.T) {
	dir := t.TempDir()
	r := testutil.Rand(t)
	path := filepath.Join(dir, "qkv.safetensors")
	arrays := map[string]*tensorfile.Array{}
	for _, name := range []string{"q", "k", "v"} {
		arrays[name] = tensorfile.FromTensor(testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 20, D: 32}, 1))
	}
	if err := tensorfile.Save(path, arrays); err != nil {
		t.Fatal(err)
	}
	video := []string{"eval", "--workload", "video", "--frames", "2", "--height", "4", "--width", "4", "--heads", "1", "--kv-heads", "1", "--d", "32"}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"eval", "--n", "64", "--order", "hilbert"}, "needs a token grid"},
		{append(video, "--order", "zigzag"), "unknown order"},
		{append(video, "--order", "hilbert", "--causal", "true"), "changes causal attention"},
		{append(video, "--grid", "2,4,4"), "--grid is for input files"},
		{append(video, "--order", "hilbert", "--order-seed", "3"), "--order-seed applies"},
		{[]string{"eval", "--input", path, "--order", "hilbert"}, "needs --grid"},
		{[]string{"eval", "--input", path, "--text", "4"}, "--text with input files needs --grid"},
		{[]string{"eval", "--input", path, "--grid", "2,x,4", "--order", "row"}, "three positive integers"},
		{[]string{"eval", "--input", path, "--grid", "2,3,3", "--order", "hilbert"}, "needs Nq = Nk = 18"},
	} {
		code, out, errs := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(out+errs, tc.msg) {
			t.Errorf("%v: exit %d, output %q; want exit 2 mentioning %q", tc.args, code, out+errs, tc.msg)
		}
	}
}
