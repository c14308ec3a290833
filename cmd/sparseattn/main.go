// Command sparseattn evaluates and benchmarks training-free sparse
// attention on generated workloads or on Q/K/V dumped from a model.
//
// Usage:
//
//	sparseattn eval    [flags]   compare methods against dense attention
//	sparseattn compare [flags]   sweep each method's knob: error against sparsity
//	sparseattn viz     [flags]   PNG heatmaps: true block mass beside each method's plan
//	sparseattn tune    [flags]   tune SpargeAttn per head for a layer, write a profile
//	sparseattn bench   [flags]   sweep sequence length, report GFLOPS
//	sparseattn tune    [flags]   tune SpargeAttn per head for a layer, write a profile
//	sparseattn info              CPU features, measured FMA peak, GPUs
//	sparseattn selftest [flags] GPU engine against the CPU executor
//	sparseattn gpubench [flags] GPU kernel timings, dense and block-sparse
//	sparseattn e2e [flags]      every method end to end on the GPU, tensors resident
//
// Run "sparseattn <command> --help" for a command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

const usage = `sparseattn: training-free sparse attention, checked on your own tensors.

Usage:
  sparseattn eval     [flags]   run the methods on a workload or on --input files and
                                compare each with dense attention (sparsity, error, time)
  sparseattn compare  [flags]   sweep each method's knob on the same input: error against
                                sparsity side by side, ratio to the oracle, optional PNG plot
  sparseattn viz      [flags]   PNG heatmaps of the true block attention mass of one head
                                beside each method's mask or pyramid levels
  sparseattn tune     [flags]   tune SpargeAttn per head for one layer under L1 bounds;
                                write a JSON profile
  sparseattn bench    [flags]   sweep sequence length; report GFLOPS and % of measured peak
  sparseattn info     [flags]   report CPU features, the measured FMA peak and any GPUs
  sparseattn selftest [flags]   check the GPU engine against the CPU on random inputs
  sparseattn gpubench [flags]   time the GPU kernels alone (dense and block-sparse)
  sparseattn e2e [flags]        time every method end to end on the GPU (plan and run, tensors resident)

With no flags, "sparseattn eval" runs the embedded default workload
(an 8-head, 4096-token causal LLM layer with a planted needle).
Run "sparseattn <command> --help" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status: 0 on
// success, 1 on failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "eval":
		err = runEval(ctx, args[1:], stdout, stderr)
	case "compare":
		err = runCompare(ctx, args[1:], stdout, stderr)
	case "viz":
		err = runViz(ctx, args[1:], stdout, stderr)
	case "bench":
		err = runBench(ctx, args[1:], stdout, stderr)
	case "info":
		err = runInfo(ctx, args[1:], stdout, stderr)
	case "tune":
		err = runTune(ctx, args[1:], stdout, stderr)
	case "selftest":
		err = runSelftest(ctx, args[1:], stdout, stderr)
	case "gpubench":
		err = runGPUBench(ctx, args[1:], stdout, stderr)
	case "e2e":
		err = runE2E(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "sparseattn: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errReported):
		return 2
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "sparseattn %s: %v\nRun \"sparseattn %s --help\" for the flags.\n", args[0], err, args[0])
		return 2
	default:
		fmt.Fprintf(stderr, "sparseattn %s: %v\n", args[0], err)
		return 1
	}
}

// errUsage marks a command line that cannot run; errReported marks one
// the flag package has already explained.
var (
	errUsage    = errors.New("usage error")
	errReported = errors.New("usage error reported")
)

// newFlagSet returns a flag set whose --help prints the command's summary
// before its flags.
func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sparseattn "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sparseattn %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; the flag package reports its own errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errReported
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return errReported
	}
	return nil
}
