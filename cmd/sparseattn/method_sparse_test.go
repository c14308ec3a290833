package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/plan"
)

// TestSparseMethodFlags: every knob value of the S2O and baseline catalog
// entries builds a planner with the default flags, an evaluation runs each
// method on a small workload, and each out-of-range flag is a usage error
// naming the flag.
func TestSparseMethodFlags(t *testing.T) {
	for _, m := range []*method{s2oMethod(), xattnMethod(), minferenceMethod(), flexprefillMethod()} {
		fs := flag.NewFlagSet(m.name, flag.ContinueOnError)
		m.flags(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := m.planner(); err != nil {
			t.Errorf("%s: defaults: %v", m.name, err)
		}
		for _, x := range m.knob.values {
			p, err := m.knob.planner(x)
			if err != nil || p.Name() != m.name {
				t.Errorf("%s: knob %s=%v: planner %v, error %v", m.name, m.knob.name, x, p, err)
			}
		}
	}
	for _, tc := range []struct {
		method string
		args   []string
		flag   string
	}{
		{"s2o", []string{"--s2o-tau", "1"}, "--s2o-tau"},
		{"s2o", []string{"--s2o-tau", "0"}, "--s2o-tau"},
		{"s2o", []string{"--s2o-segment", "-64"}, "--s2o-segment"},
		{"s2o", []string{"--s2o-window", "-1"}, "--s2o-window"},
		{"s2o", []string{"--s2o-outliers", "0"}, "--s2o-outliers"},
		{"xattn", []string{"--xattn-threshold", "0"}, "--xattn-threshold"},
		{"xattn", []string{"--xattn-stride", "-4"}, "--xattn-stride"},
		{"minference", []string{"--minference-budget", "2"}, "--minference-budget"},
		{"minference", []string{"--minference-last-q", "0"}, "--minference-last-q"},
		{"flexprefill", []string{"--flexprefill-gamma", "1.5"}, "--flexprefill-gamma"},
		{"flexprefill", []string{"--flexprefill-tau", "0"}, "--flexprefill-tau"},
		{"flexprefill", []string{"--flexprefill-tau", "NaN"}, "--flexprefill-tau"},
		{"flexprefill", []string{"--flexprefill-min-budget", "5", "--flexprefill-max-budget", "2"}, "--flexprefill-max-budget"},
	} {
		var mf methodFlags
		fs := flag.NewFlagSet("eval", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		mf.register(fs, tc.method)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		_, err := mf.planners()
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: got %v, want a usage error naming %s", tc.args, err, tc.flag)
		}
	}
	// A negative τ (or S2O's outlier count) is each method's documented
	// "off": it reaches the planner as given.
	for _, tc := range []struct {
		method string
		args   []string
		want   plan.Planner
	}{
		{"s2o", []string{"--s2o-tau", "-1"}, s2o.Planner{Tau: s2o.NoStop, Outliers: s2o.DefaultOutliers}},
		{"s2o", []string{"--s2o-outliers", "-1"}, s2o.Planner{Tau: s2o.DefaultTau, Outliers: s2o.NoOutliers}},
		{"s2o", []string{"--s2o-qperm"}, s2o.Planner{Tau: s2o.DefaultTau, Outliers: s2o.DefaultOutliers, QueryPerm: true}},
		{"flexprefill", []string{"--flexprefill-tau", "-1"}, flexprefill.Planner{Gamma: flexprefill.DefaultGamma, Tau: flexprefill.NoQueryAware}},
	} {
		var mf methodFlags
		fs := flag.NewFlagSet("eval", flag.ContinueOnError)
		mf.register(fs, tc.method)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		ps, err := mf.planners()
		if err != nil || len(ps) != 1 || ps[0] != tc.want {
			t.Errorf("%v: planners %+v, error %v; want %+v", tc.args, ps, err, tc.want)
		}
	}
	code, out, errs := runCLI(t, "eval", "--workload", "llm", "--n", "256", "--heads", "2", "--kv-heads", "1", "--d", "32",
		"--methods", "s2o,xattn,minference,flexprefill", "--s2o-segment", "128", "--repeat", "1", "--warmup", "0")
	if code != 0 {
		t.Fatalf("eval exit %d: %s%s", code, out, errs)
	}
	for _, name := range []string{"s2o", "xattn", "minference", "flexprefill"} {
		if !strings.Contains(out, name) {
			t.Errorf("eval output lacks %s:\n%s", name, out)
		}
	}
}
