package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/sparseattn/sparseattn/internal/cpuinfo"
	"github.com/sparseattn/sparseattn/internal/kernel"
)

const infoSummary = `Reports the CPU model and SIMD features, which kernel path this build uses,
a measured fused-multiply-add peak (one core and all cores), and any NVIDIA
GPUs the driver exposes.`

type infoReport struct {
	CPU        string       `json:"cpu"`
	Arch       string       `json:"arch"`
	Features   []string     `json:"features"`
	Kernels    string       `json:"kernels"`
	Goroutines int          `json:"gomaxprocs"`
	Peak       cpuinfo.Peak `json:"fma_peak_gflops"`
	GPUs       []string     `json:"gpus"`
}

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("info", infoSummary, stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	dur := fs.Duration("peak-time", 300*time.Millisecond, "how long to run each FMA peak measurement")
	if err := parse(fs, args); err != nil {
		return err
	}
	r := infoReport{
		CPU: cpuinfo.Model(), Arch: runtime.GOOS + "/" + runtime.GOARCH, Features: cpuinfo.Features(),
		Kernels: kernel.Accelerated(), Goroutines: runtime.GOMAXPROCS(0),
		Peak: cpuinfo.MeasurePeak(ctx, *dur), GPUs: []string{},
	}
	for _, g := range cpuinfo.GPUs(ctx) {
		r.GPUs = append(r.GPUs, fmt.Sprintf("%d: %s", g.Index, g.Model))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(stdout, "cpu:        %s (%s)\n", r.CPU, r.Arch)
	fmt.Fprintf(stdout, "features:   %s\n", strings.Join(r.Features, " "))
	fmt.Fprintf(stdout, "kernels:    %s\n", r.Kernels)
	fmt.Fprintf(stdout, "threads:    %d (GOMAXPROCS)\n", r.Goroutines)
	fmt.Fprintf(stdout, "fma peak:   %.1f GFLOPS per core, %.1f GFLOPS on %d threads (%s)\n", r.Peak.PerCore, r.Peak.AllCores, r.Peak.Goroutines, r.Peak.Kind)
	if len(r.GPUs) == 0 {
		fmt.Fprintln(stdout, "gpus:       none found (no NVIDIA driver); attention runs on the CPU")
	} else {
		fmt.Fprintf(stdout, "gpus:       %s\n", strings.Join(r.GPUs, "; "))
	}
	return nil
}
