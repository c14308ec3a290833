package tensorfile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Load reads the arrays in the file at path, choosing the format by the
// extension: .safetensors, .npy or .npz (any case). A .npy file gives one
// array named after the file's base name without the extension. Safetensors
// metadata is dropped; use ReadSafetensors to get it.
func Load(path string) (map[string]*Array, error) {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".safetensors", ".npy", ".npz":
	default:
		return nil, fmt.Errorf("tensorfile: %s: %w: extension %q; want .safetensors, .npy or .npz", path, ErrUnsupported, ext)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tensorfile: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("tensorfile: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("tensorfile: %s: %w: not a regular file", path, ErrUnsupported)
	}
	var arrays map[string]*Array
	switch ext {
	case ".safetensors":
		arrays, _, err = ReadSafetensors(f, st.Size())
	case ".npy":
		var a *Array
		if a, err = ReadNpy(f, st.Size()); err == nil {
			base := filepath.Base(path)
			arrays = map[string]*Array{base[:len(base)-len(ext)]: a}
		}
	case ".npz":
		arrays, err = ReadNpz(f, st.Size())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return arrays, nil
}

// Save writes arrays to path in the format its extension names
// (.safetensors, .npy or .npz, any case). A .npy file holds exactly one
// array. The file is created or truncated; if writing fails it is removed.
func Save(path string, arrays map[string]*Array) (err error) {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".safetensors", ".npz":
	case ".npy":
		if len(arrays) != 1 {
			return fmt.Errorf("tensorfile: %s: %w: a .npy file holds exactly one array, got %d; use .npz or .safetensors", path, ErrUnsupported, len(arrays))
		}
	default:
		return fmt.Errorf("tensorfile: %s: %w: extension %q; want .safetensors, .npy or .npz", path, ErrUnsupported, ext)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("tensorfile: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("tensorfile: %w", cerr)
		}
		if err != nil {
			err = errors.Join(err, os.Remove(path))
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	switch ext {
	case ".safetensors":
		err = WriteSafetensors(w, arrays, nil)
	case ".npz":
		err = WriteNpz(w, arrays)
	case ".npy":
		for _, a := range arrays {
			err = WriteNpy(w, a)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("tensorfile: %w", err)
	}
	return nil
}
