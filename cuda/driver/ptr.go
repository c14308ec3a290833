package driver

import "unsafe"

// Arg returns a pointer to a kernel parameter's value, for Ctx.Launch.
func Arg[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }
