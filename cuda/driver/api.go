package driver

import (
	"unsafe"
)

// cudaAPI holds the CUDA driver entry points. Each returns a CUresult.
type cudaAPI struct {
	path string

	cuInit                    func(flags uint32) int32
	cuDriverGetVersion        func(v *int32) int32
	cuDeviceGetCount          func(n *int32) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDeviceGetName           func(name *byte, n int32, dev int32) int32
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) int32
	cuDeviceTotalMem          func(bytes *uint64, dev int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32
	cuMemAlloc                func(p *uint64, n uint64) int32
	cuMemFree                 func(p uint64) int32
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uint64) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) int32
	cuMemsetD8                func(dst uint64, b uint8, n uint64) int32
	cuMemGetInfo              func(free, total *uint64) int32
	cuModuleLoadData          func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleUnload            func(mod uintptr) int32
	cuModuleGetFunction       func(f *uintptr, mod uintptr, name string) int32
	cuFuncSetAttribute        func(f uintptr, attr int32, v int32) int32
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, smem uint32, stream uintptr, params, extra unsafe.Pointer) int32
	cuMemsetD8Async           func(dst uint64, b uint8, n uint64, stream uintptr) int32
	cuMemcpyDtoDAsync         func(dst, src uint64, n uint64, stream uintptr) int32
	cuStreamSynchronize       func(stream uintptr) int32
	cuEventCreate             func(e *uintptr, flags uint32) int32
	cuEventDestroy            func(e uintptr) int32
	cuEventRecord             func(e uintptr, stream uintptr) int32
	cuEventSynchronize        func(e uintptr) int32
	cuEventElapsedTime        func(ms *float32, start, end uintptr) int32
	cuGetErrorName            func(code int32, s **byte) int32
	cuGetErrorString          func(code int32, s **byte) int32
	// cuLaunchKernelEx (CUDA 12+; launch_ex.go) is nil on older drivers.
	cuLaunchKernelEx func(cfg unsafe.Pointer, f uintptr, params, extra unsafe.Pointer) int32
	// cuTensorMapEncodeTiled (CUDA 12+) is nil on older drivers.
	cuTensorMapEncodeTiled func(tmap *TensorMap, dtype int32, rank uint32, addr uint64, dims *uint64, strides *uint64, box *uint32, elemStrides *uint32, interleave, swizzle, l2Promotion, oobFill int32) int32
}

// Device attributes and function attributes used here (cuda.h enums).
const (
	attrMultiprocessorCount = 16
	attrComputeMajor        = 75
	attrComputeMinor        = 76
	attrMaxSharedOptin      = 97
	funcAttrMaxDynamicShmem = 8
)

func loadCUDA() (*cudaAPI, error) {
	h, path, err := openLib(EnvLibCUDA, cudaNames)
	if err != nil {
		return nil, err
	}
	a := &cudaAPI{path: path}
	err = bind(h, path, map[string]any{
		"cuInit":                       &a.cuInit,
		"cuDriverGetVersion":           &a.cuDriverGetVersion,
		"cuDeviceGetCount":             &a.cuDeviceGetCount,
		"cuDeviceGet":                  &a.cuDeviceGet,
		"cuDeviceGetName":              &a.cuDeviceGetName,
		"cuDeviceGetAttribute":         &a.cuDeviceGetAttribute,
		"cuDeviceTotalMem_v2":          &a.cuDeviceTotalMem,
		"cuDevicePrimaryCtxRetain":     &a.cuDevicePrimaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2": &a.cuDevicePrimaryCtxRelease,
		"cuCtxSetCurrent":              &a.cuCtxSetCurrent,
		"cuCtxSynchronize":             &a.cuCtxSynchronize,
		"cuMemAlloc_v2":                &a.cuMemAlloc,
		"cuMemFree_v2":                 &a.cuMemFree,
		"cuMemcpyHtoD_v2":              &a.cuMemcpyHtoD,
		"cuMemcpyDtoH_v2":              &a.cuMemcpyDtoH,
		"cuMemsetD8_v2":                &a.cuMemsetD8,
		"cuMemGetInfo_v2":              &a.cuMemGetInfo,
		"cuModuleLoadData":             &a.cuModuleLoadData,
		"cuModuleUnload":               &a.cuModuleUnload,
		"cuModuleGetFunction":          &a.cuModuleGetFunction,
		"cuFuncSetAttribute":           &a.cuFuncSetAttribute,
		"cuLaunchKernel":               &a.cuLaunchKernel,
		"cuMemsetD8Async":              &a.cuMemsetD8Async,
		"cuMemcpyDtoDAsync_v2":         &a.cuMemcpyDtoDAsync,
		"cuStreamSynchronize":          &a.cuStreamSynchronize,
		"cuEventCreate":                &a.cuEventCreate,
		"cuEventDestroy_v2":            &a.cuEventDestroy,
		"cuEventRecord":                &a.cuEventRecord,
		"cuEventSynchronize":           &a.cuEventSynchronize,
		"cuGetErrorName":               &a.cuGetErrorName,
		"cuGetErrorString":             &a.cuGetErrorString,
	})
	if err != nil {
		return nil, err
	}
	// CUDA 13 names the event timer cuEventElapsedTime_v2; older drivers
	// have only the first version.
	if bind(h, path, map[string]any{"cuEventElapsedTime_v2": &a.cuEventElapsedTime}) != nil {
		if err := bind(h, path, map[string]any{"cuEventElapsedTime": &a.cuEventElapsedTime}); err != nil {
			return nil, err
		}
	}
	// Tensor maps (for the Hopper bulk tensor copy engine) came with CUDA
	// 12; without them the kernels that need one are not offered.
	_ = bind(h, path, map[string]any{"cuTensorMapEncodeTiled": &a.cuTensorMapEncodeTiled})
	// Launch attributes, programmatic dependent launch among them, came
	// with CUDA 12 too; without it LaunchDependent is Launch.
	_ = bind(h, path, map[string]any{"cuLaunchKernelEx": &a.cuLaunchKernelEx})
	return a, nil
}

// check turns a CUresult into nil or an *Error carrying the driver's name
// and message for it.
func (a *cudaAPI) check(fn string, res int32) error {
	if res == cudaSuccess {
		return nil
	}
	e := &Error{Func: fn, Code: int(res), Name: "CUDA_ERROR_UNKNOWN", Message: "unknown error"}
	var s *byte
	if a.cuGetErrorName(res, &s) == cudaSuccess && s != nil {
		e.Name = goString(s)
	}
	s = nil
	if a.cuGetErrorString(res, &s) == cudaSuccess && s != nil {
		e.Message = goString(s)
	}
	return e
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var n int
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
