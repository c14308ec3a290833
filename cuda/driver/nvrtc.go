package driver

import (
	"fmt"
	"runtime"
	"unsafe"
)

// NVRTC compiles CUDA C++ to cubins at run time. It is safe for concurrent
// use (NVRTC programs are independent).
type NVRTC struct {
	Library      string
	Major, Minor int // NVRTC version

	create     func(prog *uintptr, src, name string, nHeaders int32, headers, includeNames unsafe.Pointer) int32
	compile    func(prog uintptr, nOpts int32, opts unsafe.Pointer) int32
	logSize    func(prog uintptr, n *uint64) int32
	getLog     func(prog uintptr, log *byte) int32
	cubinSize  func(prog uintptr, n *uint64) int32
	getCubin   func(prog uintptr, cubin *byte) int32
	destroy    func(prog *uintptr) int32
	errString  func(res int32) string
	getVersion func(major, minor *int32) int32
}

// LoadNVRTC loads the NVRTC library (see EnvLibNVRTC). The error wraps
// ErrUnavailable when none is found.
func LoadNVRTC() (*NVRTC, error) {
	h, path, err := openLib(EnvLibNVRTC, nvrtcNames)
	if err != nil {
		return nil, err
	}
	n := &NVRTC{Library: path}
	if err := bind(h, path, map[string]any{
		"nvrtcCreateProgram":     &n.create,
		"nvrtcCompileProgram":    &n.compile,
		"nvrtcGetProgramLogSize": &n.logSize,
		"nvrtcGetProgramLog":     &n.getLog,
		"nvrtcGetCUBINSize":      &n.cubinSize,
		"nvrtcGetCUBIN":          &n.getCubin,
		"nvrtcDestroyProgram":    &n.destroy,
		"nvrtcGetErrorString":    &n.errString,
		"nvrtcVersion":           &n.getVersion,
	}); err != nil {
		return nil, err
	}
	var major, minor int32
	if res := n.getVersion(&major, &minor); res != 0 {
		return nil, fmt.Errorf("%w: nvrtcVersion: %s (%d)", ErrUnavailable, n.errString(res), res)
	}
	n.Major, n.Minor = int(major), int(minor)
	return n, nil
}

// Compile compiles src (named name in messages) with the given options,
// which must name a real architecture (e.g. --gpu-architecture=sm_90a), and
// returns the cubin and the compiler's log. A failure is a *CompileError
// carrying the log.
func (n *NVRTC) Compile(src, name string, opts []string) (cubin []byte, log string, err error) {
	var prog uintptr
	if res := n.create(&prog, src, name, 0, nil, nil); res != 0 {
		return nil, "", &CompileError{Program: name, Code: int(res), Message: n.errString(res)}
	}
	defer n.destroy(&prog)

	var pin runtime.Pinner
	defer pin.Unpin()
	cstrs := make([]*byte, max(len(opts), 1))
	for i, o := range opts {
		b := append([]byte(o), 0)
		pin.Pin(&b[0])
		cstrs[i] = &b[0]
	}
	pin.Pin(&cstrs[0])
	res := n.compile(prog, int32(len(opts)), unsafe.Pointer(&cstrs[0]))
	log = n.programLog(prog)
	if res != 0 {
		return nil, log, &CompileError{Program: name, Code: int(res), Message: n.errString(res), Log: log}
	}
	var size uint64
	if res := n.cubinSize(prog, &size); res != 0 || size == 0 {
		return nil, log, &CompileError{Program: name, Code: int(res), Message: "no cubin (options must name a real sm_ architecture): " + n.errString(res), Log: log}
	}
	cubin = make([]byte, size)
	if res := n.getCubin(prog, &cubin[0]); res != 0 {
		return nil, log, &CompileError{Program: name, Code: int(res), Message: n.errString(res), Log: log}
	}
	return cubin, log, nil
}

func (n *NVRTC) programLog(prog uintptr) string {
	var size uint64
	if n.logSize(prog, &size) != 0 || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if n.getLog(prog, &buf[0]) != 0 {
		return ""
	}
	return string(buf[:size-1])
}
