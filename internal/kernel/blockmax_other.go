//go:build !amd64

package kernel

func blockMaxShift(x, l []float64, per int, mb []float64) { blockMaxShiftGeneric(x, l, per, mb) }
