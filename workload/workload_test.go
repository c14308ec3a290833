package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparseattn/sparseattn/tensor"
)

// small returns a quick configuration of each kind.
func small(kind Kind) Config {
	switch kind {
	case LLM:
		return Config{Kind: LLM, Seed: 11, B: 2, Hq: 4, Hkv: 2, N: 96, D: 16}
	case Video:
		return Config{Kind: Video, Seed: 11, B: 2, Hq: 4, Hkv: 2, D: 16, Frames: 3, Height: 4, Width: 5, TextTokens: 6}
	case Image:
		return Config{Kind: Image, Seed: 11, B: 2, Hq: 4, Hkv: 2, D: 16, Height: 6, Width: 7, TextTokens: 3}
	default:
		return Config{Kind: Random, Seed: 11, B: 2, Hq: 4, Hkv: 2, N: 50, D: 16}
	}
}

func mustGenerate(t testing.TB, cfg Config) *Workload {
	t.Helper()
	w, err := Generate(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", cfg, err)
	}
	return w
}

// digest hashes the raw storage of Q, K and V.
func digest(w *Workload) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, t := range []*tensor.Tensor{w.Q, w.K, w.V} {
		for _, x := range t.Float32s() {
			u := math.Float32bits(x)
			b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			h.Write(b[:])
		}
		for _, x := range t.Bits16() {
			b[0], b[1] = byte(x), byte(x>>8)
			h.Write(b[:2])
		}
	}
	return h.Sum64()
}

func TestKinds(t *testing.T) {
	if got := fmt.Sprint(Kinds()); got != "[llm video image random]" {
		t.Errorf("Kinds() = %s", got)
	}
	for _, tc := range []struct {
		in   string
		want Kind
		ok   bool
	}{
		{"llm", LLM, true}, {" Video ", Video, true}, {"IMAGE", Image, true}, {"random", Random, true},
		{"", "", false}, {"audio", "", false},
	} {
		got, err := ParseKind(tc.in)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("ParseKind(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if !tc.ok && !errors.Is(err, ErrConfig) {
			t.Errorf("ParseKind(%q) error = %v; want ErrConfig", tc.in, err)
		}
	}
}

func TestDeterminism(t *testing.T) {
	for _, kind := range Kinds() {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
			t.Run(fmt.Sprintf("%s/%v", kind, dt), func(t *testing.T) {
				cfg := small(kind)
				cfg.DType = dt
				a, b := mustGenerate(t, cfg), mustGenerate(t, cfg)
				if digest(a) != digest(b) {
					t.Fatal("same config gave different tensors")
				}
				if r := mustGenerate(t, a.Config); digest(r) != digest(a) {
					t.Fatal("regenerating from the resolved Config gave different tensors")
				}
				cfg.Seed++
				if c := mustGenerate(t, cfg); digest(c) == digest(a) {
					t.Fatal("different seeds gave identical tensors")
				}
			})
		}
	}
}

// TestDeterminismAcrossProcs checks that the result does not depend on how
// many goroutines generate it.
func TestDeterminismAcrossProcs(t *testing.T) {
	cfg := small(LLM)
	cfg.B, cfg.Hq, cfg.Hkv = 3, 8, 2
	want := digest(mustGenerate(t, cfg))
	old := runtime.GOMAXPROCS(1)
	got := digest(mustGenerate(t, cfg))
	runtime.GOMAXPROCS(7)
	got7 := digest(mustGenerate(t, cfg))
	runtime.GOMAXPROCS(old)
	if got != want || got7 != want {
		t.Fatalf("digests differ with GOMAXPROCS: default %x, 1 %x, 7 %x", want, got, got7)
	}
}

// TestGolden pins the exact bits of small workloads. It fails if a change
// alters the generators (update the constants deliberately then) or if a
// platform computes different bits — which the package promises never
// happens. Checked on linux/amd64 (also with GOAMD64=v3, where the
// compiler may fuse multiply-adds) and linux/386.
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		want uint64
	}{
		{LLM, 0x2aef02f815961356},
		{Video, 0xcadd966b2dfbe88d},
		{Image, 0xbda5d1867c6d3f43},
		{Random, 0x769cfc1987ffc037},
	} {
		if got := digest(mustGenerate(t, small(tc.kind))); got != tc.want {
			t.Errorf("%s: digest %#x, want %#x", tc.kind, got, tc.want)
		}
	}
}

func TestShapesAndOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		hkv, n int
		causal bool
		grid   *Grid
	}{
		{"llm gqa", Config{Kind: LLM, B: 2, Hq: 6, Hkv: 3, N: 64, D: 8}, 3, 64, true, nil},
		{"llm mha", Config{Kind: LLM, B: 1, Hq: 3, N: 40, D: 10, DType: tensor.Float16, Layout: tensor.BNHD}, 3, 40, true, nil},
		{"llm mqa", Config{Kind: LLM, B: 1, Hq: 4, Hkv: 1, N: 33, D: 2}, 1, 33, true, nil},
		{"llm single head", Config{Kind: LLM, B: 1, Hq: 1, N: 8, D: 4, SinkTokens: 2, Window: 3, HeavyHitters: 1, NeedleKey: 5}, 1, 8, true, nil},
		{"video derived N", Config{Kind: Video, B: 1, Hq: 4, Hkv: 2, D: 12, Frames: 2, Height: 3, Width: 4, TextTokens: 5, Layout: tensor.BNHD}, 2, 29, false, &Grid{2, 3, 4}},
		{"video given N", Config{Kind: Video, B: 1, Hq: 2, N: 24, D: 7, Frames: 2, Height: 3, Width: 4, DType: tensor.BFloat16}, 2, 24, false, &Grid{2, 3, 4}},
		{"video tiny D", Config{Kind: Video, B: 1, Hq: 1, D: 1, Frames: 1, Height: 1, Width: 1}, 1, 1, false, &Grid{1, 1, 1}},
		{"image", Config{Kind: Image, B: 3, Hq: 2, Hkv: 1, D: 6, Frames: 9, Height: 5, Width: 3}, 1, 15, false, &Grid{1, 5, 3}},
		{"random", Config{Kind: Random, B: 1, Hq: 4, Hkv: 4, N: 10, D: 3, DType: tensor.Float16}, 4, 10, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := mustGenerate(t, tc.cfg)
			c := tc.cfg
			dt := c.DType
			if dt == 0 {
				dt = tensor.Float32
			}
			wantQ := tensor.Shape{B: c.B, H: c.Hq, N: tc.n, D: c.D}
			wantK := tensor.Shape{B: c.B, H: tc.hkv, N: tc.n, D: c.D}
			for _, x := range []struct {
				name  string
				t     *tensor.Tensor
				shape tensor.Shape
			}{{"Q", w.Q, wantQ}, {"K", w.K, wantK}, {"V", w.V, wantK}} {
				if x.t.Shape() != x.shape || x.t.DType() != dt || x.t.Layout() != c.Layout {
					t.Errorf("%s: %v %v %v, want %v %v %v", x.name, x.t.Shape(), x.t.DType(), x.t.Layout(), x.shape, dt, c.Layout)
				}
				if err := x.t.CheckFinite(x.name); err != nil {
					t.Error(err)
				}
			}
			if _, err := tensor.Validate(w.Q, w.K, w.V); err != nil {
				t.Error(err)
			}
			if w.Causal != tc.causal {
				t.Errorf("Causal = %v", w.Causal)
			}
			if w.Config.Hkv != tc.hkv || w.Config.N != tc.n || w.Config.DType != dt {
				t.Errorf("resolved Config: Hkv %d N %d DType %v", w.Config.Hkv, w.Config.N, w.Config.DType)
			}
			if (w.Grid == nil) != (tc.grid == nil) || (w.Grid != nil && *w.Grid != *tc.grid) {
				t.Errorf("Grid = %v, want %v", w.Grid, tc.grid)
			}
			if w.Description == "" {
				t.Error("empty Description")
			}
			if c.Kind == LLM {
				nd := w.Needle
				if nd == nil || nd.QueryIndex != tc.n-1 || nd.KeyIndex < w.Config.SinkTokens || nd.KeyIndex >= nd.QueryIndex || len(nd.Heads) == 0 {
					t.Fatalf("Needle = %+v", nd)
				}
				if c.NeedleKey != 0 && nd.KeyIndex != c.NeedleKey {
					t.Errorf("NeedleKey %d ignored: %d", c.NeedleKey, nd.KeyIndex)
				}
			} else if w.Needle != nil {
				t.Errorf("Needle = %+v for %s", w.Needle, c.Kind)
			}
			if c.Kind != Random && len(w.HeadPatterns) != c.Hq {
				t.Errorf("HeadPatterns = %q", w.HeadPatterns)
			}
		})
	}
}

// TestGQASharing checks that every query head of a KV group finds the
// group's shared sink keys: averaged over queries, each head puts more than
// twice the uniform share of its attention on the first four keys.
func TestGQASharing(t *testing.T) {
	w := mustGenerate(t, Config{Kind: LLM, Seed: 3, B: 1, Hq: 8, Hkv: 2, N: 256, D: 64})
	for h := range 8 {
		a := loadHead(w, 0, h)
		var sink, unif float64
		for i := 128; i < 256; i++ {
			p := probs(a.q[i], a.k, i, true, nil)
			sink += p[0] + p[1] + p[2] + p[3]
			unif += 4 / float64(i+1)
		}
		if sink < 2*unif {
			t.Errorf("head %d: sink mass %.4f not above twice uniform %.4f", h, sink/128, unif/128)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ok := Config{Kind: LLM, B: 1, Hq: 4, Hkv: 2, N: 64, D: 16}
	vid := Config{Kind: Video, B: 1, Hq: 2, D: 8, Frames: 2, Height: 2, Width: 2}
	with := func(base Config, f func(*Config)) Config { f(&base); return base }
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"empty kind", with(ok, func(c *Config) { c.Kind = "" }), "Kind"},
		{"unknown kind", with(ok, func(c *Config) { c.Kind = "audio" }), "Kind"},
		{"zero B", with(ok, func(c *Config) { c.B = 0 }), "B"},
		{"negative Hq", with(ok, func(c *Config) { c.Hq = -1 }), "Hq"},
		{"negative Hkv", with(ok, func(c *Config) { c.Hkv = -2 }), "Hkv"},
		{"Hkv does not divide", with(ok, func(c *Config) { c.Hkv = 3 }), "Hkv"},
		{"zero N", with(ok, func(c *Config) { c.N = 0 }), "N"},
		{"negative N", with(ok, func(c *Config) { c.N = -5 }), "N"},
		{"zero D", with(ok, func(c *Config) { c.D = 0 }), "D"},
		{"huge D", with(ok, func(c *Config) { c.D = 4096 }), "D"},
		{"odd D llm", with(ok, func(c *Config) { c.D = 15 }), "D"},
		{"tiny N llm", with(ok, func(c *Config) { c.N = 7 }), "N"},
		{"bad dtype", with(ok, func(c *Config) { c.DType = 9 }), "DType"},
		{"bad layout", with(ok, func(c *Config) { c.Layout = 5 }), "Layout"},
		{"bad base", with(ok, func(c *Config) { c.RoPEBase = 0.5 }), "RoPEBase"},
		{"needle in sinks", with(ok, func(c *Config) { c.NeedleKey = 2 }), "NeedleKey"},
		{"needle at end", with(ok, func(c *Config) { c.NeedleKey = 63 }), "NeedleKey"},
		{"too many sinks", with(ok, func(c *Config) { c.SinkTokens = 40 }), "SinkTokens"},
		{"too many hitters", with(ok, func(c *Config) { c.HeavyHitters = 60 }), "HeavyHitters"},
		{"negative window", with(ok, func(c *Config) { c.Window = -1 }), "Window"},
		{"absurd llm", with(ok, func(c *Config) { c.N, c.Hq, c.Hkv, c.D = 1<<22, 64, 8, 128 }), "size"},
		{"overflowing llm", with(ok, func(c *Config) { c.N, c.B = math.MaxInt/2, 4 }), "size"},
		{"video no grid", with(vid, func(c *Config) { c.Frames = 0 }), "Frames/Height/Width"},
		{"video negative text", with(vid, func(c *Config) { c.TextTokens = -1 }), "TextTokens"},
		{"video N mismatch", with(vid, func(c *Config) { c.N = 9 }), "N"},
		{"video N mismatch text", with(vid, func(c *Config) { c.N, c.TextTokens = 8, 1 }), "N"},
		{"video absurd grid", with(vid, func(c *Config) { c.Frames, c.Height, c.Width = 1<<20, 1<<20, 1<<20 }), "Frames/Height/Width"},
		{"video absurd tensor", with(vid, func(c *Config) { c.Frames, c.Height, c.Width, c.Hq, c.D = 64, 256, 256, 16, 128 }), "size"},
		{"image no grid", Config{Kind: Image, B: 1, Hq: 1, D: 8, Height: 3}, "Height/Width"},
		{"random zero N", Config{Kind: Random, B: 1, Hq: 1, D: 8}, "N"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Generate(context.Background(), tc.cfg)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Generate = %v, %v; want an ErrConfig error", w, err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("error %q: want a *ConfigError for field %q", err, tc.field)
			}
		})
	}
}

// cancelAfter is a context whose Err starts reporting Canceled after a
// number of calls, to cancel generation part-way deterministically.
type cancelAfter struct {
	context.Context
	left atomic.Int64
}

func (c *cancelAfter) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Generate(ctx, Default()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before start: %v", err)
	}
	for _, kind := range Kinds() {
		// Generate checks ctx once up front, runJobs once per job per
		// worker; cancel after a few heads.
		c := &cancelAfter{Context: context.Background()}
		c.left.Store(4)
		w, err := Generate(c, small(kind))
		if !errors.Is(err, context.Canceled) || w != nil {
			t.Errorf("%s cancelled part-way: %v, %v", kind, w, err)
		}
	}
}

func TestNeedleRecallErrors(t *testing.T) {
	w := mustGenerate(t, small(Video))
	if _, err := w.NeedleRecall(w.Q); !errors.Is(err, ErrNoNeedle) {
		t.Errorf("video: %v, want ErrNoNeedle", err)
	}
	l := mustGenerate(t, small(LLM))
	if _, err := l.NeedleRecall(l.K); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("mis-shaped output: %v, want ErrShape", err)
	}
	if _, err := l.NeedleRecall(nil); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("nil output: %v, want ErrShape", err)
	}
}

// TestDefaultSpeed guards against gross slowdowns of the default
// workload, which `sparseattn eval` generates on every run. It takes about
// 0.3 s on an idle 2-core machine; the bound is loose because test
// machines are shared.
func TestDefaultSpeed(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing is meaningless under -short or -race")
	}
	start := time.Now()
	mustGenerate(t, Default())
	d := time.Since(start)
	t.Logf("Default() generated in %v", d)
	if d > 10*time.Second {
		t.Errorf("Default() took %v; it must stay well under 2 s on an idle 2-core machine", d)
	}
}

func BenchmarkGenerateDefault(b *testing.B) {
	for b.Loop() {
		if _, err := Generate(context.Background(), Default()); err != nil {
			b.Fatal(err)
		}
	}
}
