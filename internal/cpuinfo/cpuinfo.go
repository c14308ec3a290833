// Package cpuinfo describes the machine: CPU model and SIMD features, a
// measured fused-multiply-add peak, and any NVIDIA GPUs the driver exposes.
package cpuinfo

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/cpu"
)

// Model returns the CPU model name, or GOARCH when it cannot be read.
func Model() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// Features lists the SIMD features that matter to the kernels.
func Features() []string {
	var out []string
	add := func(ok bool, name string) {
		if ok {
			out = append(out, name)
		}
	}
	switch runtime.GOARCH {
	case "amd64":
		add(cpu.X86.HasSSE41, "sse4.1")
		add(cpu.X86.HasAVX, "avx")
		add(cpu.X86.HasAVX2, "avx2")
		add(cpu.X86.HasFMA, "fma")
		add(cpu.X86.HasAVX512F, "avx512f")
		add(cpu.X86.HasAVX512BF16, "avx512bf16")
	case "arm64":
		add(cpu.ARM64.HasASIMD, "asimd")
		add(cpu.ARM64.HasFPHP, "fp16")
		add(cpu.ARM64.HasSVE, "sve")
	}
	return out
}

// Peak is a measured floating-point throughput.
type Peak struct {
	Kind       string  `json:"kind"`      // the instruction measured, e.g. "avx2 fma (8×fp32)"
	PerCore    float64 `json:"per_core"`  // GFLOPS on one goroutine
	AllCores   float64 `json:"all_cores"` // GFLOPS on GOMAXPROCS goroutines
	Goroutines int     `json:"goroutines"`
}

// MeasurePeak times a loop of independent fused multiply-adds on one
// goroutine and then on all of them, for about d each. The figure is what
// a perfect kernel could reach; "% of peak" in benchmarks divides by it.
func MeasurePeak(ctx context.Context, d time.Duration) Peak {
	kind, flopsPerIter, loop := fmaKernel()
	n := runtime.GOMAXPROCS(0)
	p := Peak{Kind: kind, Goroutines: n}
	p.PerCore = measure(ctx, 1, d, flopsPerIter, loop)
	p.AllCores = measure(ctx, n, d, flopsPerIter, loop)
	return p
}

func measure(ctx context.Context, workers int, d time.Duration, flopsPerIter float64, loop func(int)) float64 {
	const chunk = 1 << 16
	loop(chunk) // warm up the vector units
	var mu sync.Mutex
	var total float64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			iters := 0
			for time.Since(start) < d && ctx.Err() == nil {
				loop(chunk)
				iters += chunk
			}
			mu.Lock()
			total += float64(iters) * flopsPerIter
			mu.Unlock()
		}()
	}
	wg.Wait()
	return total / time.Since(start).Seconds() / 1e9
}

// GPU is one NVIDIA GPU the driver reports.
type GPU struct {
	Index int
	Model string
}

// GPUs lists NVIDIA GPUs from /proc/driver/nvidia, falling back to
// nvidia-smi; it returns nil when neither finds any.
func GPUs(ctx context.Context) []GPU {
	var out []GPU
	dirs, _ := filepath.Glob("/proc/driver/nvidia/gpus/*/information")
	for i, path := range dirs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Model" {
				out = append(out, GPU{Index: i, Model: strings.TrimSpace(v)})
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, "nvidia-smi", "-L").Output()
	if err != nil {
		return nil
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line != "" {
			out = append(out, GPU{Index: i, Model: line})
		}
	}
	return out
}
