package main

import (
	"errors"
	"strings"
	"testing"
)

// TestSelftestSection checks the table, the PASS line and the failure
// count of one self-test group, without a GPU.
func TestSelftestSection(t *testing.T) {
	type check struct {
		name string
		err  error
	}
	row := func(c check) (string, error) { return c.name + "\tx", c.err }
	for _, tc := range []struct {
		name    string
		checks  []check
		runErr  error
		wantErr string
		want    []string
	}{
		{"pass", []check{{"a", nil}, {"b", nil}}, nil, "", []string{"case  f  result", "a     x  ok", "PASS: 2 widgets"}},
		{"one fails", []check{{"a", nil}, {"b", errors.New("off by one")}}, nil, "1 of 2 widgets failed", []string{"b     x  FAIL: off by one"}},
		{"run error", []check{{"a", nil}}, errors.New("no device"), "no device", []string{"a     x  ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := selftestSection(&out, "widgets", "case\tf", len(tc.checks), func(report func(check)) (int, error) {
				failed := 0
				for _, c := range tc.checks {
					report(c)
					if c.err != nil {
						failed++
					}
				}
				return failed, tc.runErr
			}, row)
			switch {
			case tc.wantErr == "" && err != nil, tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tc.wantErr != "" && strings.Contains(out.String(), "PASS") {
				t.Errorf("PASS printed on failure:\n%s", out.String())
			}
		})
	}
}
