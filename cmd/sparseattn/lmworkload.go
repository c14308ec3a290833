package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/evaluate"
	"github.com/sparseattn/sparseattn/workload/lm"
)

// lmKind is the --workload name of the real-attention workload: the
// embedded byte-level LM (package workload/lm) over a text.
const lmKind = "lm"

// lmProblem is what a problem keeps of the LM workload to score methods at
// the level of the model: the model and the text it read.
type lmProblem struct {
	model *lm.Model
	text  []byte
}

// lmText returns the text --lm-text names: "eval" or "calib" (the two
// held-out texts that ship with the model) or a file path.
func lmText(name string) ([]byte, string, error) {
	switch name {
	case "eval":
		return lm.EvalText(), "eval text", nil
	case "calib":
		return lm.CalibText(), "calib text", nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, "", err
	}
	return b, filepath.Base(name), nil
}

// loadLM runs the embedded LM densely over n bytes of the text from byte
// off on and returns every layer's Q, K (after RoPE) and V as one causal problem,
// layers stacked along the head axis.
func loadLM(ctx context.Context, off, n int, textName string) (*problem, error) {
	text, label, err := lmText(textName)
	if err != nil {
		return nil, err
	}
	if n < 2 || off < 0 || off+n > len(text) {
		if off > 0 {
			return nil, fmt.Errorf("%w: --n %d from byte %d: the lm workload reads 2 to %d bytes of the %s (fewer or shorter inputs fit)", errUsage, n, off, len(text), label)
		}
		return nil, fmt.Errorf("%w: --n %d: the lm workload reads 2 to %d bytes of the %s", errUsage, n, len(text), label)
	}
	m, err := lm.Default()
	if err != nil {
		return nil, err
	}
	text = text[off : off+n]
	pass, err := m.Forward(ctx, text, lm.Options{Capture: true})
	if err != nil {
		return nil, err
	}
	q, k, v, err := pass.Stacked()
	if err != nil {
		return nil, err
	}
	c := m.Config()
	return &problem{
		Source: fmt.Sprintf("lm (real attention: %d layers × %d heads of the embedded byte-level LM over %d bytes of the %s%s)", c.Layers, c.Heads, n, label, from(off)),
		q:      q, k: k, v: v, Causal: true,
		lm: &lmProblem{model: m, text: text},
	}, nil
}

// bitsPerByte runs the model over its text with opts' planner (and
// variant) in every layer, on the executor and tiling rf selects, and
// returns its bits per byte (evaluate.BitsPerByte). The softmax scale is
// always the model's own.
func (p *lmProblem) bitsPerByte(ctx context.Context, rf runFlags, opts sparseattn.Options) (float64, error) {
	opts.Workers, opts.BlockQ, opts.BlockK = rf.workers, rf.blockQ, rf.blockK
	opts.Device, opts.Logf = sparseattn.Device(rf.device), rf.logf
	return evaluate.BitsPerByte(ctx, p.model, p.text, opts)
}

// from says where a text window starts, if not at the beginning.
func from(off int) string {
	if off == 0 {
		return ""
	}
	return fmt.Sprintf(" from byte %d", off)
}

// checkLMWindows checks, before any model runs, that count windows of
// --n bytes fit in the lm workload's text.
func checkLMWindows(in inputFlags, count int) error {
	text, label, err := lmText(in.lmText)
	if err != nil {
		return err
	}
	if count*in.n > len(text) {
		return fmt.Errorf("%w: %d inputs of --n %d bytes need %d bytes; the %s has %d (fewer or shorter inputs fit)", errUsage, count, in.n, count*in.n, label, len(text))
	}
	return nil
}
