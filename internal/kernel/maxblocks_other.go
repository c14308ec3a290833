//go:build !amd64

package kernel

func maxBlocks32(dst, x []float32, per int) { maxBlocks32Generic(dst, x, per) }
