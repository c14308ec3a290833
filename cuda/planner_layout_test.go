package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/sparseattn/sparseattn/cuda/driver"
)

// TestBmArgsLayout checks bmOp and bmArgs against struct BmOp (2
// pointers, 3 int64, 4 int32: 56 bytes) and struct BmArgs (2 BmOp, 3
// pointers, 15 int32, 1 float, 1 double, 2 pointers, 2 int32: 232 bytes,
// the double at 200) in kernels/block_mass.cuh.
func TestBmArgsLayout(t *testing.T) {
	if got := unsafe.Sizeof(bmOp{}); got != 56 {
		t.Errorf("bmOp is %d bytes, struct BmOp 56", got)
	}
	var a bmArgs
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"size", unsafe.Sizeof(a), 232},
		{"ework", unsafe.Offsetof(a.ework), 112},
		{"extra", unsafe.Offsetof(a.extra), 128},
		{"chunks", unsafe.Offsetof(a.chunks), 136},
		{"rule", unsafe.Offsetof(a.rule), 192},
		{"lscale", unsafe.Offsetof(a.lscale), 196},
		{"thresh", unsafe.Offsetof(a.thresh), 200},
		{"xkey", unsafe.Offsetof(a.xkey), 208},
		{"next", unsafe.Offsetof(a.next), 216},
		{"slices", unsafe.Offsetof(a.slices), 224},
		{"slicew", unsafe.Offsetof(a.slicew), 228},
	} {
		if c.got != c.want {
			t.Errorf("bmArgs %s at %d, struct BmArgs at %d", c.name, c.got, c.want)
		}
	}
}

// TestS2OArgsLayout checks s2oArgs against struct S2OArgs in
// kernels/plan_s2o.cu: 2 View (56 bytes each), 9 pointers, 10 int32, 3
// pointers, 1 int32 (the kernel file asserts the size).
func TestS2OArgsLayout(t *testing.T) {
	var a s2oArgs
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"size", unsafe.Sizeof(a), 256},
		{"guide", unsafe.Offsetof(a.guide), 112},
		{"kvStart", unsafe.Offsetof(a.kvStart), 176},
		{"b", unsafe.Offsetof(a.b), 184},
		{"segs", unsafe.Offsetof(a.segs), 220},
		{"oq", unsafe.Offsetof(a.oq), 224},
		{"otop", unsafe.Offsetof(a.otop), 240},
		{"outliers", unsafe.Offsetof(a.outliers), 248},
	} {
		if c.got != c.want {
			t.Errorf("s2oArgs %s at %d, struct S2OArgs at %d", c.name, c.got, c.want)
		}
	}
}

// TestCompileBlockMass compiles bm_mass (for XAttention's bf16 inputs and
// UniSparse's hi and lo halves, D 128, the stages planner_mass.go picks,
// with and without resident query rows (BM_QRES), and UniSparse's outlier
// pass: bf16 and f16 inputs read in place at D
// 128, 96 and 64, and hi and lo halves), uni_pool, uni_outlier (and
// uni_outlier16), uni_extra, PSA's outlier scores (psa_outliers, and
// psa_outliers16 at D 64, 128, 192 and 256, bf16 and f16) and draws,
// gather, level assignment and scores (Sampling and Antidiagonal, bf16 and
// split, gathered rows and Sampling's read in place (PSA_DIRECT), several
// unit widths), and S2O's query scores, sort and merge, key scores, outlier
// queries, means and promotion for sm_90 with NVRTC alone
// (no GPU is needed) and logs ptxas's register and spill report.
func TestCompileBlockMass(t *testing.T) {
	nv, err := driver.LoadNVRTC()
	if errors.Is(err, driver.ErrUnavailable) {
		t.Skipf("no NVRTC: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, fn string
		defs     []string
	}{
		{"plan_xattn.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=0", "BM_DP=128", "BM_BK=64", "BM_NST=2", "BM_CS=4", "BM_VEC=1"}},
		{"plan_xattn.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=0", "BM_DP=128", "BM_BK=64", "BM_NST=3", "BM_CS=16", "BM_VEC=1", "BM_WG=1"}},
		{"plan_xattn.cu", "bm_mass", []string{"BM_F16=1", "BM_SPLIT=0", "BM_DP=64", "BM_BK=64", "BM_NST=3", "BM_CS=1", "BM_VEC=0", "BM_WG=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=0", "BM_DP=128", "BM_BK=64", "BM_NST=3", "BM_CS=64", "BM_VEC=1", "BM_ARGMAX=1", "BM_WG=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=1", "BM_DP=128", "BM_BK=32", "BM_NST=2", "BM_CS=16", "BM_VEC=1"}},
		{"plan_xattn.cu", "bm_mass", []string{"BM_F16=1", "BM_SPLIT=0", "BM_DP=96", "BM_BK=32", "BM_NST=4", "BM_CS=1", "BM_VEC=0"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=1", "BM_DP=64", "BM_BK=32", "BM_NST=2", "BM_CS=64", "BM_VEC=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=1", "BM_DP=128", "BM_BK=16", "BM_NST=4", "BM_CS=2", "BM_VEC=0"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=1", "BM_DP=128", "BM_BK=32", "BM_NST=2", "BM_CS=16", "BM_VEC=1", "BM_QRES=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=1", "BM_DP=64", "BM_BK=32", "BM_NST=2", "BM_CS=64", "BM_VEC=1", "BM_QRES=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=1", "BM_DP=80", "BM_BK=16", "BM_NST=4", "BM_CS=2", "BM_VEC=0", "BM_QRES=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=1", "BM_DP=128", "BM_BK=32", "BM_NST=2", "BM_CS=64", "BM_VEC=1", "BM_ARGMAX=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=0", "BM_DP=128", "BM_BK=64", "BM_NST=2", "BM_CS=64", "BM_VEC=1", "BM_ARGMAX=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=1", "BM_SPLIT=0", "BM_DP=64", "BM_BK=64", "BM_NST=2", "BM_CS=64", "BM_VEC=1", "BM_ARGMAX=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=0", "BM_DP=96", "BM_BK=32", "BM_NST=4", "BM_CS=64", "BM_VEC=1", "BM_ARGMAX=1"}},
		{"plan_unisparse.cu", "bm_mass", []string{"BM_F16=0", "BM_SPLIT=0", "BM_DP=128", "BM_BK=64", "BM_NST=2", "BM_CS=64", "BM_VEC=0", "BM_ARGMAX=1"}},
		{"plan_unisparse.cu", "uni_extra", bmStubDefs},
		{"plan_unisparse.cu", "uni_pool", bmStubDefs},
		{"plan_unisparse.cu", "uni_outlier", bmStubDefs},
		{"plan_unisparse.cu", "uni_outlier16", bmStubDefs},
		{"plan_unisparse.cu", "uni_pool_avg", bmStubDefs},
		{"plan_psa.cu", "psa_outliers", nil},
		{"plan_psa_outlier.cu", "psa_outliers16", []string{"PSA_OD=128", "PSA_ODT=3"}},
		{"plan_psa_outlier.cu", "psa_outliers16", []string{"PSA_OD=128", "PSA_ODT=2"}},
		{"plan_psa_outlier.cu", "psa_outliers16", []string{"PSA_OD=64", "PSA_ODT=3"}},
		{"plan_psa_outlier.cu", "psa_outliers16", []string{"PSA_OD=256", "PSA_ODT=3"}},
		{"plan_psa_outlier.cu", "psa_outliers16", []string{"PSA_OD=192", "PSA_ODT=2"}},
		{"plan_psa.cu", "psa_tokens", nil},
		{"plan_psa.cu", "psa_gather", nil},
		{"plan_psa.cu", "psa_assign", nil},
		{"plan_psa.cu", "psa_assign", []string{"PSA_AT=128", "PSA_SORT_E=8"}},
		{"plan_psa.cu", "psa_assign", []string{"PSA_AT=256", "PSA_SORT_E=8"}},
		{"plan_psa.cu", "psa_assign", []string{"PSA_AT=256", "PSA_SORT_E=16"}},
		{"plan_psa.cu", "psa_assign", []string{"PSA_AT=256", "PSA_SORT_E=32"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=16", "PSA_NS=2", "PSA_KC=128"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=16", "PSA_NS=2", "PSA_KC=128", "PSA_DIRECT=1", "PSA_WG=1"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=8", "PSA_NS=3", "PSA_KC=64", "PSA_WG=1"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=16", "PSA_NS=3"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=16", "PSA_NS=2", "PSA_KC=128", "PSA_DIRECT=1"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=16", "PSA_NS=3", "PSA_DIRECT=1"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=8", "PSA_NS=3", "PSA_KC=128", "PSA_DIRECT=1"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=4", "PSA_NS=2", "PSA_DIRECT=1"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=1", "PSA_CPU=16", "PSA_NS=2"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=0", "PSA_CPU=8", "PSA_NS=3"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=0", "PSA_SPLIT=1", "PSA_CPU=64", "PSA_NS=2"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=1", "PSA_SPLIT=0", "PSA_CPU=8", "PSA_NS=3"}},
		{"plan_psa_score.cu", "psa_score", []string{"PSA_EST=1", "PSA_SPLIT=1", "PSA_CPU=4", "PSA_NS=2"}},
		{"plan_s2o.cu", "s2o_qscore", nil},
		{"plan_s2o.cu", "s2o_sort", nil},
		{"plan_s2o.cu", "s2o_merge", nil},
		{"plan_s2o.cu", "s2o_kscore", nil},
		{"plan_s2o.cu", "s2o_outq", nil},
		{"plan_s2o.cu", "s2o_means", nil},
		{"plan_s2o.cu", "s2o_promote", nil},
		{"runtime.cu", "csr_rows", nil},
		{"plan_sparge.cu", "sparge_pool_vec", []string{"SD=128", "SR=4", "ST=128"}},
		{"plan_sparge.cu", "sparge_rows_search", []string{"SD=128", "SR=4", "ST=128"}},
		{"plan_flexprefill.cu", "probe_stats", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "probe_norm", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "probe_lines", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "probe_combine", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_minference.cu", "probe_stats", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=4"}},
		{"plan_minference.cu", "probe_norm", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=4"}},
		{"plan_minference.cu", "probe_lines", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=4"}},
		{"plan_minference.cu", "probe_combine", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=4"}},
		{"plan_minference.cu", "probe_stats", []string{"HEAD_DIM_PAD=128", "DTYPE=2", "PR_WARPS=4"}},
		{"plan_minference.cu", "probe_lines", []string{"HEAD_DIM_PAD=128", "DTYPE=2", "PR_WARPS=4"}},
		{"plan_minference.cu", "probe_stats", []string{"HEAD_DIM_PAD=256", "DTYPE=1", "PR_WARPS=8"}},
		{"plan_minference.cu", "probe_lines", []string{"HEAD_DIM_PAD=256", "DTYPE=1", "PR_WARPS=8"}},
		{"plan_minference.cu", "probe_stats", []string{"HEAD_DIM_PAD=64", "DTYPE=1", "PR_WARPS=4"}},
		{"plan_minference.cu", "probe_lines", []string{"HEAD_DIM_PAD=64", "DTYPE=1", "PR_WARPS=4"}},
		{"plan_minference.cu", "probe_stats", []string{"HEAD_DIM_PAD=256", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_minference.cu", "probe_lines", []string{"HEAD_DIM_PAD=256", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_keymeans8", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_cover", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_head", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_qmeans8", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_qa_dots", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_qa_softmax", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_qa_hist", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_qa_mark", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_qa_list", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_qa_select", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
		{"plan_flexprefill.cu", "fp_rows", []string{"HEAD_DIM_PAD=128", "DTYPE=3", "PR_WARPS=8"}},
	} {
		if only := os.Getenv("SPARSEATTN_COMPILE_ONLY"); only != "" && !strings.Contains(c.file+" "+c.fn+" "+strings.Join(c.defs, " "), only) {
			continue
		}
		head, err := auxSources.ReadFile("kernels/device.cuh")
		if err != nil {
			t.Fatal(err)
		}
		body, err := auxSources.ReadFile("kernels/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		src, err := expandIncludes(string(head) + "#line 1 \"" + c.file + "\"\n" + string(body))
		if err != nil {
			t.Fatal(err)
		}
		arch := "sm_90"
		if slices.ContainsFunc(c.defs, func(d string) bool { return strings.HasSuffix(d, "_WG=1") }) {
			arch = "sm_90a" // warpgroup MMA
		}
		opts := []string{"--gpu-architecture=" + arch, "-std=c++17", "--ptxas-options=-v"}
		for _, d := range c.defs {
			opts = append(opts, "-D"+d)
		}
		cubin, log, err := nv.Compile(src, c.file, opts)
		if err != nil {
			t.Errorf("%s %v: %v", c.file, c.defs, err)
			continue
		}
		// SPARSEATTN_COMPILE_CUBIN_DIR keeps each cubin there, for cuobjdump -sass.
		if dir := os.Getenv("SPARSEATTN_COMPILE_CUBIN_DIR"); dir != "" {
			name := strings.TrimSuffix(c.file, ".cu") + "_" + strings.NewReplacer("=", "", " ", "_").Replace(strings.Join(c.defs, "_")) + ".cubin"
			if err := os.WriteFile(filepath.Join(dir, name), cubin, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// ptxas reports each kernel as a "Compiling entry function" line
		// followed by its stack, spill and register lines.
		var report []string
		in := false
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "Compiling entry function") {
				in = strings.Contains(l, "'"+c.fn+"'")
			}
			if in && (strings.Contains(l, "registers") || strings.Contains(l, "spill")) {
				report = append(report, strings.TrimSpace(l))
			}
		}
		t.Logf("%s %s %v: %s", c.file, c.fn, c.defs, strings.Join(report, "; "))
		// ptxas waits after every warpgroup MMA of a kernel (C7515, C7520:
		// "wgmma.mma_async instructions are serialized") where it
		// cannot prove the accumulators untouched in flight; the kernel
		// still computes the same numbers, only slower.
		if l := serializedWGMMA(log); l != "" {
			t.Errorf("%s %s %v: %s", c.file, c.fn, c.defs, l)
		}
	}
}

// serializedWGMMA returns ptxas's line saying that it serialized a
// kernel's warpgroup MMAs, or "".
func serializedWGMMA(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "wgmma.mma_async instructions are serialized") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
