package lm

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// relDiff is max|a−b| over max|b|.
func relDiff(a *tensor.Tensor, b [][][]float64) float64 {
	var num, den float64
	row := make([]float32, a.Shape().D)
	for h := range b {
		for p := range b[h] {
			a.ReadRow(0, h, p, row)
			for i, want := range b[h][p] {
				num = max(num, math.Abs(float64(row[i])-want))
				den = max(den, math.Abs(want))
			}
		}
	}
	return num / den
}

// The forward pass against the float64 reference, on fresh random models
// and texts. Tolerance: the Go pass computes in float32 (sums of at most a
// few hundred products, relative error ~1e-6 each, compounding over a few
// layers), so 2e-5 of the largest magnitude for activations and 1e-4 bits
// for log2-probabilities (values of magnitude ~10) leave an order of
// magnitude of margin while catching any wrong index, rotation or scale.
func TestForwardMatchesFloat64(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		n    int
	}{
		{"MHA", Config{Vocab: 256, DModel: 32, Layers: 2, Heads: 2, KVHeads: 2, HeadDim: 16, Hidden: 48, RoPEBase: 10000, NormEps: 1e-5}, 97},
		{"GQA", Config{Vocab: 256, DModel: 24, Layers: 3, Heads: 4, KVHeads: 1, HeadDim: 8, Hidden: 40, RoPEBase: 500, NormEps: 1e-6}, 150},
		{"one head, two tokens", Config{Vocab: 256, DModel: 8, Layers: 1, Heads: 1, KVHeads: 1, HeadDim: 4, Hidden: 8, RoPEBase: 10000, NormEps: 1e-5}, 2},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			tm := newTestModel(rng, c.cfg)
			m, err := Load(tm.file)
			if err != nil {
				t.Fatal(err)
			}
			text := make([]byte, c.n)
			for j := range text {
				text[j] = byte(rng.IntN(256))
			}
			p, err := m.Forward(context.Background(), text, Options{Capture: true, Logits: true})
			if err != nil {
				t.Fatal(err)
			}
			ref := tm.forward64(text)
			for l, layer := range p.Layers {
				for _, x := range []struct {
					name string
					got  *tensor.Tensor
					want [][][]float64
				}{{"Q", layer.Q, ref.q[l]}, {"K", layer.K, ref.k[l]}, {"V", layer.V, ref.v[l]}, {"Out", layer.Out, ref.out[l]}} {
					if d := relDiff(x.got, x.want); d > 2e-5 {
						t.Errorf("layer %d %s: relative difference %.2e > 2e-5", l, x.name, d)
					}
				}
			}
			for pos, lp := range ref.logp2 {
				row := p.Logits[pos*256 : (pos+1)*256]
				for b := range 256 {
					if got := -bits(row, byte(b)); math.Abs(got-lp[b]) > 1e-4 {
						t.Fatalf("log2 p(%d | pos %d) = %v, want %v", b, pos, got, lp[b])
					}
				}
			}
			if math.Abs(p.Bits-ref.bits) > 1e-4*float64(c.n) {
				t.Errorf("bits %v, want %v", p.Bits, ref.bits)
			}
		})
	}
}

// The captured Q, K, V are what attention saw: the reference attention of
// them reproduces each layer's attention output (float32 executor against
// float64: 1e-5 of the largest output).
func TestCaptureMatchesReferenceAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	tm := newTestModel(rng, tinyConfig())
	m, err := Load(tm.file)
	if err != nil {
		t.Fatal(err)
	}
	text := []byte("the quick brown fox jumps over the lazy dog; the quick brown fox jumps again.")
	p, err := m.Forward(context.Background(), text, Options{Capture: true})
	if err != nil {
		t.Fatal(err)
	}
	q, k, v, err := p.Stacked()
	if err != nil {
		t.Fatal(err)
	}
	if s := q.Shape(); s.H != 2*4 || s.N != len(text) || k.Shape().H != 2*2 {
		t.Fatalf("stacked shapes %v %v", s, k.Shape())
	}
	ref, err := reference.Attention(context.Background(), q, k, v, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for l, layer := range p.Layers {
		row := make([]float32, 8)
		for h := range 4 {
			for n := range len(text) {
				layer.Out.ReadRow(0, h, n, row)
				for i, want := range ref.Row(0, l*4+h, n) {
					num = max(num, math.Abs(float64(row[i])-want))
					den = max(den, math.Abs(want))
				}
			}
		}
	}
	if num/den > 1e-5 {
		t.Fatalf("layer outputs differ from reference attention of the captured Q/K/V by %.2e", num/den)
	}
}

// The embedded model against the PyTorch model that trained it
// (testdata/reference.json, written by scripts/train_lm.py: the same int8
// weights, float32 compute without TF32). Tolerances: logits are stored
// rounded to 1e-5, and float32 sums in another order over four layers
// move a logit of magnitude ~10 by ~1e-4; 2e-3 leaves margin. Bits per
// byte agree to 1e-5 (measured: 3e-7).
func TestMatchesPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the 3.5M-parameter model over 4K bytes")
	}
	raw, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Tokens    int         `json:"tokens"`
		Positions []int       `json:"positions"`
		Logits    [][]float64 `json:"logits"`
		BPB512    float64     `json:"bpb_512"`
		BPB4096   float64     `json:"bpb_4096"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	text := EvalText()
	p, err := m.Forward(context.Background(), text[:ref.Tokens+1], Options{Logits: true})
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, pos := range ref.Positions {
		for b, want := range ref.Logits[i] {
			worst = max(worst, math.Abs(float64(p.Logits[pos*256+b])-want))
		}
	}
	if worst > 2e-3 {
		t.Errorf("logits differ from PyTorch's by up to %.2e > 2e-3", worst)
	}
	if got := p.BitsPerByte(); math.Abs(got-ref.BPB512) > 1e-5 {
		t.Errorf("bits per byte over %d bytes: %v, PyTorch %v", ref.Tokens, got, ref.BPB512)
	}
	p, err = m.Forward(context.Background(), text[:4097], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.BitsPerByte(); math.Abs(got-ref.BPB4096) > 1e-5 {
		t.Errorf("bits per byte over 4096 bytes: %v, PyTorch %v", got, ref.BPB4096)
	}
}

// A planner in every layer: the work counters show what it skipped, and
// the bits per byte move away from dense.
func TestForwardWithPlanner(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	tm := newTestModel(rng, tinyConfig())
	m, err := Load(tm.file)
	if err != nil {
		t.Fatal(err)
	}
	text := make([]byte, 300)
	for i := range text {
		text[i] = "abcdefgh "[rng.IntN(9)]
	}
	ctx := context.Background()
	dense, err := m.Forward(ctx, text, Options{Attention: sparseattn.Options{BlockQ: 16, BlockK: 16}})
	if err != nil {
		t.Fatal(err)
	}
	sparse, err := m.Forward(ctx, text, Options{Attention: sparseattn.Options{BlockQ: 16, BlockK: 16, Planner: window.Planner{Sink: 16, Window: 32}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := dense.Stats().Sparsity(); s != 0 {
		t.Errorf("dense sparsity %v", s)
	}
	if s := sparse.Stats().Sparsity(); s < 0.5 {
		t.Errorf("window sparsity %v, want ≥ 0.5 at 300 tokens with a 48-token view", s)
	}
	if dense.Bits == sparse.Bits {
		t.Error("a 48-token window left the bits unchanged")
	}
}

func TestForwardErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	m, err := Load(newTestModel(rng, tinyConfig()).file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Forward(context.Background(), []byte("a"), Options{}); !errors.Is(err, ErrInput) {
		t.Errorf("one byte: %v, want ErrInput", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Forward(ctx, []byte("abc"), Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	p, err := m.Forward(context.Background(), []byte("abc"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := p.Stacked(); !errors.Is(err, ErrInput) {
		t.Errorf("Stacked without capture: %v, want ErrInput", err)
	}
	if _, err := m.Forward(context.Background(), []byte("abcd"), Options{Attention: sparseattn.Options{Workers: -1}}); !errors.Is(err, sparseattn.ErrOptions) {
		t.Errorf("bad attention options: %v, want sparseattn.ErrOptions", err)
	}
}
