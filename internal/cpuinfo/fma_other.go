//go:build !amd64

package cpuinfo

func fmaKernel() (string, float64, func(int)) { return scalarKernel() }
