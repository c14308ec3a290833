package cpuinfo

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestMeasurePeak(t *testing.T) {
	p := MeasurePeak(context.Background(), 20*time.Millisecond)
	// Any machine that runs this does more than 0.1 GFLOPS on one core and
	// on all of them. How the two compare depends on what else the machine
	// runs (CI shares its cores), so the test does not compare them.
	if !(p.PerCore > 0.1) || !(p.AllCores > 0.1) || math.IsInf(p.PerCore, 0) || math.IsInf(p.AllCores, 0) || p.Kind == "" {
		t.Fatalf("implausible peak %+v", p)
	}
	t.Logf("%+v", p)
}

func TestScalarLoopRuns(t *testing.T) {
	kind, flops, loop := scalarKernel()
	if flops != 16 || kind == "" {
		t.Fatalf("scalar kernel %q claims %v flops per iteration", kind, flops)
	}
	loop(1000)
}

func TestModelAndFeatures(t *testing.T) {
	if Model() == "" {
		t.Error("empty model")
	}
	t.Log(Model(), Features(), GPUs(context.Background()))
}
