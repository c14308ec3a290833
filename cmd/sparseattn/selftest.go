package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/cuda/selftest"
)

const selftestSummary = `Checks the GPU engine against the CPU executor on fresh random inputs:
dense and block-sparse plans, causal and not, GQA, ragged and tiny N,
Nq != Nk, padded head dims, bf16/fp16/f32 inputs, both layouts and the
SpargeAttn λ filter; PSA's pooled levels and S2O's token orders, two
passes and early stop on the gathering kernel (also through a Runner);
and every device planner against its CPU planner. Fails (exit 1) if any
output or counter disagrees.`

func runSelftest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("selftest", selftestSummary, stderr)
	device := fs.String("device", "cuda", "device to check: cuda (the CPU is the reference)")
	seed := fs.Uint64("seed", 0, "random seed (0 = a fresh one, printed)")
	engine := addEngineFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *device != "cuda" {
		return fmt.Errorf("%w: --device %q: selftest checks the GPU; use cuda", errUsage, *device)
	}
	if *seed == 0 {
		*seed = rand.Uint64()
	}
	cfg, err := engine.config()
	if err != nil {
		return err
	}
	e, err := cuda.Open(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	maj, min := e.NVRTCVersion()
	fmt.Fprintf(stdout, "device: %v\nnvrtc:  %d.%d, target %s\nseed:   %d (rerun with --seed %d)\n", e.Info(), maj, min, e.Info().Arch(), *seed, *seed)
	names, took, err := e.Precompile(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kernels: %d variants compiled or loaded from cache in %v\n", len(names), took.Round(time.Millisecond))
	// Compile-only check for GPUs this machine cannot run.
	start := time.Now()
	nport, err := e.CompileFor(ctx, cuda.PortableArchs...)
	if err != nil {
		return fmt.Errorf("compiling for %v: %w", cuda.PortableArchs, err)
	}
	fmt.Fprintf(stdout, "compile-only: %d mma.sync variants each for %s compiled or loaded from cache in %v\n\n", nport, strings.Join(cuda.PortableArchs, ", "), time.Since(start).Round(time.Millisecond))

	r := rand.New(rand.NewPCG(*seed, 0x5e1f))
	cases := cuda.Cases()
	err = selftestSection(stdout, "cases", "case\tkernel\tdtype\trel L1\ttol\tQK gpu/cpu\tPV gpu/cpu", len(cases),
		func(report func(selftest.Check)) (int, error) { return selftest.Run(ctx, e, r, cases, report) },
		func(c selftest.Check) (string, error) {
			return fmt.Sprintf("%s\t%s\t%s\t%.2e\t%.0e\t%.0f/%.0f\t%.1f/%.1f", c.Name, c.Kernel, c.DType,
				c.Errors.RelL1, c.Tol, c.GPU.QKBlocks, c.CPU.QKBlocks, c.GPU.PVBlocks, c.CPU.PVBlocks), c.Err
		})
	if err != nil {
		return err
	}

	// The quantized kernels (INT8 Q·K, Hopper) against the CPU emulation.
	if qcs := selftest.QuantCases(); len(qcs) > 0 {
		if p, err := qcs[0].Plan(r); err == nil && e.SupportsQuantized(p) != nil {
			fmt.Fprintf(stdout, "quantized kernels: skipped (%v)\n\n", e.SupportsQuantized(p))
		} else if err := selftestSection(stdout, "quantized cases", "case\trel L1 vs CPU emulation\ttol\tQK gpu/cpu\tPV gpu/cpu", len(qcs),
			func(report func(selftest.Check)) (int, error) { return selftest.RunQuantized(ctx, e, r, qcs, report) },
			func(c selftest.Check) (string, error) {
				return fmt.Sprintf("%s\t%.2e\t%.0e\t%.0f/%.0f\t%.1f/%.1f", c.Name, c.Errors.RelL1, c.Tol,
					c.GPU.QKBlocks, c.CPU.QKBlocks, c.GPU.PVBlocks, c.CPU.PVBlocks), c.Err
			}); err != nil {
			return err
		}
	}

	// The gathering kernel: PSA's pooled levels, S2O's orders, stops and
	// two passes, each also through a Runner with the plan uploaded.
	gcs := selftest.GenCases()
	err = selftestSection(stdout, "gathering cases", "case\tkernel\tdtype\trel L1\trunner\ttol\tQK gpu/cpu\tstopped gpu/cpu", len(gcs),
		func(report func(selftest.Check)) (int, error) { return selftest.RunGen(ctx, e, r, gcs, report) },
		func(c selftest.Check) (string, error) {
			return fmt.Sprintf("%s\t%s\t%s\t%.2e\t%.2e\t%.0e\t%.3f/%.3f\t%d/%d", c.Name, c.Kernel, c.DType,
				c.Errors.RelL1, c.Runner, c.Tol, c.GPU.QKBlocks, c.CPU.QKBlocks, c.GPU.Stopped, c.CPU.Stopped), c.Err
		})
	if err != nil {
		return err
	}

	// Every device planner against its CPU planner.
	pcs := selftest.PlannerCases()
	return selftestSection(stdout, "planner cases", "planner/case\trows differ\ttie-break\torders differ\tQK gpu/cpu\tPV gpu/cpu\trel L1\tplan ms", len(pcs),
		func(report func(selftest.PlannerCheck)) (int, error) {
			return selftest.RunPlanners(ctx, e, r, pcs, report)
		},
		func(c selftest.PlannerCheck) (string, error) {
			return fmt.Sprintf("%s\t%d/%d\t%d\t%d\t%.0f/%.0f\t%.1f/%.1f\t%.2e\t%.3f", c.Name, c.RowsDiffer, c.Rows, c.RowsTied, c.OrdersDiffer,
				c.GPU.QKBlocks, c.CPU.QKBlocks, c.GPU.PVBlocks, c.CPU.PVBlocks, c.Errors.RelL1, c.PlanMS), c.Err
		})
}

// selftestSection runs one group of n self-test cases through run, which
// reports each case's check; it prints a table (header, then row's fields
// and the case's result per check) and a PASS line, or returns an error
// naming how many of the group's cases failed.
func selftestSection[C any](w io.Writer, what, header string, n int, run func(report func(C)) (int, error), row func(C) (string, error)) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header+"\tresult")
	failed, err := run(func(c C) {
		fields, cerr := row(c)
		res := "ok"
		if cerr != nil {
			res = "FAIL: " + cerr.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\n", fields, res)
	})
	tw.Flush()
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d %s failed", failed, n, what)
	}
	fmt.Fprintf(w, "\nPASS: %d %s\n\n", n, what)
	return nil
}
