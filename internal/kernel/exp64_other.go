//go:build !amd64

package kernel

func exp64s(dst, src []float64) { exp64sGeneric(dst, src) }
