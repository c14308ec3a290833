package cuda

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestExpandIncludes: the planner sources that include block_mass.cuh get
// its text between #line markers that put the following line back at its
// own number, nested headers are expanded once, and an unknown header is
// an error.
func TestExpandIncludes(t *testing.T) {
	// Every kernel file expands: each header it names is embedded.
	entries, err := auxSources.ReadDir("kernels")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".cu") {
			continue
		}
		body, err := auxSources.ReadFile("kernels/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		src, err := expandIncludes("#line 1 \"" + e.Name() + "\"\n" + string(body))
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		} else if strings.Contains(src, "#include") {
			t.Errorf("%s: an #include is left after expansion", e.Name())
		}
	}
	for _, file := range []string{"plan_unisparse.cu", "plan_xattn.cu"} {
		body, err := auxSources.ReadFile("kernels/" + file)
		if err != nil {
			t.Fatal(err)
		}
		src, err := expandIncludes("#line 1 \"" + file + "\"\n" + string(body))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(src, "#include") || !strings.Contains(src, "bm_mass(PlanArgs a, BmArgs m)") {
			t.Errorf("%s: block_mass.cuh not expanded", file)
		}
		lines := strings.Split(string(body), "\n")
		at := 0
		for i, l := range lines {
			if strings.HasPrefix(l, "#include") {
				at = i + 1 // 1-based line of the include
			}
		}
		back := "#line " + strconv.Itoa(at+1) + " \"" + file + "\"\n" + lines[at]
		if !strings.Contains(src, back) {
			t.Errorf("%s: no marker %q after the header", file, back)
		}
	}
	// probe.cuh includes mma16.cuh: a nested header is expanded once, and a
	// second include of it writes an empty line.
	for _, file := range []string{"plan_minference.cu", "plan_oracle.cu"} {
		body, err := auxSources.ReadFile("kernels/" + file)
		if err != nil {
			t.Fatal(err)
		}
		src, err := expandIncludes("#line 1 \"" + file + "\"\n" + string(body) + "\n#include \"mma16.cuh\"\n")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(src, "#include") || strings.Count(src, "void mma16(") != 1 || strings.Count(src, "#line 1 \"mma16.cuh\"") != 1 {
			t.Errorf("%s: mma16.cuh not expanded exactly once", file)
		}
	}
	if _, err := expandIncludes("#include \"missing.cuh\"\n"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown header: %v, want ErrUnsupported", err)
	}
}
