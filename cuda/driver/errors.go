package driver

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error of this package wraps one of them, so that
// callers can tell a machine without a GPU from a failing GPU.
var (
	// ErrUnavailable: no usable CUDA driver or NVRTC library, or no device.
	ErrUnavailable = errors.New("cuda: no usable GPU")
	// ErrUnsupportedDevice: a device older than compute capability 8.0.
	ErrUnsupportedDevice = errors.New("cuda: unsupported GPU")
	// ErrOutOfMemory: the device could not satisfy an allocation.
	ErrOutOfMemory = errors.New("cuda: out of device memory")
	// ErrCompile: NVRTC rejected a kernel; the CompileError carries its log.
	ErrCompile = errors.New("cuda: kernel compilation failed")
	// ErrDriver: any other failing driver call.
	ErrDriver = errors.New("cuda: driver call failed")
	// ErrClosed: the device was closed.
	ErrClosed = errors.New("cuda: device closed")
)

// CUresult codes this package tells apart.
const (
	cudaSuccess          = 0
	cudaErrorOutOfMemory = 2
	cudaErrorNoDevice    = 100
	cudaErrorNoBinary    = 209 // CUDA_ERROR_NO_BINARY_FOR_GPU
	cudaErrorInsufficent = 35  // CUDA_ERROR_INSUFFICIENT_DRIVER
)

// Error is a failed CUDA driver call with the driver's own name and
// message for its CUresult.
type Error struct {
	Func    string // the driver entry point, e.g. "cuMemAlloc_v2"
	Code    int    // the CUresult
	Name    string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Message string // e.g. "out of memory"
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.Func, e.Name, e.Code, e.Message)
}

// Unwrap maps the CUresult onto this package's sentinels.
func (e *Error) Unwrap() error {
	switch e.Code {
	case cudaErrorOutOfMemory:
		return ErrOutOfMemory
	case cudaErrorNoDevice, cudaErrorInsufficent:
		return ErrUnavailable
	case cudaErrorNoBinary:
		return ErrUnsupportedDevice
	}
	return ErrDriver
}

// CompileError is an NVRTC failure with the compiler's log.
type CompileError struct {
	Program string // the program's name, e.g. "attention.cu"
	Code    int    // the nvrtcResult
	Message string // NVRTC's message for the result
	Log     string // the compiler's log
}

func (e *CompileError) Error() string {
	msg := fmt.Sprintf("nvrtc: compiling %s: %s (%d)", e.Program, e.Message, e.Code)
	if e.Log != "" {
		msg += ":\n" + e.Log
	}
	return msg
}

// Unwrap returns ErrCompile.
func (e *CompileError) Unwrap() error { return ErrCompile }
