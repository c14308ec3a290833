package cpuinfo

import (
	"context"
	"testing"
	"time"
)

func TestMeasurePeak(t *testing.T) {
	p := MeasurePeak(context.Background(), 20*time.Millisecond)
	// Any machine that runs this does more than 0.1 GFLOPS per core and no
	// more per core than all cores together (within timing noise).
	if p.PerCore < 0.1 || p.AllCores < 0.5*p.PerCore || p.Kind == "" {
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
