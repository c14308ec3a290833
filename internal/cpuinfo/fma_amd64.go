package cpuinfo

import "golang.org/x/sys/cpu"

// fmaLoopAVX2 runs n iterations of 12 independent 8-wide fp32 FMA chains.
//
//go:noescape
func fmaLoopAVX2(n int)

// fmaLoopAVX512 runs n iterations of 12 independent 16-wide fp32 FMA chains.
//
//go:noescape
func fmaLoopAVX512(n int)

func fmaKernel() (string, float64, func(int)) {
	switch {
	case cpu.X86.HasAVX512F:
		return "avx512 fma (16×fp32)", 12 * 16 * 2, fmaLoopAVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return "avx2 fma (8×fp32)", 12 * 8 * 2, fmaLoopAVX2
	}
	return scalarKernel()
}
