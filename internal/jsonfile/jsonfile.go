// Package jsonfile reads and writes the project's versioned JSON files
// (the tuners' profiles) the same hardened way: a size limit before
// anything is decoded, the version checked before the fields, unknown
// fields and trailing data rejected, and writes that replace a file
// atomically.
package jsonfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrTooLarge reports input above the caller's size limit.
var ErrTooLarge = errors.New("jsonfile: input too large")

// VersionMismatch reports a file whose "version" field is not the one the
// caller reads.
type VersionMismatch struct {
	Got, Want int
}

// Error says which version was found and which one is read.
func (e *VersionMismatch) Error() string {
	return fmt.Sprintf("jsonfile: version %d, want %d", e.Got, e.Want)
}

// Decode reads at most maxBytes+1 bytes of r and decodes them into v, a
// pointer to a struct with a `json:"version"` field. It checks that
// field first, so that a file of another format version is reported as a
// *VersionMismatch rather than as unknown fields; then it decodes with
// unknown fields and trailing data rejected. What it allocates is bounded
// by maxBytes and by what those bytes encode. The caller validates v.
func Decode(r io.Reader, maxBytes int, version int, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, int64(maxBytes)+1))
	if err != nil {
		return err
	}
	if len(data) > maxBytes {
		return fmt.Errorf("%w: larger than %d bytes", ErrTooLarge, maxBytes)
	}
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	if head.Version != version {
		return &VersionMismatch{Got: head.Version, Want: version}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Encode writes v as indented JSON.
func Encode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteAtomic writes a file at path with write, through a temporary file
// in the same directory (named after pattern, as os.CreateTemp takes it)
// renamed over path, so that a reader never sees half a file.
func WriteAtomic(path, pattern string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadFile opens path and reads it with read, naming the path in any error
// read returns.
func ReadFile[T any](path string, read func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	v, err := read(f)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// Load decodes one document of at most maxBytes from r into a new T, as
// Decode does, and validates it with T's Validate method. A file of
// another version gives the *VersionMismatch unwrapped; any other decoding
// error is wrapped in kind; Validate's error is returned as it is.
func Load[T any, P interface {
	*T
	Validate() error
}](r io.Reader, maxBytes, version int, kind error) (*T, error) {
	v := new(T)
	var vm *VersionMismatch
	switch err := Decode(r, maxBytes, version, v); {
	case errors.As(err, &vm):
		return nil, vm
	case err != nil:
		return nil, fmt.Errorf("%w: %w", kind, err)
	}
	if err := P(v).Validate(); err != nil {
		return nil, err
	}
	return v, nil
}
