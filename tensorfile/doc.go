// Package tensorfile reads and writes the array files that Q, K and V are
// usually dumped to from Python: .safetensors (safetensors.torch.save_file),
// .npy (numpy.save) and .npz (numpy.savez and numpy.savez_compressed), so
// that they can be evaluated with sparseattn.
//
// # Why the codecs are hand-written
//
// Attention inputs often come from files someone else produced, so every
// reader treats its input as hostile. The readers here are written against
// the published format descriptions, using only the standard library, so
// that two properties can be guaranteed and tested (including by fuzzing):
//
//   - Bounded allocation. Nothing is allocated because a header says so.
//     Header lengths are capped (safetensors: 100 MiB and the file size;
//     npy: 1 MiB), shapes are checked for negative axes and multiplication
//     overflow, and every tensor's byte size must match the bytes the file
//     actually holds before its buffer is allocated. Members of an .npz are
//     read through a limit and their buffers grow with the bytes actually
//     decompressed, never with the sizes the zip directory declares; members
//     whose compressed data overlap (a known zip-bomb construction) are
//     rejected, so an archive expands to at most about 1040 times its size
//     (DEFLATE's own limit is about 1032:1). The size passed to ReadSafetensors, ReadNpy and ReadNpz must
//     be the true size of the data behind the io.ReaderAt.
//   - Typed errors, never panics. A malformed file yields an error that
//     wraps one of ErrFormat, ErrTruncated or ErrUnsupported (usually through
//     a *FormatError naming the format and the tensor), so callers can
//     branch with errors.Is and users get a message saying what to fix.
//
// # Formats and element types
//
// Arrays are dense and row-major (C order). The element types kept exactly
// are float32, float16 and bfloat16; float16 and bfloat16 are held as their
// 16-bit patterns, so round trips are bit-exact, including NaN payloads,
// negative zero, subnormals and infinities.
//
// safetensors: dtypes "F32", "F16" and "BF16" are read exactly; "F64" is
// read and rounded to float32 (so it does not round-trip: it is written back
// as "F32"). Any other dtype is rejected with ErrUnsupported. Following the
// format description, the data buffer must be covered exactly by the
// tensors' data_offsets: overlapping tensors, holes between tensors and
// trailing bytes are all rejected with ErrFormat. Offsets that run past the
// end of the file are reported as ErrTruncated, since that is what a
// cut-off file looks like. Duplicate names (which
// JSON decoders usually resolve silently) are rejected too, as are unknown
// fields in a tensor entry. The writer is deterministic: tensors sorted by
// name, offsets contiguous from 0, header padded with spaces to a multiple
// of 8 bytes.
//
// npy: versions 1.0, 2.0 and 3.0 are read. descr '<f4' and '<f2' are read
// exactly, '<f8' is rounded to float32, and the big-endian forms '>f4',
// '>f2' and '>f8' are byte-swapped to the same values. NumPy has no bfloat16
// type ('<V2' or '|V2' from ml_dtypes is indistinguishable from any other
// 2-byte void) so such files are rejected, as are Fortran-order arrays (save
// np.ascontiguousarray(x) instead) and structured dtypes. Bytes after the
// array data are rejected. The writer emits version 1.0 when the header
// fits (2.0 otherwise), little-endian, C order, with the header padded so
// the data starts at a multiple of 64 bytes. WriteNpy refuses bfloat16
// arrays with ErrUnsupported: write .safetensors, or convert to float32.
//
// npz: a zip archive whose members "name.npy" hold one array each; the
// array is named "name". Stored and deflated members are read. Members
// whose names do not end in ".npy" are skipped (numpy.load would expose them
// as raw bytes, which sparseattn has no use for); two members that map to
// the same name are an error. Because the zip directory sits at the end of
// the archive, a cut-off .npz usually reads as ErrFormat ("not a valid zip
// file") rather than ErrTruncated. Zip offsets are confined to the stated
// size before they reach the io.ReaderAt. WriteNpz stores members uncompressed, sorted
// by name, with a zero timestamp, so its output is deterministic.
//
// Shapes have at most 64 axes and at most tensor.MaxElements (2^40)
// elements, where the product of the non-zero axes must stay within that
// bound even when another axis is zero.
package tensorfile
