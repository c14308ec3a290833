package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sparseattn/sparseattn/cuda/driver"
)

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
