package workload

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/sparseattn/sparseattn/tensor"
)

// Kind names a family of synthetic attention inputs.
type Kind string

// The workload kinds. See the package documentation for what each mimics.
const (
	LLM    Kind = "llm"    // causal language-model prefill
	Video  Kind = "video"  // bidirectional video diffusion transformer
	Image  Kind = "image"  // bidirectional image diffusion transformer
	Random Kind = "random" // i.i.d. Gaussian Q, K, V: no structure at all
)

// Kinds returns every workload kind, in a fixed order. The slice is fresh;
// callers may modify it.
func Kinds() []Kind { return []Kind{LLM, Video, Image, Random} }

// ParseKind maps a name (any case, surrounding spaces ignored) to a Kind.
// The error wraps ErrConfig.
func ParseKind(s string) (Kind, error) {
	k := Kind(strings.ToLower(strings.TrimSpace(s)))
	for _, c := range Kinds() {
		if k == c {
			return c, nil
		}
	}
	return "", &ConfigError{Field: "Kind", Reason: fmt.Sprintf("unknown workload kind %q (want llm, video, image or random)", s)}
}

// ErrConfig is the sentinel every configuration error wraps; test with
// errors.Is(err, ErrConfig).
var ErrConfig = errors.New("workload: invalid config")

// ErrNoNeedle is returned by NeedleRecall for a workload without a planted
// needle (every kind but llm).
var ErrNoNeedle = errors.New("workload: no planted needle")

// ConfigError says which Config field is wrong and why. It wraps ErrConfig.
type ConfigError struct {
	Field  string // the offending Config field, e.g. "Hkv"
	Reason string // what is wrong and what would be accepted
}

// Error reports the field and the reason.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("workload: invalid config: %s: %s", e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrConfig) true.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func cfgErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// MaxTensorElements bounds the elements of each generated tensor (2^31).
// Larger requests are rejected as a configuration error rather than
// attempted.
const MaxTensorElements int64 = 1 << 31

// Config selects and sizes a workload. Generate is a pure function of it:
// the same Config yields bit-identical tensors on every run and platform.
//
// Zero values of the optional fields select the documented defaults;
// fields that do not apply to the chosen Kind are ignored.
type Config struct {
	// Kind selects the generator.
	Kind Kind
	// Seed selects the random draw; any value, including 0, is valid.
	Seed uint64

	// B is the batch size, Hq the number of query heads and Hkv the number
	// of key/value heads; Hkv must divide Hq (grouped-query attention).
	// Hkv = 0 means Hkv = Hq.
	B, Hq, Hkv int

	// N is the number of tokens and D the head dimension (of Q, K and V).
	// For video and image N may be 0, in which case it is derived from the
	// grid: Frames·Height·Width + TextTokens (Height·Width + TextTokens for
	// image). If both are given they must agree. llm needs an even D
	// (rotary embedding pairs dimensions) and N >= 8.
	N, D int

	// DType is the storage type of the outputs; 0 means tensor.Float32.
	DType tensor.DType
	// Layout is the memory order of the outputs (the zero value is BHND).
	Layout tensor.Layout

	// Frames, Height and Width give the video token grid T×H×W (the
	// latent grid after patchifying). Image uses Height×Width and ignores
	// Frames.
	Frames, Height, Width int
	// TextTokens, for video and image, appends that many text tokens after
	// the visual tokens, as in joint text-visual (MMDiT) attention.
	TextTokens int

	// RoPEBase is the rotary-embedding base for llm, video and image;
	// 0 means 10000.
	RoPEBase float64

	// SinkTokens (llm) is the number of leading attention-sink tokens;
	// 0 means 4 (fewer when N is tiny).
	SinkTokens int
	// Window (llm) is the distance, in tokens, over which the strongly
	// local heads' positional bias decays to nothing; 0 means 64.
	Window int
	// HeavyHitters (llm) is the number of heavy-hitter key positions that
	// form vertical stripes; 0 means max(4, 16·sqrt(N/4096)) (fewer when N
	// is tiny).
	HeavyHitters int
	// NeedleKey (llm) is the position of the planted needle key; 0 means
	// N/3. It must lie in [SinkTokens, N-2]; the needle query is always the
	// last token, N-1.
	NeedleKey int
}

// Default is the built-in workload for `sparseattn eval` without
// arguments: an 8-query-head, 2-KV-head llm prefill of 4096 tokens with
// head dimension 128 in float32 — Llama-style GQA at a length where sparse
// attention starts to pay, yet small enough to generate in well under a
// second.
func Default() Config {
	return Config{
		Kind:   LLM,
		Seed:   1,
		B:      1,
		Hq:     8,
		Hkv:    2,
		N:      4096,
		D:      128,
		DType:  tensor.Float32,
		Layout: tensor.BHND,
	}
}

// resolved is a validated Config with every default filled in.
type resolved struct {
	Config
	T, H, W int // grid: T = 1 for image, 0 for llm and random
	nVis    int // visual tokens (video, image)
	sinks   int // llm
	window  int
	heavy   int
	needleK int
	base    float64
}

// resolve validates cfg and fills in defaults.
func resolve(cfg Config) (resolved, error) {
	r := resolved{Config: cfg}
	k, err := ParseKind(string(cfg.Kind))
	if err != nil {
		return r, err
	}
	r.Kind = k
	if cfg.B <= 0 {
		return r, cfgErr("B", "batch size must be positive, got %d", cfg.B)
	}
	if cfg.Hq <= 0 {
		return r, cfgErr("Hq", "number of query heads must be positive, got %d", cfg.Hq)
	}
	if cfg.Hkv < 0 {
		return r, cfgErr("Hkv", "number of KV heads must be positive (or 0 for Hkv = Hq), got %d", cfg.Hkv)
	}
	if r.Hkv == 0 {
		r.Hkv = r.Hq
	}
	if r.Hq%r.Hkv != 0 {
		return r, cfgErr("Hkv", "%d KV heads do not divide %d query heads (GQA needs Hq %% Hkv == 0)", r.Hkv, r.Hq)
	}
	if cfg.D <= 0 {
		return r, cfgErr("D", "head dimension must be positive, got %d", cfg.D)
	}
	if cfg.D > tensor.MaxHeadDim {
		return r, cfgErr("D", "head dimension %d exceeds %d", cfg.D, tensor.MaxHeadDim)
	}
	if cfg.N < 0 {
		return r, cfgErr("N", "token count must be positive, got %d", cfg.N)
	}
	if r.DType == 0 {
		r.DType = tensor.Float32
	}
	if !r.DType.Valid() {
		return r, cfgErr("DType", "unsupported storage type %v", cfg.DType)
	}
	if r.Layout != tensor.BHND && r.Layout != tensor.BNHD {
		return r, cfgErr("Layout", "unsupported layout %v", cfg.Layout)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Frames", cfg.Frames}, {"Height", cfg.Height}, {"Width", cfg.Width},
		{"TextTokens", cfg.TextTokens}, {"SinkTokens", cfg.SinkTokens},
		{"Window", cfg.Window}, {"HeavyHitters", cfg.HeavyHitters}, {"NeedleKey", cfg.NeedleKey},
	} {
		if f.v < 0 {
			return r, cfgErr(f.name, "must not be negative, got %d", f.v)
		}
	}
	r.base = cfg.RoPEBase
	if r.base == 0 {
		r.base = 10000
	}
	if !(r.base > 1 && r.base < 1e12) {
		return r, cfgErr("RoPEBase", "rotary base must be in (1, 1e12), got %v", cfg.RoPEBase)
	}

	switch r.Kind {
	case Video, Image:
		r.T, r.H, r.W = cfg.Frames, cfg.Height, cfg.Width
		if r.Kind == Image {
			r.T = 1
		}
		if r.T <= 0 || r.H <= 0 || r.W <= 0 {
			if r.Kind == Image {
				return r, cfgErr("Height/Width", "image needs a positive Height×Width grid, got %d×%d", cfg.Height, cfg.Width)
			}
			return r, cfgErr("Frames/Height/Width", "video needs a positive Frames×Height×Width grid, got %d×%d×%d", cfg.Frames, cfg.Height, cfg.Width)
		}
		nv, ok := mulCapped(MaxTensorElements, r.T, r.H, r.W)
		if !ok || nv+int64(cfg.TextTokens) > MaxTensorElements {
			return r, cfgErr("Frames/Height/Width", "grid %d×%d×%d plus %d text tokens is absurdly large", r.T, r.H, r.W, cfg.TextTokens)
		}
		r.nVis = int(nv)
		n := r.nVis + cfg.TextTokens
		if cfg.N != 0 && cfg.N != n {
			return r, cfgErr("N", "N = %d disagrees with the grid: %d×%d×%d visual + %d text tokens = %d (set N to 0 to derive it)",
				cfg.N, r.T, r.H, r.W, cfg.TextTokens, n)
		}
		r.N = n
	case LLM, Random:
		if cfg.N <= 0 {
			return r, cfgErr("N", "token count must be positive, got %d", cfg.N)
		}
	}

	for _, t := range []struct {
		name string
		h    int
	}{{"Q", r.Hq}, {"K/V", r.Hkv}} {
		if _, ok := mulCapped(MaxTensorElements, r.B, t.h, r.N, r.D); !ok {
			return r, cfgErr("size", "%s would have B·H·N·D = %d·%d·%d·%d elements, more than 2^31", t.name, r.B, t.h, r.N, r.D)
		}
	}

	if r.Kind == LLM {
		if r.D%2 != 0 {
			return r, cfgErr("D", "llm needs an even head dimension for rotary embeddings, got %d", r.D)
		}
		if r.N < 8 {
			return r, cfgErr("N", "llm needs N >= 8 to place sinks, a local window and a needle, got %d", r.N)
		}
		r.sinks = cfg.SinkTokens
		if r.sinks == 0 {
			r.sinks = 4
		}
		if r.sinks > r.N/4 {
			if cfg.SinkTokens != 0 {
				return r, cfgErr("SinkTokens", "%d sink tokens leave too little room in %d tokens (at most N/4)", cfg.SinkTokens, r.N)
			}
			r.sinks = max(1, r.N/4)
		}
		r.window = cfg.Window
		if r.window == 0 {
			r.window = 64
		}
		r.heavy = cfg.HeavyHitters
		if r.heavy == 0 {
			r.heavy = max(4, int(16*math.Sqrt(float64(r.N)/4096)))
		}
		if r.heavy > (r.N-r.sinks-2)/2 {
			if cfg.HeavyHitters != 0 {
				return r, cfgErr("HeavyHitters", "%d heavy hitters do not fit in %d tokens (at most (N-SinkTokens-2)/2)", cfg.HeavyHitters, r.N)
			}
			r.heavy = (r.N - r.sinks - 2) / 2
		}
		r.needleK = cfg.NeedleKey
		if r.needleK == 0 {
			r.needleK = max(r.N/3, r.sinks)
		}
		if r.needleK < r.sinks || r.needleK > r.N-2 {
			return r, cfgErr("NeedleKey", "needle key %d must lie in [SinkTokens, N-2] = [%d, %d]", r.needleK, r.sinks, r.N-2)
		}
	}
	return r, nil
}

// mulCapped multiplies positive factors and reports whether the product
// stays at or below limit (computed in int64, so it cannot overflow).
func mulCapped(limit int64, factors ...int) (int64, bool) {
	p := int64(1)
	for _, f := range factors {
		if f <= 0 || p > limit/int64(f) {
			return 0, false
		}
		p *= int64(f)
	}
	return p, true
}
