package cuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sparseattn/sparseattn/cuda/driver"
)

// The kernel sources: common.cuh, its include of wgmma.cuh expanded
// (commonSource), goes in front of each kernel file.
var (
	//go:embed kernels/common.cuh
	commonFile   string
	commonSource = mustExpand("#line 1 \"common.cuh\"\n" + commonFile)
	//go:embed kernels/attention.cu
	fa2Source string
	//go:embed kernels/attention_ws.cu
	wsSource string
)

// source returns the NVRTC program of the variant's kernel and its name.
// A #line directive keeps NVRTC's messages pointing into the kernel file.
func (v variant) source() (src, name string) { return v.sourceWith(nil) }

// sourceWith is source with the kernel files in files (by name, as
// Tactics.KernelDir gives them) in place of the embedded ones.
func (v variant) sourceWith(files kernelFiles) (src, name string) {
	if v.gen.on {
		body, name := v.gen.sourceWith(files)
		return commonSource + body, name
	}
	name, body := "attention.cu", fa2Source
	if v.ws {
		name, body = "attention_ws.cu", wsSource
	}
	return commonSource + "#line 1 \"" + name + "\"\n" + files.or(name, body), name
}

// kernelFiles are attention kernel sources by file name, read from
// Tactics.KernelDir; a nil map holds none.
type kernelFiles map[string]string

// kernelFileNames are the files Tactics.KernelDir may replace.
var kernelFileNames = []string{"attention.cu", "attention_ws.cu", "attention_gen.cu", "attention_gen_ws.cu", "attention_gen.cuh"}

// or returns the source of file name from f, or embedded where f lacks it.
func (f kernelFiles) or(name, embedded string) string {
	if s, ok := f[name]; ok {
		return s
	}
	return embedded
}

// readKernelFiles reads the kernel files dir holds (Tactics.KernelDir). A
// directory that cannot be read, or that holds none of them, is an error:
// a misspelt path must not quietly measure the embedded kernels.
func readKernelFiles(dir string) (kernelFiles, error) {
	if dir == "" {
		return nil, nil
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: KernelDir: %w", ErrUnsupported, err)
	}
	f := kernelFiles{}
	for _, n := range kernelFileNames {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: KernelDir: %w", ErrUnsupported, err)
		}
		f[n] = string(b)
	}
	if len(f) == 0 {
		return nil, fmt.Errorf("%w: KernelDir %s holds none of %v", ErrUnsupported, dir, kernelFileNames)
	}
	return f, nil
}

// variant is one compiled configuration of the attention kernel.
type variant struct {
	headDim int  // 64 or 128
	blockQ  int  // query rows per CTA = the plan's BlockQ
	kt      int  // keys per tile
	mt      int  // 16-row MMA atoms per warp
	bf16    bool // else float16
	filter  bool // applies the plan's λ filter
	wgmma   bool // Hopper warpgroup MMA (sm_90a) instead of mma.sync
	// minBlocks is the wgmma kernel's thread blocks per multiprocessor
	// (__launch_bounds__), hence its register budget.
	minBlocks int
	// stages is the number of K/V tile buffers (1 or 2).
	stages int
	// pipe overlaps softmax with the tensor cores (wgmma only; 2 stages).
	pipe bool
	// skipFuture skips causal tiles after all of a warpgroup's rows
	// (wgmma without pipe).
	skipFuture bool
	// out16 writes the output in the input type instead of float32.
	out16 bool
	// ws selects the warp-specialized Hopper kernel (attention_ws.cu):
	// 128-row blocks, a TMA producer warpgroup and two consumer
	// warpgroups; wgmma is set too.
	ws bool
	// pingPong makes the warp-specialized kernel's consumers take turns.
	pingPong bool
	// dynamic makes the warp-specialized kernel's CTAs draw rows from a
	// ticket counter; without it they take rows gridDim.x apart, which
	// plans whose rows are all alike run 3-4% faster (the atomic's mere
	// presence costs that).
	dynamic bool
	// tmaOut makes the warp-specialized kernel stage each row's output
	// in shared memory and store it with the bulk tensor copy engine, so
	// that its consumers go on to the next row at once.
	tmaOut bool
	// gen selects the gathering kernel (attention_gen*.cu) for plans with
	// levels, token orders, a stop rule or an Init plan, when gen.on.
	gen genFlags
}

// outBytes is the size of one output element: 2 under out16, else 4.
func (v variant) outBytes() int64 {
	if v.out16 {
		return 2
	}
	return 4
}

func (v variant) threads() int {
	if v.gen.on {
		return v.gen.threads(v)
	}
	if v.ws {
		return 384 // a producer and two consumer warpgroups
	}
	return v.blockQ / (16 * v.mt) * 32
}

// sharedBytes is the dynamic shared memory: the Q tile and one K and one V
// tile, all 16-bit, then the staged KV list (MAX_LIST int32) and the λ
// gaps (one float32 per 16 query rows).
func (v variant) sharedBytes() int {
	if v.gen.on {
		return v.gen.sharedBytes(v)
	}
	if v.ws {
		// Q, stages K and V tiles each, the output's staging buffer, and
		// the 1024-byte realignment; the mbarriers are static.
		n := (v.blockQ+2*v.kt*v.stages)*v.headDim*2 + 1024
		if v.tmaOut {
			n += v.blockQ * v.headDim * int(v.outBytes())
		}
		return n
	}
	n := (v.blockQ+2*v.kt*max(v.stages, 1))*v.headDim*2 + maxList*4 + v.blockQ/16*4
	if v.wgmma {
		n += 1024 // the tiles are realigned to 1024 bytes
	}
	return n
}

// maxList is MAX_LIST in kernels/attention.cu.
const maxList = 2048

func (v variant) String() string {
	dt := "f16"
	if v.bf16 {
		dt = "bf16"
	}
	name := fmt.Sprintf("%s_d%d_q%d_k%d_m%d_s%d", dt, v.headDim, v.blockQ, v.kt, v.mt, max(v.stages, 1))
	if v.filter {
		name += "_λ"
	}
	switch {
	case v.ws && v.pingPong:
		name += "_ws_pp"
	case v.ws:
		name += "_ws"
	case v.wgmma:
		name += fmt.Sprintf("_wgmma%d", v.minBlocks)
	}
	if v.ws && v.dynamic {
		name += "_dyn"
	}
	if v.ws && v.tmaOut {
		name += "_tso"
	}
	if v.pipe {
		name += "_pipe"
	}
	if v.skipFuture {
		name += "_skipf"
	}
	if v.gen.on {
		name += v.gen.String()
	}
	if v.out16 {
		name += "_o16"
	}
	return name
}

// options are the NVRTC options for the variant on arch.
func (v variant) options(arch string) []string {
	if v.gen.on {
		return v.gen.options(v, arch)
	}
	if v.ws {
		return []string{
			"--gpu-architecture=" + arch,
			"-std=c++17",
			fmt.Sprintf("-DHEAD_DIM=%d", v.headDim),
			fmt.Sprintf("-DKT=%d", v.kt),
			fmt.Sprintf("-DIS_BF16=%d", b2i(v.bf16)),
			"-DWGMMA=1",
			fmt.Sprintf("-DSTAGES=%d", v.stages),
			fmt.Sprintf("-DOUT16=%d", b2i(v.out16)),
			fmt.Sprintf("-DPINGPONG=%d", b2i(v.pingPong)),
			fmt.Sprintf("-DDYNAMIC=%d", b2i(v.dynamic)),
			fmt.Sprintf("-DTMA_OUT=%d", b2i(v.tmaOut)),
			fmt.Sprintf("-DFILTER=%d", b2i(v.filter)),
		}
	}
	return []string{
		"--gpu-architecture=" + arch,
		"-std=c++17",
		fmt.Sprintf("-DHEAD_DIM=%d", v.headDim),
		fmt.Sprintf("-DBLOCK_Q=%d", v.blockQ),
		fmt.Sprintf("-DKT=%d", v.kt),
		fmt.Sprintf("-DMT=%d", v.mt),
		fmt.Sprintf("-DIS_BF16=%d", b2i(v.bf16)),
		fmt.Sprintf("-DFILTER=%d", b2i(v.filter)),
		fmt.Sprintf("-DWGMMA=%d", b2i(v.wgmma)),
		fmt.Sprintf("-DMINB=%d", max(v.minBlocks, 1)),
		fmt.Sprintf("-DSTAGES=%d", max(v.stages, 1)),
		fmt.Sprintf("-DPIPE=%d", b2i(v.pipe)),
		fmt.Sprintf("-DSKIP_FUTURE=%d", b2i(v.skipFuture)),
		fmt.Sprintf("-DOUT16=%d", b2i(v.out16)),
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cubinCache compiles kernels with NVRTC and keeps the cubins on disk,
// keyed by a hash of the source, the architecture, the options and the
// NVRTC version. An empty dir disables the disk cache.
type cubinCache struct {
	nvrtc *driver.NVRTC
	dir   string
}

// get returns the cubin for src under opts, from the disk cache or a fresh
// compile, and whether it came from the cache.
func (c *cubinCache) get(src, name string, opts []string) (cubin []byte, cached bool, err error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00nvrtc %d.%d", src, strings.Join(opts, "\x00"), c.nvrtc.Major, c.nvrtc.Minor)
	key := hex.EncodeToString(h.Sum(nil))[:32]
	path := ""
	if c.dir != "" {
		path = filepath.Join(c.dir, key+".cubin")
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, true, nil
		}
	}
	cubin, _, err = c.nvrtc.Compile(src, name, opts)
	if err != nil {
		return nil, false, err
	}
	if path != "" {
		// Best effort: a cache that cannot be written only costs a compile.
		if os.MkdirAll(c.dir, 0o755) == nil {
			tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
			if os.WriteFile(tmp, cubin, 0o644) == nil {
				os.Rename(tmp, path)
			}
		}
	}
	return cubin, false, nil
}

// DefaultCacheDir is where cubins are cached unless Config.CacheDir says
// otherwise: the user cache directory's sparseattn/cubin.
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "sparseattn", "cubin")
}
