package cuda

import (
	"embed"
	"fmt"
	"strings"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/tensor"
)

// auxSources are the planner and runtime kernels and PSA's pyramid;
// device.cuh goes in front of each, and a line `#include "name.cuh"` takes
// in kernels/name.cuh.
//
//go:embed kernels/device.cuh kernels/block_mass.cuh kernels/block_select.cuh kernels/probe.cuh kernels/select64.cuh kernels/mma16.cuh kernels/sparge_search.cuh kernels/sparge_pool.cuh kernels/psa.cuh kernels/psa_tile.cuh kernels/psa_outlier.cuh kernels/uni_outlier.cuh kernels/psa_sort.cuh kernels/s2o_sort.cuh kernels/wgmma.cuh kernels/runtime.cu kernels/plan_*.cu kernels/pyramid.cu kernels/quant.cu
var auxSources embed.FS

// auxKey names one compiled auxiliary kernel: a file, its compile-time
// defines and the kernel's name.
type auxKey struct {
	file, defines, fn string
}

// auxFunction returns kernel fn of kernels/file compiled with defines
// (each "NAME=VALUE"), compiling and loading it on first use. It runs on
// the executor goroutine.
func (e *Engine) auxFunction(c *driver.Ctx, file, fn string, defines ...string) (driver.Function, error) {
	key := auxKey{file, strings.Join(defines, " "), fn}
	e.mu.Lock()
	defer e.mu.Unlock()
	if k, ok := e.aux[key]; ok {
		return k.fn, k.ready
	}
	k := &kernel{}
	k.fn, k.ready = e.loadAux(c, key, defines)
	e.aux[key] = k
	return k.fn, k.ready
}

func (e *Engine) loadAux(c *driver.Ctx, key auxKey, defines []string) (driver.Function, error) {
	head, err := auxSources.ReadFile("kernels/device.cuh")
	if err != nil {
		return 0, err
	}
	body, err := auxSources.ReadFile("kernels/" + key.file)
	if err != nil {
		return 0, fmt.Errorf("%w: no kernel file %s", ErrUnsupported, key.file)
	}
	src, err := expandIncludes(string(head) + "#line 1 \"" + key.file + "\"\n" + string(body))
	if err != nil {
		return 0, err
	}
	opts := []string{"--gpu-architecture=" + e.dev.Arch(), "-std=c++17"}
	for _, d := range defines {
		opts = append(opts, "-D"+d)
	}
	cubin, _, err := e.cache.get(src, key.file, opts)
	if err != nil {
		return 0, fmt.Errorf("kernel %s for %s: %w", key.file, e.dev.Arch(), err)
	}
	m, err := c.LoadModule(cubin)
	if err != nil {
		return 0, fmt.Errorf("loading kernel %s: %w", key.file, err)
	}
	return c.Function(m, key.fn)
}

// expandIncludes replaces each line `#include "name"` of src with
// kernels/name from auxSources, between #line markers, so that NVRTC needs
// no include path and compile errors name the right file. Included files
// are expanded in turn; a header already included is skipped, as an
// include guard would.
func expandIncludes(src string) (string, error) {
	var b strings.Builder
	if err := expandInto(&b, src, map[string]bool{}); err != nil {
		return "", err
	}
	return b.String(), nil
}

// expandInto writes src to b with its includes expanded; seen holds the
// headers already written.
func expandInto(b *strings.Builder, src string, seen map[string]bool) error {
	file, line := "", 0 // the current #line position, for the marker after an include
	for _, l := range strings.Split(src, "\n") {
		line++
		if rest, ok := strings.CutPrefix(l, "#line 1 \""); ok {
			file, line = strings.TrimSuffix(rest, "\""), 0
		}
		name, ok := strings.CutPrefix(strings.TrimSpace(l), "#include \"")
		if !ok {
			b.WriteString(l)
			b.WriteByte('\n')
			continue
		}
		name = strings.TrimSuffix(name, "\"")
		if seen[name] {
			b.WriteString("\n") // keeps the line count
			continue
		}
		seen[name] = true
		inc, err := auxSources.ReadFile("kernels/" + name)
		if err != nil {
			return fmt.Errorf("%w: kernel header %s", ErrUnsupported, name)
		}
		if err := expandInto(b, "#line 1 \""+name+"\"\n"+string(inc), seen); err != nil {
			return err
		}
		fmt.Fprintf(b, "#line %d \"%s\"\n", line+1, file)
	}
	return nil
}

// mustExpand is expandIncludes for the embedded sources, whose headers
// are all embedded: an error there is a build defect.
func mustExpand(src string) string {
	s, err := expandIncludes(src)
	if err != nil {
		panic(err)
	}
	return s
}

// view mirrors struct View in kernels/device.cuh: a device tensor as the
// planner and runtime kernels read it.
type view struct {
	ptr        uint64
	sb, sh, sn int64
	dtype      int32
	b, h, n, d int32
}

// viewOf describes t for the kernels.
func viewOf(t *Tensor) view {
	s := t.shape
	return view{ptr: uint64(t.ptr), sb: t.stride.B, sh: t.stride.H, sn: t.stride.N, dtype: int32(t.dtype),
		b: int32(s.B), h: int32(s.H), n: int32(s.N), d: int32(s.D)}
}

// dtypeCode is the kernels' code for dt (DT_* in kernels/device.cuh).
func dtypeCode(dt tensor.DType) int32 { return int32(dt) }
