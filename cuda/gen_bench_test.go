package cuda

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestGenBench times the gathering kernel against our dense kernel in one
// run on the device, B=1 Hq=32 Hkv=8 D=128 bf16 causal, at each N of the
// comma-separated SPARSEATTN_GEN_BENCH (e.g. 16384,32768): dense plans
// through identity token orders (the gather machinery with nothing
// skipped), gathered plans at sparsity s, the same with S2O's early stop
// (sparsity from the stops), and PSA level mixes at a budget b. It reports the times and the ratios the issue bounds (PSA ≤
// 1.2·b·dense, gathers ≤ 1.15·dense, S2O ≤ 1.2·(1−s)·dense); it fails
// only if a run fails. Skipped unless the variable is set. With
// SPARSEATTN_GEN_BENCH_ONLY set it times our dense kernel and only the
// plans whose names contain one of its |-separated strings (for a
// profiler: the dense kernel's 13 launches come first).
// SPARSEATTN_GEN_BENCH_BLOCKK sets the plans' blocks (64, the default, or
// 128: the dense reference and every plan at 128-key blocks, so that the
// gathering kernel runs 128-key tiles), and SPARSEATTN_GEN_NARROW=1 sets
// Tactics.GenNarrowTiles (64-key tiles whatever the blocks).
func TestGenBench(t *testing.T) {
	var ns []int
	for _, f := range strings.Split(os.Getenv("SPARSEATTN_GEN_BENCH"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		t.Skip("set SPARSEATTN_GEN_BENCH=N[,N...] to time the gathering kernel at N tokens")
	}
	// SPARSEATTN_GEN_BENCH_CACHE keeps the compiled kernels between runs
	// (NVRTC takes seconds a kernel).
	cache := os.Getenv("SPARSEATTN_GEN_BENCH_CACHE")
	if cache == "" {
		cache = t.TempDir()
	}
	// SPARSEATTN_GEN_STAGES sets Tactics.GenStages (2 to 4), and
	// SPARSEATTN_KERNEL_DIR Tactics.KernelDir (kernel variants, one build).
	tc := Tactics{KernelDir: os.Getenv("SPARSEATTN_KERNEL_DIR")}
	if s := os.Getenv("SPARSEATTN_GEN_STAGES"); s != "" {
		st, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("SPARSEATTN_GEN_STAGES=%q: %v", s, err)
		}
		tc.GenStages = st
	}
	tc.GenNarrowTiles = os.Getenv("SPARSEATTN_GEN_NARROW") == "1"
	bk := 64
	if s := os.Getenv("SPARSEATTN_GEN_BENCH_BLOCKK"); s != "" {
		var err error
		if bk, err = strconv.Atoi(s); err != nil || (bk != 64 && bk != 128) {
			t.Fatalf("SPARSEATTN_GEN_BENCH_BLOCKK=%q: 64 or 128", s)
		}
	}
	e, err := Open(Config{CacheDir: cache, Tactics: tc})
	if errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrUnsupportedDevice) {
		t.Skipf("no usable GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// The mma.sync engine: the dense kernel the first gathering kernel
	// was built like, and that gathering kernel itself (the fallback off
	// Hopper), to tell the gathers' cost from the instruction set's.
	old, err := Open(Config{CacheDir: cache, Tactics: Tactics{MMASync: true, WarpRows: 32}})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for _, n := range ns {
		genBench(t, e, old, n, bk)
	}
}

// TestGenWSPtxas compiles the warp-specialized gathering kernel's main
// configurations for sm_90a with ptxas's verbose report and logs its
// register, spill and warning lines (a setmaxnreg that ptxas ignores, or
// a producer that spills, shows here). Skipped unless
// SPARSEATTN_GEN_PTXAS is set; it needs NVRTC, not a GPU.
func TestGenWSPtxas(t *testing.T) {
	if os.Getenv("SPARSEATTN_GEN_PTXAS") == "" {
		t.Skip("set SPARSEATTN_GEN_PTXAS=1 to see ptxas's report on the gathering kernel")
	}
	nv, err := driver.LoadNVRTC()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	// SPARSEATTN_GEN_CUBIN_DIR keeps each cubin there, for cuobjdump -sass;
	// SPARSEATTN_KERNEL_DIR compiles its kernel files instead of the
	// embedded ones (Tactics.KernelDir).
	dir := os.Getenv("SPARSEATTN_GEN_CUBIN_DIR")
	files, err := readKernelFiles(os.Getenv("SPARSEATTN_KERNEL_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	narrow := []genFlags{
		{on: true, ws: true},
		{on: true, ws: true, gather: true},
		{on: true, ws: true, levels: true},
		{on: true, ws: true, gather: true, stop: true},
		{on: true, ws: true, gather: true, stop: true, state: 2},
		{on: true, ws: true, gather: true, state: 1},
		{on: true, ws: true, gather: true, tile1: true},
		{on: true, ws: true, gather: true, stop: true, tile1: true},
		{on: true, ws: true, gather: true, stop: true, state: 2, tile1: true},
	}
	// 128-key tiles (genWideKT), for plans of 128-key blocks and levels.
	wide := []genFlags{
		{on: true, ws: true, levels: true},
		{on: true, ws: true, gather: true, tile1: true, state: 1},
		{on: true, ws: true, gather: true, stop: true, tile1: true},
		{on: true, ws: true, gather: true, stop: true},
		{on: true, ws: true, gather: true, stop: true, state: 2, tile1: true},
	}
	var vs []variant
	for _, f := range narrow {
		vs = append(vs, variant{headDim: 128, blockQ: 128, kt: genKT, mt: 1, bf16: true, stages: genWSStages, gen: f})
	}
	for _, f := range wide {
		vs = append(vs, variant{headDim: 128, blockQ: 128, kt: genWideKT, mt: 1, bf16: true, stages: genWideStages, gen: f})
	}
	for _, v := range vs {
		src, name := v.sourceWith(files)
		cubin, log, err := nv.Compile(src, name, append(v.options("sm_90a"), "--ptxas-options=-v"))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, v.String()+".cubin"), cubin, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, line := range strings.Split(log, "\n") {
			if l := strings.ToLower(line); strings.Contains(l, "register") || strings.Contains(l, "spill") || strings.Contains(l, "warning") || strings.Contains(l, "setmaxnreg") {
				t.Logf("%s: %s", v, strings.TrimSpace(line))
			}
		}
	}
}

// genBench is TestGenBench at n tokens and bk-key blocks.
func genBench(t *testing.T, e, old *Engine, n, bk int) {
	r := rand.New(rand.NewPCG(1, 2))
	g := tensor.Geometry{B: 1, Hq: 32, Hkv: 8, Nq: n, Nk: n, D: 128, Dv: 128}
	mk := func(h int) *tensor.Tensor {
		data := make([]float32, g.B*h*n*g.D)
		for i := range data {
			data[i] = float32(r.NormFloat64())
		}
		x, err := tensor.FromFloat32(tensor.BHND, tensor.Shape{B: 1, H: h, N: n, D: g.D}, data)
		if err != nil {
			t.Fatal(err)
		}
		if x, err = x.Convert(tensor.BFloat16, tensor.BHND); err != nil {
			t.Fatal(err)
		}
		return x
	}
	q, k, v := mk(g.Hq), mk(g.Hkv), mk(g.Hkv)
	tl := plan.Tiling{Geometry: g, Causal: true, BlockQ: 128, BlockK: bk}
	per := 128 / bk // KV blocks a query block's diagonal spans
	dense, err := plan.Dense(tl)
	if err != nil {
		t.Fatal(err)
	}
	bench := func(e *Engine, name string, p *plan.Plan) Timing {
		tm, err := e.Benchmark(context.Background(), p, q, k, v, 3, 10)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return tm
	}
	base := bench(e, "dense", dense)
	t.Logf("N=%d dense %-28s %.3f ms (%d-key blocks)", n, base.Kernel, base.MedianMS, bk)
	only := os.Getenv("SPARSEATTN_GEN_BENCH_ONLY")
	if only == "" {
		tm := bench(old, "dense mma.sync", dense)
		t.Logf("N=%d dense mma.sync %-28s %.3f ms (%.2f× the default dense)", n, tm.Kernel, tm.MedianMS, tm.MedianMS/base.MedianMS)
	}
	report := func(name string, p *plan.Plan, bound float64) {
		if only != "" && !slices.ContainsFunc(strings.Split(only, "|"), func(o string) bool { return strings.Contains(name, o) }) {
			return
		}
		tm := bench(e, name, p)
		b := tm.Stats.QKBlocks / tm.Stats.DenseBlocks
		t.Logf("N=%d %-34s %-36s %.3f ms  work %.3f of dense  time/dense %.3f  time/(work·dense) %.2f (bound %.2f)  stopped %d",
			n, name, tm.Kernel, tm.MedianMS, b, tm.MedianMS/base.MedianMS, tm.MedianMS/(b*base.MedianMS), bound, tm.Stats.Stopped)
		if os.Getenv("SPARSEATTN_GEN_BENCH_OLD") != "" {
			to := bench(old, name, p)
			t.Logf("N=%d %-34s %-36s %.3f ms  time/(work·dense) %.2f (mma.sync gathering kernel)", n, name, to.Kernel, to.MedianMS, to.MedianMS/(b*base.MedianMS))
		}
	}
	// The gather machinery with nothing skipped: every row's key order is
	// the identity, and so is the query order.
	ident := func(p *plan.Plan) *plan.Plan {
		o := &plan.TokenOrder{Query: make([]int32, g.B*g.Hq*n), KVStart: []int{0, n}, KV: make([]int32, n), RowKV: make([]int32, p.Rows())}
		for i := range o.Query {
			o.Query[i] = int32(i % n)
		}
		for i := range o.KV {
			o.KV[i] = int32(i)
		}
		c := *p
		c.Order = o
		return &c
	}
	report("dense, identity orders (gather)", ident(dense), 1.15)
	for _, keep := range []float64{0.5, 0.25, 0.1} {
		p, err := plan.FromMask(tl, func(b, h, qb, kb int) bool { return kb/per == qb || r.Float64() < keep })
		if err != nil {
			t.Fatal(err)
		}
		report("gathered, "+strconv.FormatFloat(keep, 'g', 3, 64)+" of blocks", ident(p), 1.2)
	}
	// S2O's early stop (S2O §3.2) on the dense plan through identity
	// orders: a row ends after the first block that every query of the
	// block gained less than τ·ℓ from. On these random inputs a block's gain
	// is about ℓ/k after k blocks, so rows stop after roughly 1.5/τ blocks
	// and the shorter rows of the causal mask run to the end.
	for _, tau := range []float32{0.05, 0.02} {
		p := ident(dense)
		p.Stop = &plan.StopRule{Tau: tau}
		report("s2o stop, tau "+strconv.FormatFloat(float64(tau), 'g', 3, 32), p, 1.2)
	}
	// Where stopped rows lose: the same rows cut where τ 0.05 about stops
	// them (the keys of the first 30 64-key blocks), without a stop rule
	// (the plain gathering kernel, the row's length known up front) and
	// with one that never fires (the STOP kernel's per-tile cost, no hand-over); and full rows
	// under the STOP kernel. No gain is below 1e-9·ℓ on these inputs.
	{
		first, err := plan.FromMask(tl, func(b, h, qb, kb int) bool { return kb < 30*64/bk })
		if err != nil {
			t.Fatal(err)
		}
		report("first 1920 keys, no stop rule", ident(first), 1.2)
		p := ident(first)
		p.Stop = &plan.StopRule{Tau: 1e-9}
		report("first 1920 keys, stop never fires", p, 1.2)
		p = ident(dense)
		p.Stop = &plan.StopRule{Tau: 1e-9}
		report("dense, stop never fires", p, 1.2)
	}
	// The levels kernel (PSA's) on level-1 entries only, the same kind of
	// mask as the gathered plans: its slot tables and row set-up without
	// pooled rows or biases. One skipped entry a row selects it.
	{
		bld, err := plan.NewBuilder(tl)
		if err != nil {
			t.Fatal(err)
		}
		for h := range g.Hq {
			for qb := range dense.QBlocks() {
				row, skip := dense.Row(0, h, qb), false
				for kb := range dense.KBlocks() {
					vis, partial := dense.BlockVisibility(qb, kb)
					switch {
					case !vis:
					case partial || r.Float64() < 0.1:
						bld.Add(row, kb, plan.Full)
					case !skip:
						bld.Add(row, kb, plan.Skip)
						skip = true
					}
				}
			}
		}
		p, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		report("levels kernel, 0.1 of blocks at level 1", p, 1.2)
	}
	// PSA level mixes: off the diagonal, a share at each of levels 1..4,
	// the rest skipped; diagonal blocks Full.
	for _, share := range []float64{0.25, 0.1, 0.05} {
		bld, err := plan.NewBuilder(tl)
		if err != nil {
			t.Fatal(err)
		}
		for h := range g.Hq {
			for qb := range dense.QBlocks() {
				row := dense.Row(0, h, qb)
				for kb := range dense.KBlocks() {
					vis, partial := dense.BlockVisibility(qb, kb)
					switch x := r.Float64(); {
					case !vis:
					case partial:
						bld.Add(row, kb, plan.Full)
					case x < 4*share:
						bld.Add(row, kb, plan.Level(1+int(x/share)))
					}
				}
			}
		}
		p, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		report("psa levels 1-4, "+strconv.FormatFloat(share, 'g', 3, 64)+" each", p, 1.2)
	}
}
