package lm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// MaxTokens bounds the text one Forward call reads (1M bytes): its
// activations then stay under a few GiB.
const MaxTokens = 1 << 20

// ErrInput is the sentinel for a text Forward cannot run on: fewer than
// two bytes (nothing to predict) or more than MaxTokens.
var ErrInput = errors.New("lm: invalid input")

// Model is a loaded byte-level transformer LM: pre-norm (RMSNorm) blocks of
// multi-head (or grouped-query) causal attention with RoPE on Q and K,
// then a SwiGLU MLP; the byte embedding is tied to the output projection.
// Its weights are dequantized to float32 at load; a Model is read-only
// and safe for concurrent use.
type Model struct {
	cfg       Config
	emb       []float32 // [DModel, Vocab]: the embedding, transposed
	layers    []layer
	finalNorm []float32
}

// layer holds one block's weights; matrices are transposed, [in, out].
type layer struct {
	attnNorm, mlpNorm []float32
	wq, wk, wv, wo    []float32
	w1, w3, w2        []float32
}

// Config returns the model's architecture.
func (m *Model) Config() Config { return m.cfg }

// Options choose how Forward runs attention and what it keeps.
type Options struct {
	// Attention configures every layer's attention call: its Planner
	// (nil: dense), Executor, block sizes and workers. Causal is always
	// on; a zero Scale means 1/sqrt(HeadDim), as in training.
	Attention sparseattn.Options
	// Capture keeps each layer's Q, K (after RoPE), V and attention output.
	Capture bool
	// Logits keeps the output logits.
	Logits bool
}

// Pass is the result of one forward pass over a text of N bytes.
type Pass struct {
	// N is the number of tokens (bytes) the model read.
	N int
	// Bits is the total information content, −Σ log2 p(text[i+1] | text[:i+1])
	// over the N−1 bytes the model predicts.
	Bits float64
	// Layers has one entry per block, in order.
	Layers []Layer
	// Logits is [N, 256] row-major (the prediction for the byte after each
	// position), when Options.Logits was set.
	Logits []float32
}

// BitsPerByte is Bits over the N−1 predicted bytes.
func (p *Pass) BitsPerByte() float64 { return p.Bits / float64(p.N-1) }

// Stats sums every layer's attention work counters.
func (p *Pass) Stats() plan.Stats {
	var s plan.Stats
	for _, l := range p.Layers {
		s.Add(l.Stats)
	}
	return s
}

// Layer is what one block's attention did.
type Layer struct {
	// Q is [1, Heads, N, HeadDim], K and V [1, KVHeads, N, HeadDim], and
	// Out [1, Heads, N, HeadDim]: float32, captured when Options.Capture
	// was set (else nil). Q and K are after RoPE, exactly what attention
	// saw. Q, K and V are BNHD; Out is BHND.
	Q, K, V, Out *tensor.Tensor
	// Stats is the attention executor's work counters for this layer.
	Stats plan.Stats
	// PlanTime and RunTime are the attention's planning and execution time.
	PlanTime, RunTime time.Duration
}

// Forward runs the model over text (each byte one token) and scores its
// prediction of every byte after the first. Each layer's attention runs
// through sparseattn.Attention with opts.Attention, so any planner and
// executor can stand in for dense attention. Errors wrap ErrInput, the
// attention's errors, or the context's.
func (m *Model) Forward(ctx context.Context, text []byte, opts Options) (*Pass, error) {
	n := len(text)
	if n < 2 || n > MaxTokens {
		return nil, fmt.Errorf("%w: text of %d bytes, want 2 to %d", ErrInput, n, MaxTokens)
	}
	c := m.cfg
	d, qd, kvd := c.DModel, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	x := make([]float32, n*d)
	for i, b := range text {
		for j := range d {
			x[i*d+j] = m.emb[j*c.Vocab+int(b)]
		}
	}
	cos, sin := ropeTables(n, c.HeadDim, c.RoPEBase)
	a := make([]float32, n*d)
	g := make([]float32, n*c.Hidden)
	u := make([]float32, n*c.Hidden)
	o := make([]float32, n*qd)
	pass := &Pass{N: n, Layers: make([]Layer, c.Layers)}
	attOpts := opts.Attention
	attOpts.Causal = true
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lm: forward cancelled: %w", err)
		}
		w := &m.layers[li]
		m.rmsNorm(a, x, w.attnNorm, n)
		q, k, v := make([]float32, n*qd), make([]float32, n*kvd), make([]float32, n*kvd)
		matMul(n, qd, d, a, w.wq, q, false)
		matMul(n, kvd, d, a, w.wk, k, false)
		matMul(n, kvd, d, a, w.wv, v, false)
		rope(q, n, c.Heads, c.HeadDim, cos, sin)
		rope(k, n, c.KVHeads, c.HeadDim, cos, sin)
		qt, err := tensor.FromFloat32(tensor.BNHD, tensor.Shape{B: 1, H: c.Heads, N: n, D: c.HeadDim}, q)
		if err != nil {
			return nil, fmt.Errorf("lm: layer %d: %w", li, err)
		}
		kvShape := tensor.Shape{B: 1, H: c.KVHeads, N: n, D: c.HeadDim}
		kt, err := tensor.FromFloat32(tensor.BNHD, kvShape, k)
		if err != nil {
			return nil, fmt.Errorf("lm: layer %d: %w", li, err)
		}
		vt, err := tensor.FromFloat32(tensor.BNHD, kvShape, v)
		if err != nil {
			return nil, fmt.Errorf("lm: layer %d: %w", li, err)
		}
		res, err := sparseattn.Attention(ctx, qt, kt, vt, attOpts)
		if err != nil {
			return nil, fmt.Errorf("lm: layer %d attention: %w", li, err)
		}
		toTokenMajor(o, res.Out, n, c.Heads, c.HeadDim)
		matMul(n, d, qd, o, w.wo, x, true)
		pass.Layers[li] = Layer{Stats: res.Stats, PlanTime: res.PlanTime, RunTime: res.RunTime}
		if opts.Capture {
			pass.Layers[li].Q, pass.Layers[li].K, pass.Layers[li].V, pass.Layers[li].Out = qt, kt, vt, res.Out
		}
		m.rmsNorm(a, x, w.mlpNorm, n)
		matMul(n, c.Hidden, d, a, w.w1, g, false)
		matMul(n, c.Hidden, d, a, w.w3, u, false)
		for i, gi := range g { // SwiGLU: silu(x·W1ᵀ) ⊙ (x·W3ᵀ)
			g[i] = float32(float64(gi) / (1 + math.Exp(-float64(gi))) * float64(u[i]))
		}
		matMul(n, d, c.Hidden, g, w.w2, x, true)
	}
	m.rmsNorm(a, x, m.finalNorm, n)
	logits := make([]float32, n*c.Vocab)
	matMul(n, c.Vocab, d, a, m.emb, logits, false)
	for i := 0; i+1 < n; i++ {
		pass.Bits += bits(logits[i*c.Vocab:(i+1)*c.Vocab], text[i+1])
	}
	if opts.Logits {
		pass.Logits = logits
	}
	return pass, nil
}

// bits is −log2 softmax(row)[target], in float64.
func bits(row []float32, target byte) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	return (math.Log(sum) + mx - float64(row[target])) / math.Ln2
}

// rmsNorm sets dst[i] = x[i]/sqrt(mean(x[i]²) + ε) ⊙ w for each of n rows.
func (m *Model) rmsNorm(dst, x, w []float32, n int) {
	d := m.cfg.DModel
	for i := range n {
		row := x[i*d : (i+1)*d]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(ss/float64(d)+m.cfg.NormEps))
		out := dst[i*d : (i+1)*d]
		for j, v := range row {
			out[j] = v * inv * w[j]
		}
	}
}

// ropeTables returns cos and sin of position·θ^(−2i/dim), [n, dim/2].
func ropeTables(n, dim int, base float64) (cos, sin []float32) {
	half := dim / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = math.Pow(base, -float64(2*i)/float64(dim))
	}
	cos, sin = make([]float32, n*half), make([]float32, n*half)
	for p := range n {
		for i, f := range inv {
			s, c := math.Sincos(float64(p) * f)
			cos[p*half+i], sin[p*half+i] = float32(c), float32(s)
		}
	}
	return cos, sin
}

// rope rotates each head's pairs (i, i+dim/2) of x [n, heads·dim] in
// place by the position's angles (the rotate-half convention).
func rope(x []float32, n, heads, dim int, cos, sin []float32) {
	half := dim / 2
	for p := range n {
		cs, sn := cos[p*half:(p+1)*half], sin[p*half:(p+1)*half]
		for h := range heads {
			r := x[(p*heads+h)*dim : (p*heads+h+1)*dim]
			for i := range half {
				x1, x2 := r[i], r[i+half]
				r[i] = x1*cs[i] - x2*sn[i]
				r[i+half] = x2*cs[i] + x1*sn[i]
			}
		}
	}
}

// toTokenMajor copies a [1, heads, n, dim] tensor to dst [n, heads·dim].
func toTokenMajor(dst []float32, t *tensor.Tensor, n, heads, dim int) {
	for h := range heads {
		for p := range n {
			t.ReadRow(0, h, p, dst[(p*heads+h)*dim:(p*heads+h+1)*dim])
		}
	}
}

// matMul sets (or adds to, when accumulate) c [m, n] = a [m, k] · b [k, n],
// splitting the rows over GOMAXPROCS goroutines.
func matMul(m, n, k int, a, b, c []float32, accumulate bool) {
	const rows = 64
	chunks := (m + rows - 1) / rows
	workers := min(runtime.GOMAXPROCS(0), chunks)
	var wg sync.WaitGroup
	next := make(chan int, chunks)
	for i := range chunks {
		next <- i
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for i := range next {
				lo, hi := i*rows, min(m, (i+1)*rows)
				kernel.MatMul(hi-lo, n, k, a[lo*k:hi*k], k, b, n, c[lo*n:hi*n], n, accumulate)
			}
		})
	}
	wg.Wait()
}
