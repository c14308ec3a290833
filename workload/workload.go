package workload

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sparseattn/sparseattn/tensor"
)

// Needle locates the planted needle of an llm workload: in each of Heads
// (query-head indices) the query at QueryIndex matches the key at KeyIndex,
// whose value row is distinctive. The same positions hold in every batch.
type Needle struct {
	QueryIndex, KeyIndex int
	Heads                []int
}

// Grid is the visual token grid of a video or image workload: T frames of
// H×W tokens (T = 1 for image). Visual token (t, h, w) is at sequence
// position (t·H + h)·W + w; text tokens, if any, follow at T·H·W onward.
type Grid struct{ T, H, W int }

// Workload is one generated attention problem.
type Workload struct {
	// Config is the configuration it was generated from, with defaults
	// filled in (Hkv, N, DType, RoPEBase and the llm knobs); generating
	// from it again reproduces the same workload.
	Config Config
	// Q is [B, Hq, N, D]; K and V are [B, Hkv, N, D], in Config's DType
	// and Layout. Query head h reads KV head h/(Hq/Hkv).
	Q, K, V *tensor.Tensor
	// Causal is true for llm (each query sees keys 0..i) and false for
	// video, image and random.
	Causal bool
	// Description is one line saying what the workload mimics.
	Description string
	// Needle is where the planted needle is (llm only, else nil).
	Needle *Needle
	// Grid is the visual token grid (video and image only, else nil).
	Grid *Grid
	// HeadPatterns names the dominant attention pattern each query head
	// was built to show, e.g. "sink+local" or "temporal"; nil for random.
	HeadPatterns []string
}

// Generate builds the workload cfg describes. It returns an error wrapping
// ErrConfig for an invalid Config, and the context's error (wrapped) if
// ctx is cancelled before every head has been generated. Work is spread
// over GOMAXPROCS goroutines, one (batch, head) at a time, each with its
// own derived random stream, so the result does not depend on scheduling.
func Generate(ctx context.Context, cfg Config) (*Workload, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("workload: generation cancelled: %w", err)
	}
	w := &Workload{}
	w.Config = r.Config
	w.Config.Hkv = r.Hkv
	w.Config.N = r.N
	w.Config.DType = r.DType
	w.Config.RoPEBase = r.base
	if r.Kind == LLM {
		w.Config.SinkTokens, w.Config.Window = r.sinks, r.window
		w.Config.HeavyHitters, w.Config.NeedleKey = r.heavy, r.needleK
	}
	if r.Kind == Random {
		w.Config.RoPEBase = 0
	}
	qs := tensor.Shape{B: r.B, H: r.Hq, N: r.N, D: r.D}
	ks := tensor.Shape{B: r.B, H: r.Hkv, N: r.N, D: r.D}
	if w.Q, err = tensor.New(r.DType, r.Layout, qs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if w.K, err = tensor.New(r.DType, r.Layout, ks); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if w.V, err = tensor.New(r.DType, r.Layout, ks); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch r.Kind {
	case LLM:
		err = genLLM(ctx, r, w)
	case Video, Image:
		err = genVisual(ctx, r, w)
	case Random:
		err = genRandom(ctx, r, w)
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// runJobs calls fn(0..n-1) on up to GOMAXPROCS goroutines. Each call must
// write only its own outputs. It checks ctx before starting every job and
// returns the (wrapped) context error if any job was skipped.
func runJobs(ctx context.Context, n int, fn func(i int)) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if int(done.Load()) < n {
		return fmt.Errorf("workload: generation cancelled: %w", context.Cause(ctx))
	}
	return nil
}

// writeRow rounds a float64 row to float32 and stores it.
func writeRow(t *tensor.Tensor, b, h, n int, row []float64, buf []float32) {
	for i, x := range row {
		buf[i] = float32(x)
	}
	t.WriteRow(b, h, n, buf)
}

// NeedleRecall measures how well an attention output o retrieves the
// planted needle. o must have Q's B, H and N and V's head dimension. For
// every needle head h and batch b it takes the cosine similarity between
// o[b, h, QueryIndex] and V[b, kvhead(h), KeyIndex] and returns the mean.
// Dense attention scores above 0.99 on the default workload (and on the
// package's test workloads); an output computed with the needle key masked
// out scores near 0 (below 0.2). It returns an error
// wrapping ErrNoNeedle for workloads without a needle and tensor.ErrShape
// for a mis-shaped o.
func (w *Workload) NeedleRecall(o *tensor.Tensor) (float64, error) {
	if w == nil || w.Needle == nil || len(w.Needle.Heads) == 0 {
		return 0, fmt.Errorf("%w: only llm workloads plant one", ErrNoNeedle)
	}
	if o == nil {
		return 0, fmt.Errorf("%w: attention output is nil", tensor.ErrShape)
	}
	qs, vs, os := w.Q.Shape(), w.V.Shape(), o.Shape()
	want := tensor.Shape{B: qs.B, H: qs.H, N: qs.N, D: vs.D}
	if os != want {
		return 0, fmt.Errorf("%w: attention output is %v, want %v", tensor.ErrShape, os, want)
	}
	group := qs.H / vs.H
	orow := make([]float32, vs.D)
	vrow := make([]float32, vs.D)
	var sum float64
	var count int
	for b := range qs.B {
		for _, h := range w.Needle.Heads {
			if h < 0 || h >= qs.H {
				return 0, fmt.Errorf("%w: needle head %d out of range [0, %d)", tensor.ErrShape, h, qs.H)
			}
			o.ReadRow(b, h, w.Needle.QueryIndex, orow)
			w.V.ReadRow(b, h/group, w.Needle.KeyIndex, vrow)
			var dot, no, nv float64
			for i := range orow {
				x, y := float64(orow[i]), float64(vrow[i])
				dot += x * y
				no += x * x
				nv += y * y
			}
			if no > 0 && nv > 0 {
				sum += dot / math.Sqrt(no*nv)
			}
			count++
		}
	}
	return sum / float64(count), nil
}
