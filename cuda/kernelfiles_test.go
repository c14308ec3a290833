package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKernelDir checks Tactics.KernelDir's files: a replaced kernel file
// goes into the variant's program in place of the embedded one, the files
// the directory lacks stay embedded, and a directory that is missing or
// holds no kernel file is an error wrapping ErrUnsupported.
func TestKernelDir(t *testing.T) {
	dir := t.TempDir()
	const marker = "// a kernel variant under test\n"
	if err := os.WriteFile(filepath.Join(dir, "attention_gen_ws.cu"), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := readKernelFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		v        variant
		replaced bool
		embedded string // a file of the program that stays embedded
	}{
		{"gathering, warp-specialized", variant{gen: genFlags{on: true, ws: true}}, true, genHeader},
		{"gathering, mma.sync", variant{gen: genFlags{on: true}}, false, genSource},
		{"dense, warp-specialized", variant{ws: true}, false, wsSource},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, _ := c.v.sourceWith(files)
			if got := strings.Contains(src, marker); got != c.replaced {
				t.Errorf("program holds the directory's file: %v, want %v", got, c.replaced)
			}
			if !strings.Contains(src, c.embedded) {
				t.Error("an embedded file the directory lacks is missing from the program")
			}
			if plain, _ := c.v.source(); c.replaced == (plain == src) {
				t.Errorf("program differs from the embedded one: %v, want %v", plain != src, c.replaced)
			}
		})
	}
	for _, bad := range []string{filepath.Join(dir, "missing"), t.TempDir()} {
		if _, err := readKernelFiles(bad); !errors.Is(err, ErrUnsupported) {
			t.Errorf("readKernelFiles(%s) = %v, want ErrUnsupported", bad, err)
		}
	}
	if f, err := readKernelFiles(""); f != nil || err != nil {
		t.Errorf("readKernelFiles(\"\") = %v, %v; want none", f, err)
	}
}
