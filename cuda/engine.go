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
	"sync"

	"github.com/sparseattn/sparseattn/cuda/driver"
)

// ErrUnsupported reports a plan or input the GPU kernel does not handle;
// the CPU executor runs every plan, so callers fall back to it.
var ErrUnsupported = errors.New("cuda: not supported on the GPU")

// ErrMismatch reports tensors that do not match the plan's geometry.
var ErrMismatch = errors.New("cuda: tensors do not match the plan")

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
	genStage int  // Tactics.GenStages as given (0: default)
	genNarr  bool // Tactics.GenNarrowTiles
	pingPong PingPongMode
	ctaRows  int
	minBlk   int
	stages   int
	pipe     bool
	order    LaunchOrder
	skipFut  bool
	out16    bool
	depAs    bool        // Tactics.DependentAssembly
	wideDns  bool        // !Tactics.DenseNarrowTiles
	files    kernelFiles // Tactics.KernelDir's kernel sources

	mu      sync.Mutex // guards kernels and aux
	kernels map[variant]*kernel
	aux     map[auxKey]*kernel

	bufs buffers // touched only on the executor goroutine
	// dynShared is the largest dynamic shared memory each function was
	// allowed so far (raiseDynamicShared); touched only on the executor
	// goroutine.
	dynShared map[driver.Function]int
}

// raiseDynamicShared lets f launch with n bytes of dynamic shared memory,
// calling the driver only when n exceeds what f was allowed before: a
// larger allowance serves every smaller launch, and the call is host time
// on the path of every plan. Runs on the executor goroutine.
func (e *Engine) raiseDynamicShared(c *driver.Ctx, f driver.Function, n int) error {
	if e.dynShared[f] >= n {
		return nil
	}
	if err := c.SetMaxDynamicShared(f, n); err != nil {
		return err
	}
	if e.dynShared == nil {
		e.dynShared = map[driver.Function]int{}
	}
	e.dynShared[f] = n
	return nil
}

type kernel struct {
	fn    driver.Function
	ready error // compile or load error, kept so it is reported every call
}

// Open opens device cfg.Ordinal and loads NVRTC. The error wraps
// driver.ErrUnavailable when there is no driver, NVRTC or device, and
// driver.ErrUnsupportedDevice for GPUs older than sm_80.
func Open(cfg Config) (*Engine, error) {
	t := cfg.Tactics
	if t.WarpRows != 0 && t.WarpRows != 16 && t.WarpRows != 32 {
		return nil, fmt.Errorf("%w: WarpRows %d must be 0, 16 or 32", ErrUnsupported, t.WarpRows)
	}
	if t.TileK != 0 && t.TileK != 32 && t.TileK != 64 && t.TileK != 128 {
		return nil, fmt.Errorf("%w: TileK %d must be 0, 32, 64 or 128", ErrUnsupported, t.TileK)
	}
	files, err := readKernelFiles(t.KernelDir)
	if err != nil {
		return nil, err
	}
	dev, err := driver.Open(cfg.Ordinal)
	if err != nil {
		return nil, err
	}
	nv, err := driver.LoadNVRTC()
	if err == nil {
		err = nv.CanTarget(dev.Arch())
	}
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
	wr, tk := t.WarpRows, t.TileK
	if wr == 0 {
		wr = 32
	}
	if tk == 0 {
		tk = 64
	}
	cr, mb := t.CTARows, t.MinBlocks
	if cr == 0 {
		cr = 128
	}
	if mb == 0 {
		mb = 2
	}
	st := t.Stages
	if st == 0 {
		st = 1
	}
	if t.Order < OrderAuto || t.Order > OrderLongest {
		dev.Close()
		return nil, fmt.Errorf("%w: launch order %d; use OrderAuto, OrderHead or OrderLongest", ErrUnsupported, t.Order)
	}
	if t.PingPong < PingPongAuto || t.PingPong > PingPongOff {
		dev.Close()
		return nil, fmt.Errorf("%w: ping-pong mode %d; use PingPongAuto, PingPongOn or PingPongOff", ErrUnsupported, t.PingPong)
	}
	if t.GenStages != 0 && (t.GenStages < 2 || t.GenStages > 4) {
		dev.Close()
		return nil, fmt.Errorf("%w: GenStages %d must be 0 or 2..4", ErrUnsupported, t.GenStages)
	}
	if (cr != 64 && cr != 128) || mb < 1 || mb > 4 || st < 1 || st > 4 {
		dev.Close()
		return nil, fmt.Errorf("%w: CTARows %d must be 64 or 128, MinBlocks %d in 1..4 and Stages %d in 1..4 (1 or 2 outside the warp-specialized kernel)", ErrUnsupported, t.CTARows, t.MinBlocks, t.Stages)
	}
	return &Engine{dev: dev, cache: cubinCache{nvrtc: nv, dir: dir}, warpRows: wr, tileK: tk,
		wgmma: dev.Arch() == "sm_90a" && !t.MMASync, ws: dev.Arch() == "sm_90a" && !t.MMASync && !t.FA2Loop && dev.TensorMaps(), wsTileK: t.TileK, wsStages: t.Stages, genStage: t.GenStages, genNarr: t.GenNarrowTiles, pingPong: t.PingPong, ctaRows: cr, minBlk: mb, stages: st, pipe: t.Pipeline, order: t.Order, skipFut: t.SkipFuture, depAs: t.DependentAssembly, wideDns: !t.DenseNarrowTiles, files: files, out16: cfg.Output16, kernels: map[variant]*kernel{}, aux: map[auxKey]*kernel{}}, nil
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
	src, name := v.sourceWith(e.files)
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
