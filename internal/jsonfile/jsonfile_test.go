package jsonfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type doc struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
}

// TestDecode checks each rejection Decode makes and that a good document
// round-trips through Encode.
func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		check    func(error) bool
	}{
		{"good", `{"version": 2, "name": "x"}`, func(err error) bool { return err == nil }},
		{"too large", `{"version": 2, "name": "` + strings.Repeat("x", 100) + `"}`, func(err error) bool { return errors.Is(err, ErrTooLarge) }},
		{"other version", `{"version": 3, "name": "x", "future": 1}`, func(err error) bool {
			var vm *VersionMismatch
			return errors.As(err, &vm) && vm.Got == 3 && vm.Want == 2
		}},
		{"unknown field", `{"version": 2, "nme": "x"}`, func(err error) bool { return err != nil }},
		{"trailing data", `{"version": 2} {}`, func(err error) bool { return err != nil }},
		{"truncated", `{"version": 2, "na`, func(err error) bool { return err != nil }},
		{"not JSON", `version 2`, func(err error) bool { return err != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := Decode(strings.NewReader(tc.in), 64, 2, &d)
			if !tc.check(err) {
				t.Fatalf("Decode(%q) = %v", tc.in, err)
			}
			if err == nil && (d.Version != 2 || d.Name != "x") {
				t.Fatalf("decoded %+v", d)
			}
		})
	}
}

// TestWriteAtomic writes, reads back, and leaves no temporary file; a
// failing writer leaves the old file as it was.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	if err := WriteAtomic(path, ".p-*.json", func(w io.Writer) error { return Encode(w, doc{Version: 2, Name: "x"}) }); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	err = Decode(f, 1<<10, 2, &d)
	f.Close()
	if err != nil || d.Name != "x" {
		t.Fatalf("read back %+v, %v", d, err)
	}
	boom := errors.New("boom")
	if err := WriteAtomic(path, ".p-*.json", func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing writer: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only p.json", len(entries))
	}
}

// TestReadFile: a missing file gives the open error, a bad one the
// reader's error prefixed by the path, a good one the value.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	read := func(r io.Reader) (doc, error) {
		var d doc
		return d, Decode(r, 1<<10, 2, &d)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.json"), read); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var vm *VersionMismatch
	if _, err := ReadFile(bad, read); !errors.As(err, &vm) || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad file: %v", err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"version": 2, "name": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := ReadFile(good, read); err != nil || d.Name != "x" {
		t.Errorf("good file: %+v, %v", d, err)
	}
}

// errBadDoc is what checkedDoc.Validate reports.
var errBadDoc = errors.New("name must not be empty")

// checkedDoc is a doc that validates itself.
type checkedDoc doc

func (d *checkedDoc) Validate() error {
	if d.Name == "" {
		return errBadDoc
	}
	return nil
}

// TestLoad checks that Load passes a version mismatch through unwrapped,
// wraps decoding errors in the caller's kind and returns Validate's error.
func TestLoad(t *testing.T) {
	errKind := errors.New("bad doc file")
	for _, tc := range []struct {
		name, in string
		check    func(*checkedDoc, error) bool
	}{
		{"good", `{"version": 2, "name": "x"}`, func(d *checkedDoc, err error) bool { return err == nil && d.Name == "x" }},
		{"other version", `{"version": 1}`, func(d *checkedDoc, err error) bool {
			vm, ok := errors.AsType[*VersionMismatch](err)
			return d == nil && ok && vm.Got == 1 && !errors.Is(err, errKind)
		}},
		{"malformed", `{"version": 2, "nme": "x"}`, func(d *checkedDoc, err error) bool { return d == nil && errors.Is(err, errKind) }},
		{"invalid", `{"version": 2, "name": ""}`, func(d *checkedDoc, err error) bool { return d == nil && errors.Is(err, errBadDoc) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Load[checkedDoc](strings.NewReader(tc.in), 64, 2, errKind)
			if !tc.check(d, err) {
				t.Fatalf("Load(%q) = %+v, %v", tc.in, d, err)
			}
		})
	}
}
