// Package quant quantizes Q and K to INT8 the way SageAttention does, so
// sparse attention can run on quantized scores (SpargeAttn §3.5, Algorithm 1
// lines 3 and 12): K is smoothed by subtracting its mean over the sequence,
// then Q and K are quantized symmetrically per block of tokens with one
// scale per block, δ = max|x|/127, and the score of a query and a key is
// δ_Q·δ_K·(q_int·k_int).
//
// # Why smoothing is free
//
// Subtracting the per-head mean key μ from every key shifts every score of
// query q by the same amount, q·μ, which the softmax cancels: the output
// is unchanged (under causal masking too, since μ is one vector per head).
// It removes the large shared component real keys carry, so the per-block
// scales shrink and the quantization error with them.
//
// # How the INT8 product is emulated
//
// QK.Dequantized returns float32 tensors holding δ·code for every element,
// for the ordinary float32 executor. Each such value is the exact product
// rounded once to float32 (relative error ≤ 2⁻²⁴), so the executor's score
// differs from the integer path's δ_Q·δ_K·Σ q_int·k_int (Dot) only by
// float32 rounding of the same order as the executor's own — four orders of
// magnitude below the quantization error (≈ 1/254 of a block's range). The
// integer sum itself would be exact in float32 too: |Σ q_int·k_int| ≤
// 127²·D < 2²⁴ for D ≤ 1040. This keeps every executor feature (sparse
// plans, the λ filter, pooled levels) available on quantized scores without
// a second kernel; the cost is one float32 copy of Q and K.
//
// # Error bound
//
// Rounding to the nearest code moves each element by at most δ/2, so for
// a query q and smoothed key k with quantized q̂, k̂:
//
//	|q·k − q̂·k̂| ≤ (δ_K/2)·‖q‖₁ + (δ_Q/2)·‖k̂‖₁
//
// and if every logit of a query moves by at most ε (after the softmax
// scale), each attention weight changes by a factor in [e^{−2ε}, e^{2ε}],
// so each output element moves by at most (e^{2ε} − 1)·max|v|. The tests
// check both bounds against a float64 reference.
package quant

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sparseattn/sparseattn/tensor"
)

// ErrInput reports an input quant cannot work on.
var ErrInput = errors.New("quant: bad input")

// MaxCode is the largest INT8 code magnitude; codes are in [−127, 127]
// (symmetric, so −128 is never used).
const MaxCode = 127

// Blocks is a [B, H, N, D] tensor quantized to INT8 with one scale per
// block of Block consecutive tokens of each head: element [b, h, n, d] is
// approximately Scale(b, h, n)·Code(b, h, n, d). It is immutable after
// Quantize and safe for concurrent use.
type Blocks struct {
	shape  tensor.Shape
	block  int
	codes  []int8    // [B, H, N, D], head-major
	scales []float32 // [B, H, ceil(N/block)]
}

// Quantize quantizes x per block of `block` tokens (the last block may be
// shorter): δ = max|x|/127 over the block, code = round(x/δ). A block of
// zeros gets δ = 0 and zero codes. x must hold finite values.
func Quantize(ctx context.Context, x *tensor.Tensor, block int) (*Blocks, error) {
	if x == nil {
		return nil, fmt.Errorf("%w: nil tensor", ErrInput)
	}
	if block < 1 {
		return nil, fmt.Errorf("%w: block size %d must be ≥ 1", ErrInput, block)
	}
	s := x.Shape()
	nb := (s.N + block - 1) / block
	q := &Blocks{shape: s, block: block, codes: make([]int8, s.Len()), scales: make([]float32, s.B*s.H*nb)}
	err := forEachHead(ctx, s.B, s.H, func(b, h int) error {
		rows := make([]float32, block*s.D)
		for blk := range nb {
			lo, hi := blk*block, min((blk+1)*block, s.N)
			buf := rows[:(hi-lo)*s.D]
			var amax float64
			for n := lo; n < hi; n++ {
				row := buf[(n-lo)*s.D : (n-lo+1)*s.D]
				x.ReadRow(b, h, n, row)
				for _, v := range row {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						return fmt.Errorf("%w: non-finite value at [%d %d %d]", ErrInput, b, h, n)
					}
					amax = max(amax, math.Abs(float64(v)))
				}
			}
			// SageAttention §3.5 (via SpargeAttn Alg. 1 line 3): per-block δ = max|x|/127.
			scale := float32(amax / MaxCode)
			if amax > 0 && scale == 0 {
				scale = math.SmallestNonzeroFloat32 // a block of denormals
			}
			q.scales[(b*s.H+h)*nb+blk] = scale
			if scale == 0 {
				continue
			}
			inv := 1 / float64(scale)
			codes := q.codes[q.offset(b, h, lo) : q.offset(b, h, lo)+len(buf)]
			for i, v := range buf {
				c := math.Round(float64(v) * inv)
				codes[i] = int8(max(-MaxCode, min(MaxCode, c)))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

func (q *Blocks) offset(b, h, n int) int { return ((b*q.shape.H+h)*q.shape.N + n) * q.shape.D }

// Shape is the shape of the quantized tensor.
func (q *Blocks) Shape() tensor.Shape { return q.shape }

// Block is the number of tokens sharing a scale.
func (q *Blocks) Block() int { return q.block }

// Code returns the INT8 code of element [b, h, n, d].
func (q *Blocks) Code(b, h, n, d int) int8 { return q.codes[q.offset(b, h, n)+d] }

// Scale returns δ of the block holding token n of head h in batch b.
func (q *Blocks) Scale(b, h, n int) float32 {
	nb := (q.shape.N + q.block - 1) / q.block
	return q.scales[(b*q.shape.H+h)*nb+n/q.block]
}

// Dequantize returns a float32 BHND tensor holding δ·code for every
// element, each rounded once to float32.
func (q *Blocks) Dequantize() *tensor.Tensor {
	s := q.shape
	t, err := tensor.New(tensor.Float32, tensor.BHND, s)
	if err != nil {
		return nil // unreachable: the shape came from a valid tensor
	}
	data := t.Float32s()
	_ = forEachHead(context.Background(), s.B, s.H, func(b, h int) error {
		for n := range s.N {
			scale := float64(q.Scale(b, h, n))
			off := q.offset(b, h, n)
			for d := range s.D {
				data[off+d] = float32(scale * float64(q.codes[off+d]))
			}
		}
		return nil
	})
	return t
}

// Dot is the dequantized INT8 score of query i of head hq in q and key j
// of head hk in k (batch b), without the softmax scale: δ_Q·δ_K·Σ_d
// q_int·k_int, the integer sum exact in int32 (SpargeAttn Alg. 1 line 12).
// q and k must have the same head dimension.
func Dot(q, k *Blocks, b, hq, hk, i, j int) float32 {
	qc := q.codes[q.offset(b, hq, i):][:q.shape.D]
	kc := k.codes[k.offset(b, hk, j):][:k.shape.D]
	var acc int32
	for d, c := range qc {
		acc += int32(c) * int32(kc[d])
	}
	return q.Scale(b, hq, i) * k.Scale(b, hk, j) * float32(acc)
}

// SmoothK returns k minus its mean over the tokens, per batch and head,
// as a float32 BHND tensor, and the means, [B·H·D] head-major. Attention
// outputs do not change: each query's scores all shift by q·mean.
func SmoothK(ctx context.Context, k *tensor.Tensor) (*tensor.Tensor, []float64, error) {
	if k == nil {
		return nil, nil, fmt.Errorf("%w: nil tensor", ErrInput)
	}
	s := k.Shape()
	data := make([]float32, s.Len())
	means := make([]float64, s.B*s.H*s.D)
	err := forEachHead(ctx, s.B, s.H, func(b, h int) error {
		base := (b*s.H + h) * s.N * s.D
		for n := range s.N {
			k.ReadRow(b, h, n, data[base+n*s.D:base+(n+1)*s.D])
		}
		mean := means[(b*s.H+h)*s.D:][:s.D]
		for n := range s.N {
			for d, v := range data[base+n*s.D : base+(n+1)*s.D] {
				mean[d] += float64(v)
			}
		}
		for d := range mean {
			mean[d] /= float64(s.N)
		}
		for n := range s.N {
			row := data[base+n*s.D : base+(n+1)*s.D]
			for d, v := range row {
				row[d] = float32(float64(v) - mean[d])
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	t, err := tensor.FromFloat32(tensor.BHND, s, data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	return t, means, nil
}

// forEachHead calls fn for every (batch, head) on up to GOMAXPROCS
// goroutines, stopping early on the first error or when ctx is done.
func forEachHead(ctx context.Context, batches, heads int, fn func(b, h int) error) error {
	n := batches * heads
	workers := min(runtime.GOMAXPROCS(0), n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				if err := fn(i/heads, i%heads); err != nil {
					errs[w] = err
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// QK holds SageAttention-quantized Q and smoothed K.
type QK struct {
	Q, K *Blocks
}

// QuantizeQK smooths k by its mean over the sequence and quantizes q per
// block of blockQ tokens and the smoothed k per block of blockK tokens
// (SpargeAttn §3.5). q is [B, Hq, Nq, D] and k [B, Hkv, Nk, D].
func QuantizeQK(ctx context.Context, q, k *tensor.Tensor, blockQ, blockK int) (*QK, error) {
	if q == nil || k == nil {
		return nil, fmt.Errorf("%w: nil tensor", ErrInput)
	}
	if q.Shape().D != k.Shape().D || q.Shape().B != k.Shape().B {
		return nil, fmt.Errorf("%w: q %v and k %v differ in batch or head dimension", ErrInput, q.Shape(), k.Shape())
	}
	ks, _, err := SmoothK(ctx, k)
	if err != nil {
		return nil, err
	}
	qq, err := Quantize(ctx, q, blockQ)
	if err != nil {
		return nil, fmt.Errorf("quantizing q: %w", err)
	}
	kq, err := Quantize(ctx, ks, blockK)
	if err != nil {
		return nil, fmt.Errorf("quantizing k: %w", err)
	}
	return &QK{Q: qq, K: kq}, nil
}

// Dequantized returns float32 copies of the quantized Q and smoothed K
// for a float executor; see the package documentation for why this
// reproduces the INT8 product.
func (x *QK) Dequantized() (q, k *tensor.Tensor) { return x.Q.Dequantize(), x.K.Dequantize() }
