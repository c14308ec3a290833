package lm

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"testing"
)

// tinyConfig is a model small enough to fuzz and to check in float64.
func tinyConfig() Config {
	return Config{Vocab: 256, DModel: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 8, Hidden: 24, RoPEBase: 10000, NormEps: 1e-5}
}

func TestLoadRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tm := newTestModel(rng, tinyConfig())
	m, err := Load(tm.file)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Config(); got != tm.cfg {
		t.Fatalf("config %+v, want %+v", got, tm.cfg)
	}
	// Every dequantized weight is scale·q as float32 (transposed).
	l, ml := tm.layers[1], m.layers[1]
	for i, row := range l.w2 {
		for j, w := range row {
			if got := ml.w2[j*len(l.w2)+i]; got != float32(w) {
				t.Fatalf("w2[%d][%d] = %v, want %v", i, j, got, w)
			}
		}
	}
	if m.finalNorm[3] != float32(tm.final[3]) {
		t.Fatalf("final norm %v, want %v", m.finalNorm[3], tm.final[3])
	}
}

// withCRC returns b with its trailing checksum recomputed.
func withCRC(b []byte) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

func TestLoadRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	good := newTestModel(rng, tinyConfig()).file
	set32 := func(off int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(b[off:], v)
		return withCRC(b)
	}
	field := func(i int) int { return len(magic) + 4*i }
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header only", good[:headerSize]},
		{"truncated by one", good[:len(good)-1]},
		{"one byte extra", append(append([]byte(nil), good...), 0)},
		{"bad magic", append([]byte("SALMv2\x00\x00"), good[len(magic):]...)},
		{"flipped bit", flipped},
		{"vocab 255", set32(field(0), 255)},
		{"d_model 0", set32(field(1), 0)},
		{"d_model huge", set32(field(1), 1<<30)},
		{"layers over limit", set32(field(2), MaxLayers+1)},
		{"kv_heads not dividing", set32(field(4), 3)},
		{"odd head_dim", set32(field(5), 7)},
		{"hidden 2^31", set32(field(6), 1<<31)},
		{"reserved set", set32(field(7), 1)},
		{"rope base NaN", set32(field(8), math.Float32bits(float32(math.NaN())))},
		{"rope base 1", set32(field(8), math.Float32bits(1))},
		{"eps 0", set32(field(9), 0)},
		{"negative row scale", set32(headerSize, math.Float32bits(-1))},
		{"infinite row scale", set32(headerSize, math.Float32bits(float32(math.Inf(1))))},
		{"NaN final norm", set32(len(good)-8, math.Float32bits(float32(math.NaN())))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Load(c.data)
			var fe *FormatError
			if m != nil || !errors.Is(err, ErrFormat) || !errors.As(err, &fe) {
				t.Fatalf("Load = %v, %v; want a *FormatError wrapping ErrFormat", m, err)
			}
		})
	}
	// Every truncation of a valid file is an error, not a panic.
	for n := range len(good) {
		if _, err := Load(good[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
}

func TestDefaultLoads(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	if c.Layers != 4 || c.Heads != 4 || c.HeadDim != 64 || c.DModel != 256 {
		t.Fatalf("embedded model config %+v", c)
	}
	if len(EvalText()) < 32<<10+1 || len(CalibText()) < 32<<10+1 {
		t.Fatal("held-out texts are shorter than 32K+1 bytes")
	}
}
