package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/sparseattn/sparseattn/plan"
)

// method is one attention method the CLI offers. Each lives in its own
// file, method_<name>.go, and is listed once in methodCatalog.
type method struct {
	// name is what --methods and --method accept.
	name string
	// flags registers the method's hyperparameters, each named
	// "<name>-<param>", on fs; nil when it has none.
	flags func(fs *flag.FlagSet)
	// planner builds the planner from the parsed flags, checking their
	// ranges and wrapping errUsage when one is out of range.
	planner func() (plan.Planner, error)
	// knob is the one hyperparameter a sweep varies (compare); nil when
	// the method has none (dense).
	knob *knob
}

// knob is a method's main trade-off between sparsity and error.
type knob struct {
	name   string    // flag-style name, e.g. "cdf"
	values []float64 // default sweep, from dense-like to sparsest
	// planner builds the planner at knob value x, every other
	// hyperparameter taken from the parsed flags.
	planner func(x float64) (plan.Planner, error)
}

// methodCatalog returns every method, in the order tables list them.
// Each call returns fresh flag storage, so flag sets never share state.
func methodCatalog() []*method {
	return []*method{
		denseMethod(),
		// The best method and knob per head under an error budget, first.
		autoMethod(),
		// The four methods this project implements.
		spargeMethod(),
		unisparseMethod(),
		psaMethod(),
		s2oMethod(),
		// The baselines their papers compare against, and the oracle.
		xattnMethod(),
		flexprefillMethod(),
		minferenceMethod(),
		windowMethod(),
		oracleMethod(),
	}
}

// methodNames lists the names in catalog order.
func methodNames(ms []*method) []string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.name
	}
	return names
}

// methodFlags selects methods by name and holds their hyperparameters.
type methodFlags struct {
	names   string
	catalog []*method
}

func (m *methodFlags) register(fs *flag.FlagSet, defaults string) {
	m.catalog = methodCatalog()
	all := methodNames(m.catalog)
	if defaults == "" {
		defaults = strings.Join(all, ",")
	}
	fs.StringVar(&m.names, "methods", defaults, "comma-separated methods to run: "+strings.Join(all, ", "))
	for _, meth := range m.catalog {
		if meth.flags != nil {
			meth.flags(fs)
		}
	}
}

// selected returns the methods named by --methods, in the order named.
func (m *methodFlags) selected() ([]*method, error) {
	byName := map[string]*method{}
	for _, meth := range m.catalog {
		byName[meth.name] = meth
	}
	var out []*method
	seen := map[string]bool{}
	for _, name := range strings.Split(m.names, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		meth, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("%w: unknown method %q (have %s)", errUsage, name, strings.Join(methodNames(m.catalog), ", "))
		}
		out = append(out, meth)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: --methods names no method", errUsage)
	}
	return out, nil
}

// planners returns the planners of the selected methods, in the order named.
func (m *methodFlags) planners() ([]plan.Planner, error) {
	ms, err := m.selected()
	if err != nil {
		return nil, err
	}
	out := make([]plan.Planner, 0, len(ms))
	for _, meth := range ms {
		p, err := meth.planner()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// sparseMethodNames lists the catalog's methods other than dense,
// comma-separated: the default --methods of compare and viz.
func sparseMethodNames() string {
	var names []string
	for _, m := range methodCatalog() {
		if m.name != "dense" {
			names = append(names, m.name)
		}
	}
	return strings.Join(names, ",")
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
