package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

const gpubenchSummary = `Times the GPU kernels alone (device events, inputs resident on the GPU,
L2 overwritten before each launch as triton.testing.do_bench does):
dense attention and block-sparse attention over random block masks of the
given densities, on random bf16 inputs. Prints one JSON object per line.
With --mask-dir, writes each block mask as <dir>/mask_n<N>_c<0|1>_d<density>.u8
(uint8 [H, QBlocks, KBlocks]) so that peers can run the same masks.`

// gpubenchRow is one timed configuration.
type gpubenchRow struct {
	Impl         string  `json:"impl"`
	N            int     `json:"n"`
	Heads        int     `json:"heads"`
	D            int     `json:"d"`
	Causal       bool    `json:"causal"`
	Density      float64 `json:"density"`
	MS           float64 `json:"ms"`
	TFLOPs       float64 `json:"tflops"` // dense-equivalent for sparse rows
	PlanUploadMS float64 `json:"plan_upload_ms"`
	Kernel       string  `json:"kernel"`
	Sparsity     float64 `json:"sparsity"` // from the device counters
	Device       string  `json:"device"`
	FlushedL2    bool    `json:"flushed_l2"` // L2 overwritten before each launch
}

func runGPUBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gpubench", gpubenchSummary, stderr)
	ns := fs.String("n", "8192,16384,32768,65536,131072", "comma-separated sequence lengths")
	heads := fs.Int("heads", 32, "heads")
	d := fs.Int("d", 128, "head dim")
	block := fs.Int("block", 128, "block size of the masks (BlockQ = BlockK)")
	causal := fs.String("causal", "both", "true, false or both")
	dens := fs.String("densities", "1,0.5,0.25,0.1", "comma-separated block densities (1 = dense)")
	reps := fs.Int("repeat", 5, "timed launches; the median is reported")
	warmup := fs.Int("warmup", 2, "untimed launches first")
	engine := addEngineFlags(fs)
	maskDir := fs.String("mask-dir", "", "write each block mask here for peers")
	seed := fs.Uint64("seed", 1, "random seed for inputs and masks")
	if err := parse(fs, args); err != nil {
		return err
	}
	lengths, err := parseInts(*ns)
	if err != nil {
		return fmt.Errorf("%w: --n: %v", errUsage, err)
	}
	densities, err := parseFloats(*dens)
	if err != nil {
		return fmt.Errorf("%w: --densities: %v", errUsage, err)
	}
	var causals []bool
	switch *causal {
	case "true":
		causals = []bool{true}
	case "false":
		causals = []bool{false}
	case "both":
		causals = []bool{false, true}
	default:
		return fmt.Errorf("%w: --causal must be true, false or both", errUsage)
	}
	cfg, err := engine.config()
	if err != nil {
		return err
	}
	e, err := cuda.Open(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	enc := json.NewEncoder(stdout)
	r := rand.New(rand.NewPCG(*seed, 0xbe7c))
	for _, n := range lengths {
		g := tensor.Geometry{B: 1, Hq: *heads, Hkv: *heads, Nq: n, Nk: n, D: *d, Dv: *d}
		q, k, v := randomBF16(r, g)
		for _, c := range causals {
			flops := metrics.DenseFLOPs(g, c)
			for _, dn := range densities {
				if err := ctx.Err(); err != nil {
					return err
				}
				t := plan.Tiling{Geometry: g, Causal: c, BlockQ: *block, BlockK: *block}
				mr := rand.New(rand.NewPCG(*seed, uint64(n)*4+uint64(dn*1000)))
				p, err := randomPlan(t, dn, mr)
				if err != nil {
					return err
				}
				if *maskDir != "" {
					if err := writeMask(*maskDir, p, dn); err != nil {
						return err
					}
				}
				tm, err := e.Benchmark(ctx, p, q, k, v, *warmup, *reps)
				if err != nil {
					return fmt.Errorf("N=%d causal=%v density=%v: %w", n, c, dn, err)
				}
				impl := "ours-dense"
				if dn < 1 {
					impl = "ours-sparse"
				}
				enc.Encode(gpubenchRow{Impl: impl, N: n, Heads: *heads, D: *d, Causal: c, Density: dn, MS: tm.MedianMS,
					TFLOPs: flops / tm.MedianMS / 1e9, PlanUploadMS: tm.PlanUploadMS, Kernel: string(tm.Kernel),
					Sparsity: tm.Stats.Sparsity(), Device: e.Info().Name, FlushedL2: tm.FlushedL2})
			}
		}
	}
	return nil
}

// randomBF16 returns N(0,1) bf16 q, k, v, filled on all CPUs.
func randomBF16(r *rand.Rand, g tensor.Geometry) (q, k, v *tensor.Tensor) {
	mk := func(h, n, d int) *tensor.Tensor {
		bits := make([]uint16, g.B*h*n*d)
		workers := runtime.GOMAXPROCS(0)
		seeds := make([]uint64, workers)
		for i := range seeds {
			seeds[i] = r.Uint64()
		}
		var wg sync.WaitGroup
		chunk := (len(bits) + workers - 1) / workers
		for w := range workers {
			wg.Go(func() {
				rr := rand.New(rand.NewPCG(seeds[w], 1))
				for i := w * chunk; i < min(len(bits), (w+1)*chunk); i++ {
					bits[i] = tensor.Float32ToBF16(float32(rr.NormFloat64()))
				}
			})
		}
		wg.Wait()
		t, err := tensor.FromBits16(tensor.BFloat16, tensor.BHND, tensor.Shape{B: g.B, H: h, N: n, D: d}, bits)
		if err != nil {
			panic(err) // shapes come from a validated geometry
		}
		return t
	}
	return mk(g.Hq, g.Nq, g.D), mk(g.Hkv, g.Nk, g.D), mk(g.Hkv, g.Nk, g.Dv)
}

// randomPlan keeps each visible block with probability density (all when
// density is 1), always keeping the diagonal block so no row is empty.
func randomPlan(t plan.Tiling, density float64, r *rand.Rand) (*plan.Plan, error) {
	if density >= 1 {
		return plan.Dense(t)
	}
	return plan.FromMask(t, func(b, h, qb, kb int) bool { return kb == qb || r.Float64() < density })
}

// writeMask writes p's block mask as uint8 [H, QBlocks, KBlocks].
func writeMask(dir string, p *plan.Plan, density float64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	qbs, kbs := p.QBlocks(), p.KBlocks()
	m := make([]byte, p.Geometry.Hq*qbs*kbs)
	for h := range p.Geometry.Hq {
		for qb := range qbs {
			blocks, _ := p.Entries(p.Row(0, h, qb))
			for _, kb := range blocks {
				m[(h*qbs+qb)*kbs+int(kb)] = 1
			}
		}
	}
	c := 0
	if p.Causal {
		c = 1
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("mask_n%d_c%d_d%g.u8", p.Geometry.Nq, c, density)), m, 0o644)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(x > 0 && x <= 1) {
			return nil, fmt.Errorf("%q is not in (0, 1]", f)
		}
		out = append(out, x)
	}
	return out, nil
}
