package lm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// The weight file format, version 1, all little-endian (scripts/train_lm.py
// writes it):
//
//	magic      8 bytes "SALMv1\x00\x00"
//	config     8 × uint32: vocab, d_model, layers, heads, kv_heads,
//	           head_dim, hidden, reserved (0)
//	           2 × float32: rope_base, norm_eps
//	embedding  int8 matrix [vocab, d_model] (also the output projection)
//	per layer  attn_norm float32[d_model],
//	           wq [heads·head_dim, d_model], wk and wv [kv_heads·head_dim,
//	           d_model], wo [d_model, heads·head_dim] (int8 matrices),
//	           mlp_norm float32[d_model],
//	           w1 and w3 [hidden, d_model], w2 [d_model, hidden] (int8)
//	final_norm float32[d_model]
//	crc        uint32 CRC-32 (IEEE) of every byte before it
//
// An int8 matrix [r, c] is r float32 row scales followed by r·c int8
// values, row-major; element (i, j) is scale[i]·q[i, j]. Matrices act as
// PyTorch's Linear: y = W·x.

const (
	magic      = "SALMv1\x00\x00"
	headerSize = len(magic) + 8*4 + 2*4
)

// Limits on a weight file's config. They bound every size computed from
// it, so the loader's arithmetic cannot overflow and a hostile header
// cannot ask for more memory than the file itself carries.
const (
	MaxDModel  = 4096
	MaxLayers  = 64
	MaxHeads   = 256
	MaxHeadDim = 512
	MaxHidden  = 16384
)

// ErrFormat is the sentinel every weight-file error wraps; test with
// errors.Is(err, ErrFormat).
var ErrFormat = errors.New("lm: bad weight file")

// FormatError says where in a weight file decoding failed and why. It
// wraps ErrFormat.
type FormatError struct {
	Offset int64  // byte offset of the offending field
	Reason string // what is wrong
}

// Error reports the offset and the reason.
func (e *FormatError) Error() string {
	return fmt.Sprintf("lm: bad weight file at byte %d: %s", e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Unwrap() error { return ErrFormat }

func formatErr(off int, format string, args ...any) error {
	return &FormatError{Offset: int64(off), Reason: fmt.Sprintf(format, args...)}
}

// Config is a model's architecture, read from its weight file.
type Config struct {
	Vocab    int     // always 256: the model reads and predicts bytes
	DModel   int     // width of the residual stream
	Layers   int     // transformer blocks
	Heads    int     // query heads per layer
	KVHeads  int     // key/value heads per layer; divides Heads
	HeadDim  int     // dimension of each head; even (RoPE rotates pairs)
	Hidden   int     // SwiGLU hidden width
	RoPEBase float64 // RoPE frequency base θ: pair i turns at θ^(−2i/HeadDim)
	NormEps  float64 // RMSNorm ε
}

// validate checks every field against the format's limits.
func (c Config) validate() error {
	check := func(name string, v, lo, hi int) error {
		if v < lo || v > hi {
			return formatErr(len(magic), "%s %d is outside [%d, %d]", name, v, lo, hi)
		}
		return nil
	}
	if c.Vocab != 256 {
		return formatErr(len(magic), "vocab %d, want 256 (a byte-level model)", c.Vocab)
	}
	for _, f := range []struct {
		name      string
		v, lo, hi int
	}{
		{"d_model", c.DModel, 1, MaxDModel},
		{"layers", c.Layers, 1, MaxLayers},
		{"heads", c.Heads, 1, MaxHeads},
		{"kv_heads", c.KVHeads, 1, MaxHeads},
		{"head_dim", c.HeadDim, 2, MaxHeadDim},
		{"hidden", c.Hidden, 1, MaxHidden},
	} {
		if err := check(f.name, f.v, f.lo, f.hi); err != nil {
			return err
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return formatErr(len(magic), "kv_heads %d does not divide heads %d", c.KVHeads, c.Heads)
	}
	if c.HeadDim%2 != 0 {
		return formatErr(len(magic), "head_dim %d is odd", c.HeadDim)
	}
	if !(c.RoPEBase > 1) || math.IsInf(c.RoPEBase, 0) {
		return formatErr(len(magic)+32, "rope_base %v must be finite and above 1", c.RoPEBase)
	}
	if !(c.NormEps > 0 && c.NormEps < 1) {
		return formatErr(len(magic)+36, "norm_eps %v must be in (0, 1)", c.NormEps)
	}
	return nil
}

// fileSize is the exact byte size of a weight file for c (validated).
func (c Config) fileSize() int64 {
	mat := func(r, k int) int64 { return int64(r)*4 + int64(r)*int64(k) }
	d, q, kv := c.DModel, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	layer := 2*int64(d)*4 + mat(q, d) + 2*mat(kv, d) + mat(d, q) + 2*mat(c.Hidden, d) + mat(d, c.Hidden)
	return int64(headerSize) + mat(c.Vocab, d) + int64(c.Layers)*layer + int64(d)*4 + 4
}

// decoder reads the body of a weight file whose size is already checked.
type decoder struct {
	data []byte
	off  int
}

func (r *decoder) u32() uint32 {
	v := binary.LittleEndian.Uint32(r.data[r.off:])
	r.off += 4
	return v
}

func (r *decoder) f32() float32 { return math.Float32frombits(r.u32()) }

// vector reads n float32s, all finite.
func (r *decoder) vector(n int) ([]float32, error) {
	v := make([]float32, n)
	for i := range v {
		at := r.off
		if v[i] = r.f32(); math.IsNaN(float64(v[i])) || math.IsInf(float64(v[i]), 0) {
			return nil, formatErr(at, "non-finite weight %v", v[i])
		}
	}
	return v, nil
}

// matrixT reads an int8 matrix [rows, cols] and returns it dequantized
// and transposed, [cols, rows] row-major, ready to be the right operand of
// kernel.MatMul (y = x·Wᵀ).
func (r *decoder) matrixT(rows, cols int) ([]float32, error) {
	scales := make([]float32, rows)
	for i := range scales {
		at := r.off
		s := r.f32()
		if !(s >= 0) || math.IsInf(float64(s), 0) {
			return nil, formatErr(at, "row scale %v must be finite and ≥ 0", s)
		}
		scales[i] = s
	}
	w := make([]float32, rows*cols)
	for i := range rows {
		row := r.data[r.off : r.off+cols]
		for j, b := range row {
			w[j*rows+i] = scales[i] * float32(int8(b))
		}
		r.off += cols
	}
	return w, nil
}

// Load decodes a weight file. It checks the header's limits and the exact
// file size before allocating anything, then the trailing checksum and
// every weight; errors wrap ErrFormat (as a *FormatError). Nothing in data
// is retained.
func Load(data []byte) (*Model, error) {
	if len(data) < headerSize+4 {
		return nil, formatErr(0, "%d bytes is shorter than the %d-byte header", len(data), headerSize+4)
	}
	if string(data[:len(magic)]) != magic {
		return nil, formatErr(0, "magic %q, want %q", data[:len(magic)], magic)
	}
	r := &decoder{data: data, off: len(magic)}
	var u [8]uint32
	for i := range u {
		u[i] = r.u32()
		if u[i] > math.MaxInt32 {
			return nil, formatErr(r.off-4, "config field %d is %d", i, u[i])
		}
	}
	if u[7] != 0 {
		return nil, formatErr(r.off-4, "reserved field is %d, want 0", u[7])
	}
	c := Config{Vocab: int(u[0]), DModel: int(u[1]), Layers: int(u[2]), Heads: int(u[3]),
		KVHeads: int(u[4]), HeadDim: int(u[5]), Hidden: int(u[6])}
	c.RoPEBase, c.NormEps = float64(r.f32()), float64(r.f32())
	if err := c.validate(); err != nil {
		return nil, err
	}
	if want := c.fileSize(); int64(len(data)) != want {
		return nil, formatErr(len(data), "file is %d bytes, config %+v needs %d", len(data), c, want)
	}
	body := len(data) - 4
	if got, want := crc32.ChecksumIEEE(data[:body]), binary.LittleEndian.Uint32(data[body:]); got != want {
		return nil, formatErr(body, "checksum %08x, file says %08x", got, want)
	}
	m := &Model{cfg: c, layers: make([]layer, c.Layers)}
	var err error
	d, q, kv := c.DModel, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	if m.emb, err = r.matrixT(c.Vocab, d); err != nil {
		return nil, err
	}
	for i := range m.layers {
		l := &m.layers[i]
		steps := []struct {
			dst        *[]float32
			rows, cols int // 0 cols: a vector
		}{
			{&l.attnNorm, d, 0}, {&l.wq, q, d}, {&l.wk, kv, d}, {&l.wv, kv, d}, {&l.wo, d, q},
			{&l.mlpNorm, d, 0}, {&l.w1, c.Hidden, d}, {&l.w3, c.Hidden, d}, {&l.w2, d, c.Hidden},
		}
		for _, s := range steps {
			if s.cols == 0 {
				*s.dst, err = r.vector(s.rows)
			} else {
				*s.dst, err = r.matrixT(s.rows, s.cols)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if m.finalNorm, err = r.vector(d); err != nil {
		return nil, err
	}
	return m, nil
}
