package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

// Environment variables that override where the libraries are looked for:
// each names a file path.
const (
	EnvLibCUDA  = "SPARSEATTN_LIBCUDA"  // e.g. /usr/local/nvidia/lib64/libcuda.so.1
	EnvLibNVRTC = "SPARSEATTN_LIBNVRTC" // e.g. /usr/local/cuda/lib64/libnvrtc.so.13
)

// libDirs are the usual places of the driver and toolkit libraries, tried
// after the dynamic loader's own search path.
func libDirs() []string {
	var dirs []string
	for _, env := range []string{"CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"} {
		if d := os.Getenv(env); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"), filepath.Join(d, "lib"))
		}
	}
	return append(dirs,
		"/usr/local/nvidia/lib64",
		"/usr/local/cuda/lib64",
		"/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/local/cuda/targets/sbsa-linux/lib",
		"/usr/lib/x86_64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu",
		"/usr/lib64",
		"/usr/lib/wsl/lib",
	)
}

// cudaNames and nvrtcNames are the library file names, newest first.
var (
	cudaNames  = []string{"libcuda.so.1", "libcuda.so"}
	nvrtcNames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}
)

// openLib opens the first library found: the path in env if set (and only
// that), else each name through the loader's search path, then in each of
// the usual directories. The error lists every place tried.
func openLib(env string, names []string) (handle uintptr, path string, err error) {
	if runtime.GOOS != "linux" {
		return 0, "", fmt.Errorf("%w: CUDA is supported on Linux only, not %s", ErrUnavailable, runtime.GOOS)
	}
	var tried []string
	try := func(p string) bool {
		h, e := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if e != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", p, e))
			return false
		}
		handle, path = h, p
		return true
	}
	if p := os.Getenv(env); p != "" {
		if try(p) {
			return handle, path, nil
		}
		return 0, "", fmt.Errorf("%w: %s=%s cannot be loaded: %s", ErrUnavailable, env, p, tried[0])
	}
	for _, n := range names {
		if try(n) {
			return handle, path, nil
		}
	}
	for _, d := range libDirs() {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, e := os.Stat(p); e != nil {
				continue
			}
			if try(p) {
				return handle, path, nil
			}
		}
	}
	return 0, "", fmt.Errorf("%w: none of %s found (set %s to its path); tried: %s",
		ErrUnavailable, strings.Join(names, ", "), env, strings.Join(tried, "; "))
}

// bind sets each function pointer in fns to the library symbol of the
// same key, returning an error naming the first missing symbol.
func bind(handle uintptr, lib string, fns map[string]any) error {
	for name, fptr := range fns {
		sym, err := purego.Dlsym(handle, name)
		if err != nil {
			return fmt.Errorf("%w: %s has no symbol %s (library too old?): %v", ErrUnavailable, lib, name, err)
		}
		purego.RegisterFunc(fptr, sym)
	}
	return nil
}
