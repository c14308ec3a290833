package driver

import (
	"runtime"
	"unsafe"
)

// Programmatic dependent launch (sm_90, CUDA 12): a kernel launched with
// the programmatic-stream-serialization attribute may be scheduled before
// the kernel ahead of it on the stream has finished, once every block of
// that kernel has exited (or executed griddepcontrol.launch_dependents);
// it must execute griddepcontrol.wait before it touches memory that
// kernel wrote or reads, and a kernel that does not would race with it.

// launchConfig is CUlaunchConfig (cuda.h): seven uint32, the stream at 32,
// the attribute array at 40 and its length at 48; 56 bytes.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	sharedBytes            uint32
	_                      uint32
	stream                 uintptr
	attrs                  *launchAttr
	numAttrs               uint32
	_                      uint32
}

// launchAttr is CUlaunchAttribute: a uint32 id padded to 8 bytes, then the
// 64-byte CUlaunchAttributeValue union; 72 bytes.
type launchAttr struct {
	id    uint32
	_     uint32
	value [64]byte
}

// attrProgrammaticStreamSerialization is
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; its value is the
// int programmaticStreamSerializationAllowed.
const attrProgrammaticStreamSerialization = 6

// DependentLaunch reports whether LaunchDependent overlaps a launch with
// its predecessor: the driver has cuLaunchKernelEx (CUDA 12+), the device
// is sm_90 or newer, and no such launch has failed.
func (d *Device) DependentLaunch() bool {
	return d.api.cuLaunchKernelEx != nil && d.Major >= 9 && !d.noPDL.Load()
}

// LaunchDependent is Launch for a kernel that executes griddepcontrol.wait
// before its first access to memory: where DependentLaunch holds, it
// launches f as a programmatic dependent of the kernel ahead of it on c's
// stream, so that f's blocks may be scheduled while that kernel drains;
// elsewhere, or if the driver refuses such a launch (then it stops trying
// on this device), it is Launch.
func (c *Ctx) LaunchDependent(f Function, grid, block Dim3, sharedBytes int, args ...unsafe.Pointer) error {
	if !c.d.DependentLaunch() {
		return c.Launch(f, grid, block, sharedBytes, args...)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	params := pinParams(&pin, args)
	attr := &launchAttr{id: attrProgrammaticStreamSerialization}
	*(*int32)(unsafe.Pointer(&attr.value[0])) = 1
	cfg := &launchConfig{gridX: grid.X, gridY: grid.Y, gridZ: grid.Z, blockX: block.X, blockY: block.Y, blockZ: block.Z,
		sharedBytes: uint32(sharedBytes), stream: uintptr(c.stream), attrs: attr, numAttrs: 1}
	pin.Pin(attr)
	pin.Pin(cfg)
	if res := c.d.api.cuLaunchKernelEx(unsafe.Pointer(cfg), uintptr(f), unsafe.Pointer(&params[0]), nil); res != cudaSuccess {
		// A launch the driver rejects did not start: fall back for good.
		c.d.noPDL.Store(true)
		return c.Launch(f, grid, block, sharedBytes, args...)
	}
	if c.after != nil {
		return c.after(&Ctx{d: c.d, stream: c.stream}, f)
	}
	return nil
}
