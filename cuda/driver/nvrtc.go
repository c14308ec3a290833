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

// minNVRTC is the oldest NVRTC release that compiles for an architecture
// the engine targets, where that is newer than 11.0: Hopper's
// architecture-specific sm_90a (wgmma, TMA) arrived in CUDA 12.0, sm_89 and
// sm_90 in 11.8.
var minNVRTC = map[string][2]int{"sm_90a": {12, 0}, "sm_90": {11, 8}, "sm_89": {11, 8}}

// CanTarget returns nil when this NVRTC compiles for arch (as Info.Arch
// names it), and otherwise an error wrapping ErrUnavailable that names the
// release arch needs: an older NVRTC fails every compile for it with an
// option error.
func (n *NVRTC) CanTarget(arch string) error {
	need, ok := minNVRTC[arch]
	if !ok || n.Major > need[0] || n.Major == need[0] && n.Minor >= need[1] {
		return nil
	}
	return fmt.Errorf("%w: NVRTC %d.%d (%s) cannot compile for %s, which needs NVRTC %d.%d or newer; point %s at a newer libnvrtc",
		ErrUnavailable, n.Major, n.Minor, n.Library, arch, need[0], need[1], EnvLibNVRTC)
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
