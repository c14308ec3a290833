package main

// The inputs of eval, compare, tune and viz: which Q/K/V a run measures
// (an embedded workload or tensor files) and the problem loaded from them.

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/tensorfile"
	"github.com/sparseattn/sparseattn/workload"
)

// inputFlags selects and shapes the Q/K/V to evaluate.
type inputFlags struct {
	kind                string
	lmText              string
	lmOffset            int // lm workload: the first byte of the text read (tune's i-th input reads window i)
	seed                uint64
	b, heads, kvHeads   int
	n, d                int
	dtype               string
	frames, height, wid int
	text                int
	input               string
	qPath, kPath, vPath string
	qName, kName, vName string
	layout              string
	causal              string
}

func (in *inputFlags) register(fs *flag.FlagSet) { in.registerText(fs, "eval") }

// registerText is register with another default for --lm-text.
func (in *inputFlags) registerText(fs *flag.FlagSet, lmText string) {
	def := workload.Default()
	fs.StringVar(&in.kind, "workload", lmKind, "workload: lm (real attention of the embedded LM), or a synthetic llm, video, image or random")
	fs.StringVar(&in.lmText, "lm-text", lmText, "lm workload: the text the model reads: eval, calib (the held-out texts that ship with it) or a file")
	fs.Uint64Var(&in.seed, "seed", def.Seed, "workload seed")
	fs.IntVar(&in.b, "batch", def.B, "workload batch size")
	fs.IntVar(&in.heads, "heads", def.Hq, "workload query heads")
	fs.IntVar(&in.kvHeads, "kv-heads", def.Hkv, "workload KV heads (divides --heads)")
	fs.IntVar(&in.n, "n", def.N, "workload tokens (video/image: 0 derives it from the grid)")
	fs.IntVar(&in.d, "d", def.D, "workload head dim")
	fs.StringVar(&in.dtype, "dtype", "float32", "workload storage type: float32, float16 or bfloat16")
	fs.IntVar(&in.frames, "frames", 8, "video: frames")
	fs.IntVar(&in.height, "height", 16, "video/image: grid height in tokens")
	fs.IntVar(&in.wid, "width", 16, "video/image: grid width in tokens")
	fs.IntVar(&in.text, "text", 0, "video/image: text tokens appended")
	fs.StringVar(&in.input, "input", "", "a .safetensors or .npz file holding Q, K and V")
	fs.StringVar(&in.qPath, "q", "", "a .npy (or other tensor file) holding Q")
	fs.StringVar(&in.kPath, "k", "", "a .npy file holding K")
	fs.StringVar(&in.vPath, "v", "", "a .npy file holding V")
	fs.StringVar(&in.qName, "q-name", "q", "name of Q inside --input")
	fs.StringVar(&in.kName, "k-name", "k", "name of K inside --input")
	fs.StringVar(&in.vName, "v-name", "v", "name of V inside --input")
	fs.StringVar(&in.layout, "layout", "bhnd", "layout of input files: bhnd ([B,H,N,D], SDPA) or bnhd ([B,N,H,D], FlashAttention)")
	fs.StringVar(&in.causal, "causal", "auto", "causal masking: true, false, or auto (the workload's own; false for files)")
}

// Flags that shape generated workloads, and of those the ones for token grids.
var (
	generatorFlags = []string{"seed", "batch", "heads", "kv-heads", "n", "d", "dtype"}
	gridFlags      = []string{"frames", "height", "width", "text"}
)

// problem is a loaded attention input.
type problem struct {
	Source   string
	q, k, v  *tensor.Tensor
	Causal   bool
	workload *workload.Workload // nil for files and the lm workload
	lm       *lmProblem         // the lm workload's model and text, else nil
}

// loadValid loads the problem and validates its tensors, returning their
// geometry.
func (in *inputFlags) loadValid(ctx context.Context, fs *flag.FlagSet) (*problem, tensor.Geometry, error) {
	prob, err := in.load(ctx, fs)
	if err != nil {
		return nil, tensor.Geometry{}, err
	}
	g, err := tensor.Validate(prob.q, prob.k, prob.v)
	if err != nil {
		return nil, tensor.Geometry{}, err
	}
	return prob, g, nil
}

func (in *inputFlags) load(ctx context.Context, fs *flag.FlagSet) (*problem, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fromFiles := in.input != "" || in.qPath != "" || in.kPath != "" || in.vPath != ""
	var p problem
	if fromFiles {
		if set["workload"] || set["lm-text"] {
			return nil, fmt.Errorf("%w: use either --workload (and --lm-text) or --input/--q/--k/--v, not both", errUsage)
		}
		for _, name := range append(generatorFlags, gridFlags...) {
			if name == "text" && set[name] && !set["grid"] {
				return nil, fmt.Errorf("%w: --text with input files needs --grid T,H,W", errUsage)
			}
			if set[name] && name != "text" {
				return nil, fmt.Errorf("%w: --%s shapes a generated workload; it does not apply to --input/--q/--k/--v", errUsage, name)
			}
		}
		layout, err := tensor.ParseLayout(in.layout)
		if err != nil {
			return nil, fmt.Errorf("%w: --layout: %v", errUsage, err)
		}
		var ts []*tensor.Tensor
		if in.input != "" {
			arrays, err := tensorfile.Load(in.input)
			if err != nil {
				return nil, err
			}
			if ts, err = tensorfile.Pick(arrays, layout, in.qName, in.kName, in.vName); err != nil {
				return nil, fmt.Errorf("%s: %w", in.input, err)
			}
			p.Source = filepath.Base(in.input)
		} else {
			if in.qPath == "" || in.kPath == "" || in.vPath == "" {
				return nil, fmt.Errorf("%w: --q, --k and --v must all be given", errUsage)
			}
			for _, path := range []string{in.qPath, in.kPath, in.vPath} {
				arrays, err := tensorfile.Load(path)
				if err != nil {
					return nil, err
				}
				if len(arrays) != 1 {
					return nil, fmt.Errorf("%s holds %d tensors; use --input with --q-name/--k-name/--v-name", path, len(arrays))
				}
				for name := range arrays {
					t, err := tensorfile.Pick(arrays, layout, name)
					if err != nil {
						return nil, err
					}
					ts = append(ts, t[0])
				}
			}
			p.Source = filepath.Base(in.qPath)
		}
		p.q, p.k, p.v = ts[0], ts[1], ts[2]
	} else if in.kind == lmKind {
		for _, name := range append(generatorFlags, gridFlags...) {
			if set[name] && name != "n" {
				return nil, fmt.Errorf("%w: --%s shapes a synthetic workload; the lm workload's shape is the model's (add --workload llm for a synthetic one)", errUsage, name)
			}
		}
		lp, err := loadLM(ctx, in.lmOffset, in.n, in.lmText)
		if err != nil {
			return nil, err
		}
		p = *lp
	} else {
		if set["lm-text"] {
			return nil, fmt.Errorf("%w: --lm-text applies to --workload lm", errUsage)
		}
		cfg := workload.Default()
		kind, err := workload.ParseKind(in.kind)
		if err != nil {
			return nil, fmt.Errorf("%w: --workload: %v", errUsage, err)
		}
		dtype, err := tensor.ParseDType(in.dtype)
		if err != nil {
			return nil, fmt.Errorf("%w: --dtype: %v", errUsage, err)
		}
		cfg.Kind, cfg.Seed, cfg.B, cfg.Hq, cfg.Hkv, cfg.D, cfg.DType = kind, in.seed, in.b, in.heads, in.kvHeads, in.d, dtype
		cfg.N = in.n
		if kind != workload.Video && kind != workload.Image {
			for _, name := range gridFlags {
				if set[name] {
					return nil, fmt.Errorf("%w: --%s applies to video and image workloads, not %s", errUsage, name, kind)
				}
			}
		}
		if kind == workload.Video || kind == workload.Image {
			if !set["n"] {
				cfg.N = 0
			}
			cfg.Frames, cfg.Height, cfg.Width, cfg.TextTokens = in.frames, in.height, in.wid, in.text
		}
		w, err := workload.Generate(ctx, cfg)
		if err != nil {
			return nil, err
		}
		p = problem{Source: string(kind), q: w.Q, k: w.K, v: w.V, Causal: w.Causal, workload: w}
	}
	switch in.causal {
	case "auto":
	case "true":
		p.Causal = true
	case "false":
		p.Causal = false
	default:
		return nil, fmt.Errorf("%w: --causal must be true, false or auto, not %q", errUsage, in.causal)
	}
	return &p, nil
}
