package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/permute"
	"github.com/sparseattn/sparseattn/tensor"
)

// variantFlags choose how every method runs besides its planner: the token
// order of visual tokens (SpargeAttn §3.7) and INT8 Q/K (§3.5).
type variantFlags struct {
	order     string
	grid      string
	orderSeed uint64
	int8QK    bool
	sim       bool
}

func (f *variantFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.order, "order", "none", "token order of the visual tokens: none, hilbert, row, column, time or random; non-causal only. The grid comes from a video/image workload, or --grid for input files")
	fs.StringVar(&f.grid, "grid", "", "input files: visual token grid T,H,W (tokens (t,h,w) at (t·H+h)·W+w, then --text text tokens)")
	fs.Uint64Var(&f.orderSeed, "order-seed", 0, "--order random: shuffle seed")
	fs.BoolVar(&f.int8QK, "int8-qk", false, "run every method on SageAttention-style INT8 Q and K (K smoothed by its mean, one scale per block); errors stay against float dense")
	fs.BoolVar(&f.sim, "sim", false, "print the mean block self-similarity of Q and K (Sim-q, Sim-k) in the input order and, with --order, in that order")
}

// active reports whether methods run otherwise than plain float attention
// in the input order, so dense must be run once more as the reference.
func (f *variantFlags) active(spec permute.Spec) bool {
	return f.int8QK || !spec.Identity()
}

// activeFlags is active before the problem is loaded, from the flags alone.
func (f *variantFlags) activeFlags() bool {
	kind, err := permute.ParseKind(f.order)
	return f.int8QK || err == nil && !(permute.Spec{Kind: kind}).Identity()
}

// suffix labels a method run under the variant, e.g. "+hilbert+int8".
func (f *variantFlags) suffix(spec permute.Spec) string {
	var s string
	if !spec.Identity() {
		s += "+" + string(spec.Kind)
	}
	if f.int8QK {
		s += "+int8"
	}
	return s
}

// apply sets the variant's options.
func (f *variantFlags) apply(opts sparseattn.Options, spec permute.Spec) sparseattn.Options {
	opts.Order = spec
	opts.QuantizeQK = f.int8QK
	return opts
}

// spec resolves --order, --grid and --text against the loaded problem.
func (f *variantFlags) spec(prob *problem, in *inputFlags, fs *flag.FlagSet) (permute.Spec, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	kind, err := permute.ParseKind(f.order)
	if err != nil {
		return permute.Spec{}, fmt.Errorf("%w: --order: %v", errUsage, err)
	}
	if set["order-seed"] && kind != permute.Random {
		return permute.Spec{}, fmt.Errorf("%w: --order-seed applies to --order random only", errUsage)
	}
	spec := permute.Spec{Kind: kind, Seed: f.orderSeed}
	switch {
	case prob.lm != nil:
		if set["grid"] {
			return permute.Spec{}, fmt.Errorf("%w: --grid is for input files; a generated workload brings its own grid", errUsage)
		}
		if kind != permute.None {
			return permute.Spec{}, fmt.Errorf("%w: --order needs a token grid; the lm workload has none (use video or image)", errUsage)
		}
		return spec, nil
	case prob.workload != nil:
		if set["grid"] {
			return permute.Spec{}, fmt.Errorf("%w: --grid is for input files; a generated workload brings its own grid", errUsage)
		}
		if kind == permute.None {
			return spec, nil
		}
		g := prob.workload.Grid
		if g == nil {
			return permute.Spec{}, fmt.Errorf("%w: --order needs a token grid; the %s workload has none (use video or image)", errUsage, prob.workload.Config.Kind)
		}
		spec.T, spec.H, spec.W, spec.Text = g.T, g.H, g.W, prob.workload.Config.TextTokens
	default:
		if set["text"] && !set["grid"] {
			return permute.Spec{}, fmt.Errorf("%w: --text with input files needs --grid", errUsage)
		}
		if !set["grid"] {
			if kind != permute.None {
				return permute.Spec{}, fmt.Errorf("%w: --order with input files needs --grid T,H,W (and --text N for trailing text tokens)", errUsage)
			}
			return spec, nil
		}
		if spec.T, spec.H, spec.W, err = parseGrid(f.grid); err != nil {
			return permute.Spec{}, err
		}
		spec.Text = in.text
		if kind == permute.None {
			return spec, nil
		}
	}
	if err := spec.Validate(); err != nil {
		return permute.Spec{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	n := prob.k.Shape().N
	if n != spec.Len() || prob.q.Shape().N != n {
		return permute.Spec{}, fmt.Errorf("%w: --order over a %d×%d×%d grid plus %d text tokens needs Nq = Nk = %d, have Nq=%d Nk=%d",
			errUsage, spec.T, spec.H, spec.W, spec.Text, spec.Len(), prob.q.Shape().N, n)
	}
	if prob.Causal && !spec.Identity() {
		return permute.Spec{}, fmt.Errorf("%w: --order %s reorders tokens, which changes causal attention; use it with --causal false", errUsage, kind)
	}
	return spec, nil
}

func parseGrid(s string) (t, h, w int, err error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("%w: --grid %q must be T,H,W", errUsage, s)
	}
	var v [3]int
	for i, p := range parts {
		if v[i], err = strconv.Atoi(strings.TrimSpace(p)); err != nil || v[i] < 1 {
			return 0, 0, 0, fmt.Errorf("%w: --grid %q must be three positive integers T,H,W", errUsage, s)
		}
	}
	return v[0], v[1], v[2], nil
}

// similarity is the mean block self-similarity of Q and K (SpargeAttn
// Tables 4 and 9), in the input order and in the chosen order.
type similarity struct {
	BlockQ   int      `json:"block_q"`
	BlockK   int      `json:"block_k"`
	InputQ   float64  `json:"input_sim_q"`
	InputK   float64  `json:"input_sim_k"`
	Order    string   `json:"order,omitempty"`
	OrderedQ *float64 `json:"ordered_sim_q,omitempty"`
	OrderedK *float64 `json:"ordered_sim_k,omitempty"`
	// Per query head (Q) and KV head (K), averaged over the batch.
	InputQHeads   []float64 `json:"input_sim_q_heads"`
	InputKHeads   []float64 `json:"input_sim_k_heads"`
	OrderedQHeads []float64 `json:"ordered_sim_q_heads,omitempty"`
	OrderedKHeads []float64 `json:"ordered_sim_k_heads,omitempty"`
}

// simPair measures Q's and K's similarity per head and overall.
func simPair(ctx context.Context, q, k *tensor.Tensor, blockQ, blockK int) (sq, sk float64, qh, kh []float64, err error) {
	if qh, err = permute.BlockSimilarityPerHead(ctx, q, blockQ); err != nil {
		return 0, 0, nil, nil, err
	}
	if kh, err = permute.BlockSimilarityPerHead(ctx, k, blockK); err != nil {
		return 0, 0, nil, nil, err
	}
	return mean(qh), mean(kh), qh, kh, nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func measureSimilarity(ctx context.Context, q, k *tensor.Tensor, spec permute.Spec, blockQ, blockK int) (*similarity, error) {
	s := &similarity{BlockQ: blockQ, BlockK: blockK}
	var err error
	if s.InputQ, s.InputK, s.InputQHeads, s.InputKHeads, err = simPair(ctx, q, k, blockQ, blockK); err != nil {
		return nil, err
	}
	if spec.Identity() {
		return s, nil
	}
	o, err := spec.Order(k.Shape().N)
	if err != nil {
		return nil, err
	}
	qo, err := o.Apply(ctx, q)
	if err != nil {
		return nil, err
	}
	ko, err := o.Apply(ctx, k)
	if err != nil {
		return nil, err
	}
	sq, sk, qh, kh, err := simPair(ctx, qo, ko, blockQ, blockK)
	if err != nil {
		return nil, err
	}
	s.Order, s.OrderedQ, s.OrderedK, s.OrderedQHeads, s.OrderedKHeads = string(spec.Kind), &sq, &sk, qh, kh
	return s, nil
}
