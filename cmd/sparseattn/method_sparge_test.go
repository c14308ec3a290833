package main

import (
	"flag"
	"io"
	"testing"

	"github.com/sparseattn/sparseattn/method/sparge"
)

// TestSpargeFlagModes: the sparge flags select TopCdf or top-k as their
// help says. The zero sparge.Params is TopCdf DefaultCDF, so
// --sparge-cdf 0 alone must spell top-k DefaultTopK for the planner.
func TestSpargeFlagModes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want sparge.Params
	}{
		{nil, sparge.Params{CDF: sparge.DefaultCDF}},
		{[]string{"--sparge-cdf", "0.9"}, sparge.Params{CDF: 0.9}},
		{[]string{"--sparge-cdf", "0"}, sparge.Params{TopK: sparge.DefaultTopK}},
		{[]string{"--sparge-topk", "0.2"}, sparge.Params{TopK: 0.2}},
		{[]string{"--sparge-cdf", "0", "--sparge-topk", "0.3", "--sparge-theta", "-1"}, sparge.Params{TopK: 0.3, Theta: -1}},
	} {
		m := spargeMethod()
		fs := flag.NewFlagSet("eval", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		m.flags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		p, err := m.planner()
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got := p.(sparge.Planner).Params; got != tc.want {
			t.Errorf("%v: params %+v, want %+v", tc.args, got, tc.want)
		}
	}
}
