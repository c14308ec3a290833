// Package cuda runs attention plans on NVIDIA GPUs with block-sparse
// FlashAttention kernels compiled at first use with NVRTC for the device's
// architecture and cached on disk. On Hopper (sm_90a), 128-row query
// blocks run on a warp-specialized persistent kernel
// (kernels/attention_ws.cu, after FlashAttention-3: a TMA producer
// warpgroup and two warpgroup-MMA consumer warpgroups); 64-row blocks, and
// drivers without tensor maps, on a FlashAttention-2-style wgmma kernel
// (kernels/attention.cu); sm_80 and newer, and plans with a λ filter, on
// mma.sync (the same file).
//
// The Engine consumes the same plans as the CPU executor (package cpu) and
// reports the same counters, read from the device. It needs no CUDA toolkit
// at build time: the driver and NVRTC are loaded at run time (package
// driver), and Open fails with an error wrapping driver.ErrUnavailable on a
// machine without them.
package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// ErrUnsupported reports a plan or input the GPU kernel does not handle;
// the CPU executor runs every plan, so callers fall back to it.
var ErrUnsupported = errors.New("cuda: not supported on the GPU")

// ErrMismatch reports tensors that do not match the plan's geometry.
var ErrMismatch = errors.New("cuda: tensors do not match the plan")

// Config configures Open.
type Config struct {
	// Ordinal is the device number.
	Ordinal int
	// CacheDir holds compiled cubins; "" means DefaultCacheDir(), and "-"
	// disables the disk cache.
	CacheDir string
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
	// measured faster on an H100 (bench/2026-11-22-h100-gpu/run7.log).
	Stages int
	// Pipeline overlaps each tile's softmax with the tensor-core work of
	// its neighbours (FlashAttention-3 §3.2) in the wgmma kernel. It is
	// correct, and ptxas no longer serializes its MMAs, but it needs 179
	// registers, so only one 128-row block (two warpgroups) fits on an
	// SM, against two for the default loop: it measured 256-267 TFLOPs
	// against 369-381 on an H100 (bench/2026-11-22-h100-gpu2/run1.log),
	// so it is off by default.
	Pipeline bool
	// FA2Loop runs 128-row query blocks on Hopper with the
	// FlashAttention-2-style wgmma kernel (every warp loads and computes)
	// instead of the warp-specialized one (a TMA producer warpgroup and
	// two consumer warpgroups, FlashAttention-3 §3.1–3.2), which is the
	// default where the driver has tensor maps (CUDA 12+). On an H100 the
	// warp-specialized kernel measured 505-556 TFLOPs dense against
	// 391-413 (bench/2026-11-22-h100-gpu3/run3).
	FA2Loop bool
	// PingPong says when the consumer warpgroups of the warp-specialized
	// kernel take turns issuing their MMAs (FlashAttention-3 §3.1); the
	// zero value is PingPongAuto.
	PingPong PingPongMode
	// MMASync uses the mma.sync kernel (sm_80 and newer) on Hopper too,
	// instead of the warpgroup-MMA (wgmma) kernel it takes by default for
	// plans without a λ filter.
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
	// (bench/2026-11-22-h100-gpu2/run2.log), so it is off by default.
	SkipFuture bool
	// Output16 makes the kernel write the output in the inputs' 16-bit
	// type (bfloat16 for float32 inputs), as FlashAttention and
	// flex_attention do, instead of float32: half the output bytes, and
	// one more rounding (2^-9 relative for bfloat16). Run then returns a
	// tensor of that type when out is nil. On an H100 it measured the
	// same dense and 1-6% faster at density 0.1 from 8K to 32K
	// (bench/2026-11-22-h100-gpu5/sweep10): the output's stores overlap
	// with the next rows' work.
	Output16 bool
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
	// (bench/2026-11-22-h100-gpu2/run2.log).
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
	// on an H100 (bench/2026-11-22-h100-gpu5, sweeps 4-6).
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

// pingPong reports whether the warp-specialized kernel takes turns for
// plan p under mode m.
func pingPong(m PingPongMode, p *plan.Plan) bool {
	switch m {
	case PingPongOn:
		return true
	case PingPongOff:
		return false
	}
	// Without causal masking every block is visible.
	g := p.Geometry
	return p.Causal || int64(len(p.KVBlock)) < int64(p.QBlocks())*int64(p.KBlocks())*int64(g.B*g.Hq)
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

// rowOrder returns the order in which the kernel v launches plan p's rows
// under order o, or nil for head by head (each head's last query block
// first), which the kernels take without an uploaded order.
func rowOrder(o LaunchOrder, p *plan.Plan, v variant) []int32 {
	n := len(p.RowStart) - 1
	switch o {
	case OrderHead:
		return nil
	case OrderLongest:
		return longestFirst(p.RowStart, n)
	}
	g := p.Geometry
	if v.ws {
		// The persistent kernel's blocks draw rows as they finish: head by
		// head keeps the rows in flight on one or two heads' K and V in
		// L2, and longest first within each head lets its short rows
		// fill the gaps. Rows all alike need no order uploaded.
		if rowsAlike(p.RowStart) {
			return nil
		}
		return longestFirst(p.RowStart, max(p.QBlocks(), 1))
	}
	if int64(g.Nk)*int64(max(g.D, g.Dv)) <= 1<<21 {
		return longestFirst(p.RowStart, n)
	}
	return nil
}

// Engine runs plans on one GPU. It is safe for concurrent use; calls are
// serialized on the device's executor goroutine, and device buffers are
// reused from call to call.
type Engine struct {
	dev      *driver.Device
	cache    cubinCache
	warpRows int
	tileK    int
	wgmma    bool // the device runs sm_90a warpgroup MMA and it is wanted
	ws       bool // the warp-specialized kernel runs 128-row blocks
	wsTileK  int  // Config.TileK as given (0: default)
	wsStages int  // Config.Stages as given (0: default)
	pingPong PingPongMode
	ctaRows  int
	minBlk   int
	stages   int
	pipe     bool
	order    LaunchOrder
	skipFut  bool
	out16    bool

	mu      sync.Mutex // guards kernels
	kernels map[variant]*kernel

	bufs buffers // touched only on the executor goroutine
}

type kernel struct {
	fn    driver.Function
	ready error // compile or load error, kept so it is reported every call
}

// Open opens device cfg.Ordinal and loads NVRTC. The error wraps
// driver.ErrUnavailable when there is no driver, NVRTC or device, and
// driver.ErrUnsupportedDevice for GPUs older than sm_80.
func Open(cfg Config) (*Engine, error) {
	if cfg.WarpRows != 0 && cfg.WarpRows != 16 && cfg.WarpRows != 32 {
		return nil, fmt.Errorf("%w: WarpRows %d must be 0, 16 or 32", ErrUnsupported, cfg.WarpRows)
	}
	if cfg.TileK != 0 && cfg.TileK != 32 && cfg.TileK != 64 && cfg.TileK != 128 {
		return nil, fmt.Errorf("%w: TileK %d must be 0, 32, 64 or 128", ErrUnsupported, cfg.TileK)
	}
	dev, err := driver.Open(cfg.Ordinal)
	if err != nil {
		return nil, err
	}
	nv, err := driver.LoadNVRTC()
	if err != nil {
		dev.Close()
		return nil, err
	}
	dir := cfg.CacheDir
	switch dir {
	case "":
		dir = DefaultCacheDir()
	case "-":
		dir = ""
	}
	wr, tk := cfg.WarpRows, cfg.TileK
	if wr == 0 {
		wr = 32
	}
	if tk == 0 {
		tk = 64
	}
	cr, mb := cfg.CTARows, cfg.MinBlocks
	if cr == 0 {
		cr = 128
	}
	if mb == 0 {
		mb = 2
	}
	st := cfg.Stages
	if st == 0 {
		st = 1
	}
	if cfg.Order < OrderAuto || cfg.Order > OrderLongest {
		dev.Close()
		return nil, fmt.Errorf("%w: launch order %d; use OrderAuto, OrderHead or OrderLongest", ErrUnsupported, cfg.Order)
	}
	if cfg.PingPong < PingPongAuto || cfg.PingPong > PingPongOff {
		dev.Close()
		return nil, fmt.Errorf("%w: ping-pong mode %d; use PingPongAuto, PingPongOn or PingPongOff", ErrUnsupported, cfg.PingPong)
	}
	if (cr != 64 && cr != 128) || mb < 1 || mb > 4 || st < 1 || st > 4 {
		dev.Close()
		return nil, fmt.Errorf("%w: CTARows %d must be 64 or 128, MinBlocks %d in 1..4 and Stages %d in 1..4 (1 or 2 outside the warp-specialized kernel)", ErrUnsupported, cfg.CTARows, cfg.MinBlocks, cfg.Stages)
	}
	return &Engine{dev: dev, cache: cubinCache{nvrtc: nv, dir: dir}, warpRows: wr, tileK: tk,
		wgmma: dev.Arch() == "sm_90a" && !cfg.MMASync, ws: dev.Arch() == "sm_90a" && !cfg.MMASync && !cfg.FA2Loop && dev.TensorMaps(), wsTileK: cfg.TileK, wsStages: cfg.Stages, pingPong: cfg.PingPong, ctaRows: cr, minBlk: mb, stages: st, pipe: cfg.Pipeline, order: cfg.Order, skipFut: cfg.SkipFuture, out16: cfg.Output16, kernels: map[variant]*kernel{}}, nil
}

var (
	defaultOnce   sync.Once
	defaultEngine *Engine
	defaultErr    error
)

// Default returns the process-wide engine on device 0, opening it on first
// use; a failure to open is remembered and returned on every call.
func Default() (*Engine, error) {
	defaultOnce.Do(func() { defaultEngine, defaultErr = Open(Config{}) })
	return defaultEngine, defaultErr
}

// Info describes the engine's device.
func (e *Engine) Info() driver.Info { return e.dev.Info }

// NVRTCVersion is the version of the loaded NVRTC.
func (e *Engine) NVRTCVersion() (major, minor int) { return e.cache.nvrtc.Major, e.cache.nvrtc.Minor }

// Close frees the device buffers and releases the device.
func (e *Engine) Close() error {
	err := e.dev.Do(context.Background(), func(c *driver.Ctx) error { return e.bufs.free(c) })
	if errors.Is(err, driver.ErrClosed) {
		return nil
	}
	return errors.Join(err, e.dev.Close())
}

// Supports reports whether the GPU kernels run p on every GPU the engine
// supports (the mma.sync kernel of sm_80 and newer), with an error
// wrapping ErrUnsupported that says why not. Engine.Supports answers for
// one engine's device, which may take more.
func Supports(p *plan.Plan) error {
	_, err := chooseVariant(p, tensor.BFloat16, kernelChoice{warpRows: 32, tileK: 64})
	return err
}

// Supports reports whether e's kernels run p on its device, with an error
// wrapping ErrUnsupported that says why not. On Hopper it accepts plans
// the package-level Supports rejects: the warp-specialized kernel has no
// limit of 65535 on B·Hq.
func (e *Engine) Supports(p *plan.Plan) error {
	_, err := chooseVariant(p, tensor.BFloat16, e.choice())
	return err
}

// choice is the engine's configuration as chooseVariant takes it.
func (e *Engine) choice() kernelChoice {
	return kernelChoice{warpRows: e.warpRows, tileK: e.tileK, wgmma: e.wgmma, ws: e.ws, wsTileK: e.wsTileK, ctaRows: e.ctaRows, minBlock: e.minBlk}
}

// kernelChoice is the engine's configuration that chooseVariant applies.
type kernelChoice struct {
	warpRows, tileK   int
	wgmma, ws         bool
	wsTileK           int
	ctaRows, minBlock int
}

func chooseVariant(p *plan.Plan, dt tensor.DType, kc kernelChoice) (variant, error) {
	warpRows, tileK, wgmma := kc.warpRows, kc.tileK, kc.wgmma
	g := p.Geometry
	v := variant{bf16: dt != tensor.Float16, kt: 64, mt: 1}
	switch d := max(g.D, g.Dv); {
	case d <= 64:
		v.headDim = 64
	case d <= 128:
		v.headDim = 128
	default:
		return v, fmt.Errorf("%w: head dims D=%d, Dv=%d; the GPU kernel takes up to 128", ErrUnsupported, g.D, g.Dv)
	}
	if p.BlockQ != 64 && p.BlockQ != 128 {
		return v, fmt.Errorf("%w: BlockQ %d; the GPU kernel takes 64 or 128", ErrUnsupported, p.BlockQ)
	}
	v.blockQ = p.BlockQ
	if p.BlockK%64 != 0 {
		return v, fmt.Errorf("%w: BlockK %d; the GPU kernel takes multiples of 64", ErrUnsupported, p.BlockK)
	}
	if p.Order != nil {
		return v, fmt.Errorf("%w: token orders (S2O)", ErrUnsupported)
	}
	if p.Stop != nil {
		return v, fmt.Errorf("%w: early-stop rules (S2O)", ErrUnsupported)
	}
	if p.Init != nil {
		return v, fmt.Errorf("%w: first-pass plans whose states the main plan resumes (S2O two-pass)", ErrUnsupported)
	}
	if p.Filter != nil && p.Filter.HeadLambda != nil {
		return v, fmt.Errorf("%w: per-head λ (a tuned SpargeAttn profile)", ErrUnsupported)
	}
	for _, l := range p.Level {
		if l > plan.Full {
			return v, fmt.Errorf("%w: pooled levels (PSA pyramid)", ErrUnsupported)
		}
	}
	if f := p.Filter; f != nil {
		v.filter = true
		// The λ decision is per KV block, so a tile must be a whole block,
		// and per 16-row MMA atom or a whole number of them.
		if p.BlockK != 64 && p.BlockK != 128 {
			return v, fmt.Errorf("%w: λ filter with BlockK %d; the GPU kernel takes 64 or 128", ErrUnsupported, p.BlockK)
		}
		if f.RowGroup%16 != 0 {
			return v, fmt.Errorf("%w: λ filter row group %d; the GPU kernel takes multiples of 16", ErrUnsupported, f.RowGroup)
		}
		v.kt = p.BlockK
	}
	if p.Filter == nil && p.BlockK%tileK == 0 {
		v.kt = tileK
	}
	if wgmma && kc.ws && !v.filter && p.BlockQ == 128 {
		// Warp-specialized: two consumer warpgroups of 64 rows, tiles of
		// 128 keys unless asked for 64 or the blocks are 64 wide.
		v.ws, v.wgmma, v.stages = true, true, 2
		v.kt = 128
		if p.BlockK%128 != 0 || kc.wsTileK == 64 || kc.wsTileK == 32 {
			v.kt = 64
		}
		return v, nil
	}
	// The other kernels launch one grid row per batch and head.
	if g.B*g.Hq > 65535 {
		return v, fmt.Errorf("%w: B·Hq = %d above 65535", ErrUnsupported, g.B*g.Hq)
	}
	if wgmma && !v.filter {
		// One warpgroup per 64 query rows, 16 rows a warp; tiles of 64 or
		// 128 keys.
		v.wgmma = true
		if v.kt != 128 {
			v.kt = 64
		}
		if p.BlockQ%kc.ctaRows == 0 {
			v.blockQ = kc.ctaRows
		}
		v.minBlocks = kc.minBlock
		return v, nil
	}
	if v.blockQ == 128 && warpRows == 32 && !v.filter {
		v.mt = 2
		v.kt = min(v.kt, 64)
	}
	if v.blockQ == 128 && warpRows == 32 && v.filter && v.kt == 64 {
		v.mt = 2
	}
	return v, nil
}

// function returns the kernel for v, compiling and loading it on first
// use. It runs on the executor goroutine.
func (e *Engine) function(c *driver.Ctx, v variant) (driver.Function, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k, ok := e.kernels[v]; ok {
		return k.fn, k.ready
	}
	k := &kernel{}
	k.fn, k.ready = e.load(c, v)
	e.kernels[v] = k
	return k.fn, k.ready
}

func (e *Engine) load(c *driver.Ctx, v variant) (driver.Function, error) {
	src, name := v.source()
	cubin, _, err := e.cache.get(src, name, v.options(e.dev.Arch()))
	if err != nil {
		return 0, fmt.Errorf("kernel %s for %s: %w", v, e.dev.Arch(), err)
	}
	m, err := c.LoadModule(cubin)
	if err != nil {
		return 0, fmt.Errorf("loading kernel %s: %w", v, err)
	}
	fn, err := c.Function(m, "attn_fwd")
	if err != nil {
		return 0, err
	}
	// Always raise the dynamic limit to what the kernel takes: the default
	// 48 KiB is not enough for most variants.
	if sb := v.sharedBytes(); sb > e.dev.MaxSharedOptin {
		return 0, fmt.Errorf("%w: kernel %s needs %d bytes of shared memory, the device allows %d", ErrUnsupported, v, sb, e.dev.MaxSharedOptin)
	} else if err := c.SetMaxDynamicShared(fn, sb); err != nil {
		return 0, fmt.Errorf("kernel %s: %w", v, err)
	}
	return fn, nil
}

// Precompile compiles (in parallel, with NVRTC) and loads every kernel
// variant for both input types, reporting the first failure with NVRTC's
// log. It returns the variants' names and the time taken.
func (e *Engine) Precompile(ctx context.Context) ([]string, time.Duration, error) {
	start := time.Now()
	vs := mmaSyncVariants()
	if e.wgmma {
		for _, bf := range []bool{true, false} {
			for _, d := range []int{64, 128} {
				for _, q := range []int{64, 128} {
					vs = append(vs, variant{headDim: d, blockQ: q, kt: 64, mt: 1, bf16: bf, wgmma: true, minBlocks: e.minBlk})
				}
			}
		}
	}
	for i := range vs {
		if vs[i].stages = min(e.stages, 2); vs[i].sharedBytes() > e.dev.MaxSharedOptin {
			vs[i].stages = 1
		}
	}
	if e.ws {
		for _, bf := range []bool{true, false} {
			for _, d := range []int{64, 128} {
				for _, kt := range []int{64, 128} {
					for _, dyn := range []bool{false, true} {
						for _, pp := range []bool{false, true} {
							vs = append(vs, variant{headDim: d, blockQ: 128, kt: kt, mt: 1, bf16: bf, wgmma: true, ws: true, stages: 2, dynamic: dyn, pingPong: pp, tmaOut: true})
						}
					}
				}
			}
		}
	}
	if err := compileVariants(ctx, &e.cache, e.dev.Arch(), vs); err != nil {
		return nil, time.Since(start), err
	}
	names := make([]string, len(vs))
	err := e.dev.Do(ctx, func(c *driver.Ctx) error {
		for i, v := range vs {
			if _, err := e.function(c, v); err != nil {
				return err
			}
			names[i] = v.String()
		}
		return nil
	})
	return names, time.Since(start), err
}

// mmaSyncVariants are the mma.sync kernel configurations the engine
// chooses among (sm_80 and newer), for both 16-bit input types.
func mmaSyncVariants() []variant {
	var vs []variant
	for _, bf := range []bool{true, false} {
		for _, d := range []int{64, 128} {
			for _, c := range []struct {
				q, k, m int
				filter  bool
			}{{64, 64, 1, false}, {128, 64, 2, false}, {128, 64, 1, false}, {64, 64, 1, true}, {64, 128, 1, true}, {128, 64, 2, true}, {128, 128, 1, true}} {
				vs = append(vs, variant{headDim: d, blockQ: c.q, kt: c.k, mt: c.m, bf16: bf, filter: c.filter, stages: 1})
			}
		}
	}
	return vs
}

// compileVariants compiles vs for arch in parallel through the cache and
// joins the failures, each with NVRTC's log.
func compileVariants(ctx context.Context, c *cubinCache, arch string, vs []variant) error {
	errs := make([]error, len(vs))
	var wg sync.WaitGroup
	for i, v := range vs {
		wg.Go(func() {
			if errs[i] = ctx.Err(); errs[i] != nil {
				return
			}
			src, name := v.source()
			if _, _, err := c.get(src, name, v.options(arch)); err != nil {
				errs[i] = fmt.Errorf("kernel %s for %s: %w", v, arch, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// PortableArchs are the architectures besides the device's own that the
// mma.sync kernels are checked to compile for (CompileFor): Ampere data
// centre and consumer parts and Ada.
var PortableArchs = []string{"sm_80", "sm_86", "sm_89"}

// CompileFor compiles every mma.sync kernel variant for each of archs with
// the engine's NVRTC (no device of that architecture is needed; nothing is
// loaded), so a build can be checked for GPUs it cannot run on. It returns
// the number of variants compiled per architecture.
func (e *Engine) CompileFor(ctx context.Context, archs ...string) (int, error) {
	vs := mmaSyncVariants()
	var errs []error
	for _, a := range archs {
		errs = append(errs, compileVariants(ctx, &e.cache, a, vs))
	}
	return len(vs), errors.Join(errs...)
}

// kernelParams mirrors struct Params in kernels/attention.cu.
type kernelParams struct {
	q, k, v, o, rowStart, kvBlock, counters         uint64
	qsb, qsh, qsn, ksb, ksh, ksn, vsb, vsh, vsn     int64
	osb, osh, osn                                   int64
	b, hq, hkv, nq, nk, dv, qBlocks, blockK, causal int32
	filter, rowGroup                                int32
	lambdaLog2, scaleLog2                           float32
	split                                           int32
	order                                           uint64
}

// buffers are the device allocations reused across calls; each grows to
// the largest size asked so far.
type buffers struct {
	q, k, v, o, rows, kv, counters, order deviceBuf
	flush                                 deviceBuf // Benchmark's L2 scratch
}

type deviceBuf struct {
	ptr  driver.Ptr
	size int64
}

func (b *deviceBuf) ensure(c *driver.Ctx, n int64) error {
	if n <= b.size {
		return nil
	}
	if err := c.Free(b.ptr); err != nil {
		return err
	}
	b.ptr, b.size = 0, 0
	p, err := c.Alloc(n)
	if err != nil {
		return err
	}
	b.ptr, b.size = p, n
	return nil
}

func (bs *buffers) free(c *driver.Ctx) error {
	var errs []error
	for _, b := range []*deviceBuf{&bs.q, &bs.k, &bs.v, &bs.o, &bs.rows, &bs.kv, &bs.counters, &bs.order, &bs.flush} {
		errs = append(errs, c.Free(b.ptr))
		*b = deviceBuf{}
	}
	return errors.Join(errs...)
}

// job is one validated plan with its inputs staged for upload.
type job struct {
	p        *plan.Plan
	v        variant
	q, k, vv staged
	rows     []int32
	order    []int32      // launch order of the plan rows, or nil
	dt       tensor.DType // the 16-bit type the inputs were staged in
	params   *kernelParams
	maps     *wsMaps // the warp-specialized kernel's tensor maps, set by upload
}

// prepare validates the inputs against the plan and the kernel and stages
// them as 16-bit rows the kernel can read.
func (e *Engine) prepare(p *plan.Plan, q, k, v *tensor.Tensor) (*job, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil plan", plan.ErrInvalid)
	}
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		return nil, err
	}
	if g != p.Geometry {
		return nil, fmt.Errorf("%w: tensors are %+v, plan is for %+v", ErrMismatch, g, p.Geometry)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	dt := q.DType()
	if dt == tensor.Float32 {
		dt = tensor.BFloat16 // float32 inputs are rounded to bfloat16
	}
	vr, err := chooseVariant(p, dt, e.choice())
	if err != nil {
		return nil, err
	}
	vr.out16 = e.out16
	if vr.ws {
		vr.pingPong = pingPong(e.pingPong, p)
		vr.dynamic = !rowsAlike(p.RowStart)
		if e.wsStages >= 2 {
			vr.stages = e.wsStages
		}
		for vr.stages > 2 && vr.sharedBytes() > e.dev.MaxSharedOptin {
			vr.stages--
		}
		if vr.tmaOut = true; vr.sharedBytes() > e.dev.MaxSharedOptin {
			vr.tmaOut = false
		}
	} else {
		if vr.stages = min(e.stages, 2); vr.sharedBytes() > e.dev.MaxSharedOptin {
			vr.stages = 1
		}
		if vr.wgmma && e.pipe {
			vr.pipe, vr.stages = true, 2
		}
		vr.skipFuture = vr.wgmma && !vr.pipe && e.skipFut && p.Causal
	}
	if len(p.KVBlock) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d plan entries above 2^31", ErrUnsupported, len(p.KVBlock))
	}
	j := &job{p: p, v: vr, dt: dt}
	if j.q, err = stage(q, dt, vr.headDim); err != nil {
		return nil, err
	}
	if j.k, err = stage(k, dt, vr.headDim); err != nil {
		return nil, err
	}
	if j.vv, err = stage(v, dt, vr.headDim); err != nil {
		return nil, err
	}
	j.rows = make([]int32, len(p.RowStart))
	for i, r := range p.RowStart {
		j.rows[i] = int32(r)
	}
	j.order = rowOrder(e.order, p, vr)
	f := p.Filter
	j.params = &kernelParams{
		qsb: j.q.sb, qsh: j.q.sh, qsn: j.q.sn,
		ksb: j.k.sb, ksh: j.k.sh, ksn: j.k.sn,
		vsb: j.vv.sb, vsh: j.vv.sh, vsn: j.vv.sn,
		osh: int64(g.Nq * g.Dv), osn: int64(g.Dv),
		b: int32(g.B), hq: int32(g.Hq), hkv: int32(g.Hkv), nq: int32(g.Nq), nk: int32(g.Nk), dv: int32(g.Dv),
		qBlocks: int32(p.QBlocks()), blockK: int32(p.BlockK), split: int32(p.BlockQ / vr.blockQ),
		scaleLog2: p.SoftmaxScale() * math.Log2E,
	}
	j.params.osb = int64(g.Hq) * j.params.osh
	if p.Causal {
		j.params.causal = 1
	}
	if f != nil {
		j.params.filter, j.params.rowGroup = 1, int32(f.RowGroup)
		j.params.lambdaLog2 = f.Lambda * math.Log2E
	}
	return j, nil
}

// upload copies the inputs and the plan to the device and points the
// kernel's parameters at them.
func (e *Engine) upload(c *driver.Ctx, j *job) error {
	g := j.p.Geometry
	bs := &e.bufs
	for _, u := range []struct {
		buf *deviceBuf
		s   *staged
		dst *uint64
	}{{&bs.q, &j.q, &j.params.q}, {&bs.k, &j.k, &j.params.k}, {&bs.v, &j.vv, &j.params.v}} {
		if err := u.buf.ensure(c, int64(len(u.s.bits))*2); err != nil {
			return err
		}
		if err := driver.CopyIn(c, u.buf.ptr, u.s.bits); err != nil {
			return err
		}
		*u.dst = uint64(u.buf.ptr)
	}
	if err := bs.o.ensure(c, int64(g.B*g.Hq*g.Nq*g.Dv)*j.v.outBytes()); err != nil {
		return err
	}
	if err := bs.counters.ensure(c, counterBytes); err != nil {
		return err
	}
	j.params.o, j.params.counters = uint64(bs.o.ptr), uint64(bs.counters.ptr)
	if j.v.ws {
		m, err := encodeMaps(c, j)
		if err != nil {
			return err
		}
		j.maps = m
	}
	return e.uploadPlan(c, j)
}

func (e *Engine) uploadPlan(c *driver.Ctx, j *job) error {
	bs := &e.bufs
	if err := bs.rows.ensure(c, int64(len(j.rows))*4); err != nil {
		return err
	}
	if err := bs.kv.ensure(c, int64(max(len(j.p.KVBlock), 1))*4); err != nil {
		return err
	}
	if err := driver.CopyIn(c, bs.rows.ptr, j.rows); err != nil {
		return err
	}
	if err := driver.CopyIn(c, bs.kv.ptr, j.p.KVBlock); err != nil {
		return err
	}
	j.params.rowStart, j.params.kvBlock = uint64(bs.rows.ptr), uint64(bs.kv.ptr)
	j.params.order = 0
	if j.order != nil {
		if err := bs.order.ensure(c, int64(len(j.order))*4); err != nil {
			return err
		}
		if err := driver.CopyIn(c, bs.order.ptr, j.order); err != nil {
			return err
		}
		j.params.order = uint64(bs.order.ptr)
	}
	return nil
}

// longestFirst returns the plan rows (one per batch, head and query block)
// in windows of window consecutive rows, each window ordered by decreasing
// number of listed KV blocks; rows of equal length keep their plan order.
func longestFirst(rowStart []int, window int) []int32 {
	n := len(rowStart) - 1
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	length := func(r int32) int { return rowStart[r+1] - rowStart[r] }
	window = max(window, 1)
	for lo := 0; lo < n; lo += window {
		w := order[lo:min(lo+window, n)]
		slices.SortStableFunc(w, func(a, b int32) int { return length(b) - length(a) })
	}
	return order
}

// launch starts the kernel; the caller zeroes the counters first.
func (e *Engine) launch(c *driver.Ctx, j *job) error {
	fn, err := e.function(c, j.v)
	if err != nil {
		return err
	}
	g := j.p.Geometry
	grid := driver.Dim3{X: uint32(j.p.QBlocks() * int(j.params.split)), Y: uint32(g.B * g.Hq), Z: 1}
	block := driver.Dim3{X: uint32(j.v.threads()), Y: 1, Z: 1}
	if grid.X == 0 || grid.Y == 0 {
		return nil
	}
	if j.v.ws {
		// A persistent grid: one block per multiprocessor at most, each
		// taking the plan rows gridDim.x apart.
		grid = driver.Dim3{X: uint32(min(int(grid.X)*int(grid.Y), e.dev.SMs)), Y: 1, Z: 1}
		var wp wsParams
		wp.set(j.maps, j.params)
		return c.Launch(fn, grid, block, j.v.sharedBytes(), driver.Arg(&wp))
	}
	return c.Launch(fn, grid, block, j.v.sharedBytes(), driver.Arg(j.params))
}

// counterBytes is the size of the device counters: four work counters
// (Params.counters in kernels/common.cuh) and the persistent kernel's row
// tickets, all zeroed before each launch.
const counterBytes = 5 * 8

// stats reads the device counters back as plan.Stats.
func (e *Engine) stats(c *driver.Ctx, j *job) (plan.Stats, error) {
	var n [4]uint64
	if err := driver.CopyOut(c, n[:], e.bufs.counters.ptr); err != nil {
		return plan.Stats{}, err
	}
	p := j.p
	s := plan.Stats{DenseBlocks: float64(p.DenseBlocks()), QKBlocks: float64(n[0]), PVBlocks: float64(n[1])}
	if f := p.Filter; f != nil {
		// A row group counts its share of its block's valid rows, as on
		// the CPU: 1/⌈rows/RowGroup⌉ of a product.
		full := float64((p.BlockQ + f.RowGroup - 1) / f.RowGroup)
		tail := p.Geometry.Nq - (p.QBlocks()-1)*p.BlockQ
		last := float64((tail + f.RowGroup - 1) / f.RowGroup)
		s.PVBlocks = float64(n[2])/full + float64(n[3])/last
	}
	return s, nil
}

// Run computes attention for the plan p into out and returns the work
// counters read from the device. q, k and v must match p.Geometry, in
// bfloat16 or float16 (float32 inputs are rounded to bfloat16); out must be
// [B, Hq, Nq, Dv] in any storage type and layout, or nil to get a new
// BHND tensor (float32, or the inputs' 16-bit type under
// Config.Output16). Plans the kernel does not run give an error wrapping
// ErrUnsupported (see Supports).
func (e *Engine) Run(ctx context.Context, p *plan.Plan, q, k, v, out *tensor.Tensor) (*tensor.Tensor, plan.Stats, error) {
	j, err := e.prepare(p, q, k, v)
	if err != nil {
		return nil, plan.Stats{}, err
	}
	g := p.Geometry
	want := tensor.Shape{B: g.B, H: g.Hq, N: g.Nq, D: g.Dv}
	if out != nil && out.Shape() != want {
		return nil, plan.Stats{}, fmt.Errorf("%w: out is %v, want %v", ErrMismatch, out.Shape(), want)
	}
	n := g.B * g.Hq * g.Nq * g.Dv
	var host []float32
	var host16 []uint16
	if j.v.out16 {
		host16 = make([]uint16, n)
	} else {
		host = make([]float32, n)
	}
	var stats plan.Stats
	err = e.dev.Do(ctx, func(c *driver.Ctx) error {
		if err := e.upload(c, j); err != nil {
			return err
		}
		if err := c.Memset(e.bufs.counters.ptr, 0, counterBytes); err != nil {
			return err
		}
		// Poison the output (all-ones bits are NaN): an element the kernel
		// fails to write cannot pass for a result.
		if err := c.Memset(e.bufs.o.ptr, 0xff, int64(n)*j.v.outBytes()); err != nil {
			return err
		}
		if err := e.launch(c, j); err != nil {
			return err
		}
		if err := c.Sync(); err != nil {
			return err
		}
		var cerr error
		if j.v.out16 {
			cerr = driver.CopyOut(c, host16, e.bufs.o.ptr)
		} else {
			cerr = driver.CopyOut(c, host, e.bufs.o.ptr)
		}
		if cerr != nil {
			return cerr
		}
		stats, err = e.stats(c, j)
		return err
	})
	if err != nil {
		return nil, plan.Stats{}, err
	}
	var res *tensor.Tensor
	if j.v.out16 {
		res, err = tensor.FromBits16(j.dt, tensor.BHND, want, host16)
	} else {
		res, err = tensor.FromFloat32(tensor.BHND, want, host)
	}
	if err != nil {
		return nil, plan.Stats{}, err
	}
	if out == nil {
		return res, stats, nil
	}
	row := make([]float32, g.Dv)
	for b := range g.B {
		for h := range g.Hq {
			for n := range g.Nq {
				res.ReadRow(b, h, n, row)
				out.WriteRow(b, h, n, row)
			}
		}
	}
	return out, stats, nil
}

// Timing is what Benchmark measured.
type Timing struct {
	Kernel       Variant       // the kernel configuration that ran
	MedianMS     float64       // median kernel time over the timed launches
	TimesMS      []float64     // every timed launch, in order
	PlanUploadMS float64       // copying the plan's CSR arrays to the device
	Stats        plan.Stats    // counters of the last launch
	Wall         time.Duration // the whole call, staging included
	// FlushedL2 says whether L2 was overwritten before each launch (see
	// Benchmark); false where the scratch buffer could not be allocated.
	FlushedL2 bool
}

// flushBytes is the scratch Benchmark overwrites before each launch: more
// than any current GPU's L2, and what triton.testing.do_bench clears.
const flushBytes = 256 << 20

// Variant names a compiled kernel configuration.
type Variant string

// Benchmark uploads the inputs once, runs p warmup+reps times and times
// each timed launch with device events. Outputs stay on the device.
//
// Before each launch it overwrites a 256 MiB scratch buffer on the device,
// as triton.testing.do_bench does for the peers: L2 then holds none of the
// inputs, and the GPU is still busy with that when the host enqueues the
// start event and the launch, so the host's launch latency stays out of
// the time (an idle GPU would record the start event at once and wait for
// the launch; measured 15 µs for a one-tile kernel on an H100).
func (e *Engine) Benchmark(ctx context.Context, p *plan.Plan, q, k, v *tensor.Tensor, warmup, reps int) (Timing, error) {
	start := time.Now()
	if reps < 1 || warmup < 0 {
		return Timing{}, fmt.Errorf("%w: reps %d must be ≥ 1 and warmup %d ≥ 0", ErrUnsupported, reps, warmup)
	}
	j, err := e.prepare(p, q, k, v)
	if err != nil {
		return Timing{}, err
	}
	t := Timing{Kernel: Variant(j.v.String())}
	err = e.dev.Do(ctx, func(c *driver.Ctx) error {
		if err := e.upload(c, j); err != nil {
			return err
		}
		ev := make([]driver.Event, 2)
		for i := range ev {
			var err error
			if ev[i], err = c.NewEvent(); err != nil {
				return err
			}
			defer c.DestroyEvent(ev[i])
		}
		// The plan upload alone, as a sparse caller pays it per call.
		ms, err := timeOn(c, ev, func() error { return e.uploadPlan(c, j) })
		if err != nil {
			return err
		}
		t.PlanUploadMS = ms
		// Without room for the scratch buffer, time as before: launch
		// latency included, a warm L2.
		t.FlushedL2 = e.bufs.flush.ensure(c, flushBytes) == nil
		for i := range warmup + reps {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := c.Memset(e.bufs.counters.ptr, 0, counterBytes); err != nil {
				return err
			}
			if t.FlushedL2 {
				if err := c.Memset(e.bufs.flush.ptr, byte(i), flushBytes); err != nil {
					return err
				}
			}
			ms, err := timeOn(c, ev, func() error { return e.launch(c, j) })
			if err != nil {
				return err
			}
			if i >= warmup {
				t.TimesMS = append(t.TimesMS, ms)
			}
		}
		t.Stats, err = e.stats(c, j)
		return err
	})
	if err != nil {
		return Timing{}, err
	}
	s := append([]float64(nil), t.TimesMS...)
	sort.Float64s(s)
	t.MedianMS = s[len(s)/2]
	t.Wall = time.Since(start)
	return t, nil
}

// timeOn records ev[0], runs enqueue, records ev[1] and returns the
// milliseconds between the two events.
func timeOn(c *driver.Ctx, ev []driver.Event, enqueue func() error) (float64, error) {
	if err := c.Record(ev[0]); err != nil {
		return 0, err
	}
	if err := enqueue(); err != nil {
		return 0, err
	}
	if err := c.Record(ev[1]); err != nil {
		return 0, err
	}
	ms, err := c.Elapsed(ev[0], ev[1])
	return float64(ms), err
}
