package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/plan"
)

// methodFlags holds the hyperparameters of every method the CLI offers.
type methodFlags struct {
	names     string
	sink      int
	window    int
	oracleCDF float64
}

func (m *methodFlags) register(fs *flag.FlagSet, defaults string) {
	fs.StringVar(&m.names, "methods", defaults, "comma-separated methods to run: "+strings.Join(methodNames, ", "))
	fs.IntVar(&m.sink, "window-sink", 64, "window: leading sink tokens every query sees")
	fs.IntVar(&m.window, "window-size", 1024, "window: tokens of local context")
	fs.Float64Var(&m.oracleCDF, "oracle-cdf", 0.95, "oracle: cumulative attention mass each query block keeps, in (0,1]")
}

var methodNames = []string{"dense", "window", "oracle"}

// planners returns the selected planners in the order named.
func (m *methodFlags) planners() ([]plan.Planner, error) {
	var out []plan.Planner
	seen := map[string]bool{}
	for _, name := range strings.Split(m.names, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		switch name {
		case "dense":
			out = append(out, plan.DensePlanner{})
		case "window":
			out = append(out, window.Planner{Sink: m.sink, Window: m.window})
		case "oracle":
			out = append(out, oracle.Planner{CDF: m.oracleCDF})
		default:
			return nil, fmt.Errorf("%w: unknown method %q (have %s)", errUsage, name, strings.Join(methodNames, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: --methods names no method", errUsage)
	}
	if m.sink < 0 || m.window < 0 {
		return nil, fmt.Errorf("%w: --window-sink and --window-size must be ≥ 0", errUsage)
	}
	if !(m.oracleCDF > 0 && m.oracleCDF <= 1) {
		return nil, fmt.Errorf("%w: --oracle-cdf must be in (0, 1]", errUsage)
	}
	return out, nil
}

// withDenseFirst returns the planners with dense moved, or added, to the
// front: dense is the reference every other row is compared with.
func withDenseFirst(ps []plan.Planner) []plan.Planner {
	out := []plan.Planner{plan.DensePlanner{}}
	for _, p := range ps {
		if p.Name() != "dense" {
			out = append(out, p)
		}
	}
	return out
}
