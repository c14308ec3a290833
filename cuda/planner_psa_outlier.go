package cuda

import (
	"strconv"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/tensor"
)

// psaOutlierPath is which kernel launchPsaOutliers runs: psaOutlierAuto
// picks (psa_outliers16 where it applies, else psa_outliers with the
// block staged where it fits, else reading its input); the others force
// psa_outliers staged or not (tests compare the paths).
type psaOutlierPath int

const (
	psaOutlierAuto psaOutlierPath = iota
	psaOutlierStaged
	psaOutlierUnstaged
)

// launchPsaOutliers launches the outlier offsets of one side (0 queries,
// 1 keys) of Sampling's draws: blocks blocks of bs tokens of v at head
// dimension d, by path's kernel (old is psa_outliers, loaded from
// plan_psa.cu; psa_outliers16 is loaded here).
func (e *Engine) launchPsaOutliers(c *driver.Ctx, old driver.Function, pa *planArgs, a *psaArgs, v view, side int32, blocks, bs, d int, path psaOutlierPath) error {
	stageMax := min(psaOutlierStageMax, e.dev.MaxSharedOptin)
	grid := driver.Dim3{X: uint32(blocks), Y: 1, Z: 1}
	if smem := psaOutlier16Smem(d, bs); path == psaOutlierAuto && psaOutlier16(d, v) && smem <= stageMax {
		fn, err := e.auxFunction(c, "plan_psa_outlier.cu", "psa_outliers16", psaOutlier16Defines(d, v.dtype)...)
		if err != nil {
			return err
		}
		if err := e.raiseDynamicShared(c, fn, smem); err != nil {
			return err
		}
		return c.Launch(fn, grid, driver.Dim3{X: uint32(d / 2), Y: 1, Z: 1}, smem, driver.Arg(pa), driver.Arg(a), driver.Arg(&v), driver.Arg(&side))
	}
	staged := int32(1)
	smem := psaOutlierSmem(d, bs, v.dtype, true)
	if smem > stageMax || path == psaOutlierUnstaged {
		staged, smem = 0, psaOutlierSmem(d, bs, v.dtype, false) // 3 KiB at D 256, within the default allowance
	}
	if err := e.raiseDynamicShared(c, old, smem); err != nil {
		return err
	}
	return c.Launch(old, grid, driver.Dim3{X: psaOutlierThreads, Y: 1, Z: 1}, smem, driver.Arg(pa), driver.Arg(a), driver.Arg(&v), driver.Arg(&side), driver.Arg(&staged))
}

// psaOutlier16 reports whether psa_outliers16 (kernels/plan_psa_outlier.cu)
// takes the blocks of v at head dimension d: 16-bit elements, d a
// multiple of 64 up to 256, and every row at a 16-byte boundary (the base
// 16-byte aligned, the strides multiples of 8 elements).
func psaOutlier16(d int, v view) bool {
	half := v.dtype == dtypeCode(tensor.BFloat16) || v.dtype == dtypeCode(tensor.Float16)
	return half && d%64 == 0 && d <= 256 && v.ptr%16 == 0 && v.sb%8 == 0 && v.sh%8 == 0 && v.sn%8 == 0
}

// psaOutlier16Pitch is PSO_PW in kernels/plan_psa_outlier.cu: the 32-bit
// words of a staged row of d 16-bit elements, in an odd number of 16-byte
// pieces.
func psaOutlier16Pitch(d int) int { return (d/8 | 1) * 4 }

// psaOutlier16Smem is psa_outliers16's dynamic shared memory for blocks of
// bs tokens of d elements: the staged rows, then the float32 means,
// inverse spreads and scores.
func psaOutlier16Smem(d, bs int) int { return (bs*psaOutlier16Pitch(d) + 2*d + bs) * 4 }

// psaOutlier16Defines are psa_outliers16's compile-time head dimension and
// element type (PSA_OD, PSA_ODT); its CTA has d/2 threads.
func psaOutlier16Defines(d int, dtype int32) []string {
	return []string{"PSA_OD=" + strconv.Itoa(d), "PSA_ODT=" + strconv.Itoa(int(dtype))}
}
