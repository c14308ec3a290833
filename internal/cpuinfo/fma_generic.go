package cpuinfo

// scalarKernel measures plain Go float32 multiply-adds, with 8 independent
// chains so the compiler's output is throughput-bound. It is the peak on
// machines without the assembly loops.
func scalarKernel() (string, float64, func(int)) {
	return "scalar fp32 multiply-add (Go)", 8 * 2, scalarLoop
}

func scalarLoop(n int) {
	a, b := float32(0.99999988), float32(0.01)
	var x0, x1, x2, x3, x4, x5, x6, x7 float32
	for range n {
		x0 = x0*a + b
		x1 = x1*a + b
		x2 = x2*a + b
		x3 = x3*a + b
		x4 = x4*a + b
		x5 = x5*a + b
		x6 = x6*a + b
		x7 = x7*a + b
	}
	sink(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7)
}

//go:noinline
func sink(float32) {}
