package main

import (
	"flag"
	"fmt"

	"github.com/sparseattn/sparseattn/cuda"
)

// engineFlags are the GPU engine's kernel and launch flags, shared by the
// commands that open a cuda.Engine (gpubench, selftest).
type engineFlags struct {
	warpRows, tileK, ctaRows, minBlocks, stages, genStages *int
	mmaSync, pipeline, skipFuture, out16, fa2, narrowDense *bool
	order, pingPong, kernelDir                             *string
}

// addEngineFlags registers the engine flags on fs.
func addEngineFlags(fs *flag.FlagSet) engineFlags {
	return engineFlags{
		warpRows:    fs.Int("warp-rows", 0, "query rows per warp for 128-row blocks: 16, 32 (0 = default)"),
		tileK:       fs.Int("tile-k", 0, "keys per kernel tile without a λ filter: 32, 64, 128 (0 = default)"),
		mmaSync:     fs.Bool("mma-sync", false, "use the mma.sync kernel on Hopper too (not the wgmma one)"),
		fa2:         fs.Bool("fa2-loop", false, "on Hopper, run 128-row blocks with the FlashAttention-2-style wgmma kernel, not the warp-specialized one"),
		ctaRows:     fs.Int("cta-rows", 0, "query rows per thread block of the wgmma kernel: 64, 128 (0 = default)"),
		minBlocks:   fs.Int("min-blocks", 0, "thread blocks per SM the wgmma kernel is compiled for: 1..4 (0 = default)"),
		stages:      fs.Int("stages", 0, "K/V tile buffers: 1 or 2, 2 to 4 for --ws (0 = default)"),
		genStages:   fs.Int("gen-stages", 0, "K/V tile slots of the warp-specialized gathering kernel (PSA, S2O): 2 to 4 (0 = default, 4)"),
		pipeline:    fs.Bool("pipeline", false, "overlap softmax with the tensor cores (wgmma kernel)"),
		pingPong:    fs.String("ping-pong", "auto", "warp-specialized kernel: consumer warpgroups take turns issuing MMAs: auto (causal and sparse plans), on or off"),
		order:       fs.String("launch-order", "auto", "launch order of the query blocks: auto, head (each head's together) or longest (longest row first)"),
		skipFuture:  fs.Bool("skip-future", false, "skip causal tiles after all of a warpgroup's rows (wgmma kernel)"),
		out16:       fs.Bool("out16", false, "write the output in the inputs' 16-bit type, not float32"),
		kernelDir:   fs.String("kernel-dir", "", "a directory of attention kernel files (copies of cuda/kernels, edited) that replace the embedded ones: kernel variants with one build"),
		narrowDense: fs.Bool("dense-narrow-tiles", false, "run the dense pass at the tiling's own 64-key blocks, not at the faster 128-key tiles (warp-specialized kernel)"),
	}
}

// config returns the engine configuration the parsed flags ask for; a bad
// --launch-order is a usage error.
func (f engineFlags) config() (cuda.Config, error) {
	lo, err := cuda.ParseLaunchOrder(*f.order)
	if err != nil {
		return cuda.Config{}, fmt.Errorf("%w: --launch-order: %v", errUsage, err)
	}
	pp, err := cuda.ParsePingPong(*f.pingPong)
	if err != nil {
		return cuda.Config{}, fmt.Errorf("%w: --ping-pong: %v", errUsage, err)
	}
	return cuda.Config{Output16: *f.out16, Tactics: cuda.Tactics{WarpRows: *f.warpRows, TileK: *f.tileK, MMASync: *f.mmaSync, FA2Loop: *f.fa2, PingPong: pp, CTARows: *f.ctaRows, MinBlocks: *f.minBlocks, Stages: *f.stages, GenStages: *f.genStages, Pipeline: *f.pipeline, Order: lo, SkipFuture: *f.skipFuture, DenseNarrowTiles: *f.narrowDense, KernelDir: *f.kernelDir}}, nil
}
