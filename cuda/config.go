package cuda

import (
	"fmt"
)

// Config configures Open.
type Config struct {
	// Ordinal is the device number.
	Ordinal int
	// CacheDir holds compiled cubins; "" means DefaultCacheDir(), and "-"
	// disables the disk cache.
	CacheDir string
	// Output16 makes the kernel write the output in the inputs' 16-bit
	// type (bfloat16 for float32 inputs), as FlashAttention and
	// flex_attention do, instead of float32: half the output bytes, and
	// one more rounding (2^-9 relative for bfloat16). Run then returns a
	// tensor of that type when out is nil. On an H100 it measured the
	// same dense and 1-6% faster at density 0.1 from 8K to 32K
	// (BENCHMARKS.md, "Previous run"): the output's stores overlap
	// with the next rows' work.
	Output16 bool
	// Tactics overrides the kernel tactics the engine chooses. The zero
	// value is the measured default; the fields exist for benchmarking
	// and may change between releases.
	Tactics Tactics
}

// Tactics are the kernel choices behind the engine's defaults, each
// measured on an H100 (BENCHMARKS.md). They are experimental: callers who
// only want attention leave them zero.
type Tactics struct {
	// WarpRows is the query rows each warp owns for 128-row query blocks:
	// 32 (4 warps, the FlashAttention-2 shape) or 16 (8 warps). 0 means 32.
	// It applies to the mma.sync kernel only.
	WarpRows int
	// CTARows is the query rows one thread block of the wgmma kernel
	// computes: 64 (one warpgroup; two blocks per 128-row plan block) or
	// 128 (two warpgroups). 0 means 128.
	CTARows int
	// MinBlocks is the thread blocks per multiprocessor the wgmma kernel is
	// compiled for (its register budget): 1 to 4; 0 means 2.
	MinBlocks int
	// Stages is the number of K/V tile buffers. In the warp-specialized
	// kernel: K and V slots each, 2 to 4 as shared memory allows (0 means
	// 2). In the others: 2 loads the next tile
	// while this one computes (1 where two do not fit), 1 overlaps the K
	// and V loads with the other half of a tile's work. 0 means 1, which
	// measured faster on an H100 (BENCHMARKS.md, "Earlier run (commit a2fd84b)").
	Stages int
	// Pipeline overlaps each tile's softmax with the tensor-core work of
	// its neighbours (FlashAttention-3 §3.2) in the wgmma kernel. It is
	// correct, and ptxas no longer serializes its MMAs, but it needs 179
	// registers, so only one 128-row block (two warpgroups) fits on an
	// SM, against two for the default loop: it measured 256-267 TFLOPs
	// against 369-381 on an H100 (BENCHMARKS.md, "Earlier run: launch order"),
	// so it is off by default.
	Pipeline bool
	// FA2Loop runs 128-row query blocks on Hopper with the
	// FlashAttention-2-style wgmma kernel (every warp loads and computes)
	// instead of the warp-specialized one (a TMA producer warpgroup and
	// two consumer warpgroups, FlashAttention-3 §3.1–3.2), which is the
	// default where the driver has tensor maps (CUDA 12+). On an H100 the
	// warp-specialized kernel measured 505-556 TFLOPs dense against
	// 391-413 (BENCHMARKS.md, "Earlier run: warp-specialized persistent kernel").
	FA2Loop bool
	// PingPong says when the consumer warpgroups of the warp-specialized
	// kernel take turns issuing their MMAs (FlashAttention-3 §3.1); the
	// zero value is PingPongAuto.
	PingPong PingPongMode
	// MMASync uses the mma.sync kernel (sm_80 and newer) on Hopper too,
	// instead of the warpgroup-MMA (wgmma) kernel it takes by default for
	// plans without a λ filter; the block-mass planners (xattn, and
	// unisparse's outlier queries) then run on mma.sync too.
	MMASync bool
	// TileK is the keys per tile for plans without a λ filter: 32, 64 or
	// 128, dividing the plan's BlockK (else 64 is used). 0 means 128 for
	// the warp-specialized kernel (64 where BlockK is not a multiple of
	// 128) and 64 otherwise. With 32 query rows per warp, 128 is taken as
	// 64 (registers).
	TileK int
	// Order is the order in which the query blocks of a plan are
	// launched; the zero value is OrderAuto.
	Order LaunchOrder
	// SkipFuture makes each warpgroup of the wgmma kernel skip the MMAs
	// and softmax of causal tiles that lie wholly after its rows (the
	// second half of a diagonal block for the first warpgroup); exact. The
	// branch costs registers (40 bytes of spills at the 128-register
	// budget) and it measured 10-15% slower for causal plans on an H100
	// (BENCHMARKS.md, "Earlier run: launch order"), so it is off by default.
	SkipFuture bool
	// GenStages is the K/V tile slots of the warp-specialized gathering
	// kernel (PSA levels, S2O orders and stops on Hopper): 2 to 4; 0 means
	// 4 (genWSStages). Fewer slots leave fewer tiles issued past an S2O
	// stop for the consumers to drain. Plans with levels, and plans whose
	// blocks are a multiple of 128 keys, run 128-key tiles in at most 2
	// slots (unless GenNarrowTiles).
	GenStages int
	// GenNarrowTiles keeps the warp-specialized gathering kernel at
	// 64-key tiles (4 slots) for plans with levels and plans whose blocks
	// are a multiple of 128 keys, which otherwise run 128-key tiles in 2
	// slots. For measuring one against the other.
	GenNarrowTiles bool
	// DependentAssembly launches csr_rows, the CSR assembly at the end of
	// every device plan, as a programmatic dependent launch (sm_90 with a
	// CUDA 12 driver): its blocks may be scheduled while the planner's last
	// kernel drains and wait for it on the device (griddepcontrol.wait).
	// It is off by default: on the H200 whole plans measured slower with it
	// (sparge at 8K 0.069 ms against 0.057, PSA at 32K 1.727 against 1.678;
	// BENCHMARKS.md, "Planning costs in session 31").
	DependentAssembly bool
	// DenseNarrowTiles keeps a Runner's dense pass (the dense planner) at
	// its tiling's own blocks. By default a dense pass whose blocks are 64
	// keys wide under 128-row query blocks runs at 128-key blocks where the
	// warp-specialized kernel takes them, so that it computes 128-key
	// tiles; Report.Stats still counts the tiling's own blocks, and a dense
	// pass skips nothing, so only the tiles change. On the H200 at 32K our
	// dense ran 13.36 ms causal at 128-key tiles against 16.09 at 64 (cuDNN
	// 15.33), and 27.76 against 33.17 non-causal (cuDNN 28.91; BENCHMARKS.md,
	// "Session 34"). The narrow pass is the one a block-sparse plan of the
	// same tiling is measured against.
	DenseNarrowTiles bool
	// KernelDir names a directory whose attention kernel files
	// (attention.cu, attention_ws.cu, attention_gen.cu, attention_gen_ws.cu,
	// attention_gen.cuh) replace the embedded ones of the same name, so
	// that kernel variants can be measured with one build: copies of
	// cuda/kernels edited and compiled at run time. Files it lacks stay
	// embedded. Empty: the embedded kernels.
	KernelDir string
}

// LaunchOrder is the order of a plan's query blocks on the device.
type LaunchOrder int

const (
	// OrderAuto, for the warp-specialized persistent kernel, launches
	// head by head, each head's rows longest first: the kernel's blocks
	// draw rows as they finish, so each head's short rows fill the gaps,
	// while the rows in flight share one or two heads' K and V in L2. For
	// the other kernels it takes OrderLongest when one KV head's K and V
	// are small (Nk·D ≤ 2^21, 8 MiB of 16-bit K and V: N ≤ 16K at D =
	// 128) and OrderHead otherwise: longest-first measured 4-11% faster
	// for causal plans at 8K and 16K and 2-14% slower at 32K and 64K,
	// where the blocks of one head, run together, share its K and V in L2
	// (BENCHMARKS.md, "Earlier run: launch order").
	OrderAuto LaunchOrder = iota
	// OrderHead launches each head's query blocks together, last block
	// first (the longest under causal masking).
	OrderHead
	// OrderLongest launches the blocks of all heads in order of
	// decreasing row length (KV blocks listed), so that the shortest rows
	// fill the last wave. The order is computed on the host and uploaded
	// with the plan.
	OrderLongest
)

// PingPongMode says when the consumer warpgroups of the warp-specialized
// kernel take turns issuing their MMAs, so that one's softmax and output
// store run while the other's MMAs do.
type PingPongMode int

const (
	// PingPongAuto takes turns for causal and block-sparse plans, not for
	// dense non-causal ones. With the output stored through shared memory,
	// turns measured 0-6% faster for causal and sparse plans at 8K and
	// 16K, and between 1% faster and 4% slower for dense non-causal ones,
	// on an H100 (BENCHMARKS.md, "Previous run").
	PingPongAuto PingPongMode = iota
	// PingPongOn always takes turns.
	PingPongOn
	// PingPongOff never does.
	PingPongOff
)

// ParsePingPong parses "auto", "on" or "off".
func ParsePingPong(s string) (PingPongMode, error) {
	switch s {
	case "auto", "":
		return PingPongAuto, nil
	case "on":
		return PingPongOn, nil
	case "off":
		return PingPongOff, nil
	}
	return PingPongAuto, fmt.Errorf("%w: ping-pong mode %q; use auto, on or off", ErrUnsupported, s)
}

// ParseLaunchOrder parses "auto", "head" or "longest".
func ParseLaunchOrder(s string) (LaunchOrder, error) {
	switch s {
	case "auto", "":
		return OrderAuto, nil
	case "head":
		return OrderHead, nil
	case "longest":
		return OrderLongest, nil
	}
	return OrderAuto, fmt.Errorf("%w: launch order %q; use auto, head or longest", ErrUnsupported, s)
}
