package tensorfile

import (
	"archive/zip"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Sentinel errors. Every error a reader returns for a bad file wraps one of
// ErrFormat, ErrTruncated or ErrUnsupported; I/O errors from the underlying
// reader or writer are wrapped unchanged.
var (
	// ErrFormat reports a malformed file: a bad magic number, an invalid
	// header, inconsistent sizes or offsets, duplicate names and the like.
	ErrFormat = errors.New("malformed file")
	// ErrTruncated reports a file that ends before the data its header
	// describes.
	ErrTruncated = errors.New("file is truncated")
	// ErrUnsupported reports a well-formed file, or a request, that this
	// package cannot handle: an element type other than float32, float16,
	// bfloat16 (or float64, read as float32), Fortran order, an unknown file
	// extension, or bfloat16 in .npy.
	ErrUnsupported = errors.New("unsupported")
	// ErrNotFound reports a requested array name that is not in the set.
	ErrNotFound = errors.New("array not found")
)

// FormatError describes what is wrong with a file, or with an array that
// cannot be written. errors.Is(err, ErrFormat) and the like see through it
// to Err.
type FormatError struct {
	Format string // "safetensors", "npy" or "npz"
	Name   string // the tensor or zip member concerned; may be empty
	Reason string // what is wrong and, where possible, how to fix it
	Err    error  // the sentinel or underlying error
}

// Error formats the error as "tensorfile: FORMAT: NAME: REASON: ERR".
func (e *FormatError) Error() string {
	s := "tensorfile"
	if e.Format != "" {
		s += ": " + e.Format
	}
	if e.Name != "" {
		s += ": " + strconv.Quote(e.Name)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err, so that errors.Is and errors.As see the cause.
func (e *FormatError) Unwrap() error { return e.Err }

// readErr classifies an error from reading a region the header promised:
// running out of bytes means the file is truncated; corrupt compressed data
// or a bad checksum (from the zip layer of an .npz) means it is malformed;
// anything else, such as an I/O error, is passed through.
func readErr(format, name, what string, err error) error {
	var corrupt flate.CorruptInputError
	var internal flate.InternalError
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &FormatError{Format: format, Name: name, Reason: what + ": data ends early", Err: ErrTruncated}
	case errors.Is(err, zip.ErrAlgorithm):
		return &FormatError{Format: format, Name: name, Reason: what + ": compression method not supported (want stored or deflate)", Err: fmt.Errorf("%w: %w", ErrUnsupported, err)}
	case errors.Is(err, zip.ErrFormat) || errors.Is(err, zip.ErrChecksum) ||
		errors.As(err, &corrupt) || errors.As(err, &internal):
		return &FormatError{Format: format, Name: name, Reason: what, Err: fmt.Errorf("%w: %w", ErrFormat, err)}
	}
	return &FormatError{Format: format, Name: name, Reason: what, Err: err}
}
