package cpu

import (
	"math"
	"sync"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// run is the state of one Executor.Run call shared by its workers.
type run struct {
	p        *plan.Plan
	g        tensor.Geometry
	q, k, v  *tensor.Tensor
	out      *tensor.Tensor
	scale    float32
	maxLevel plan.Level
	stack    int // query heads sharing a tile; see stackedHeads

	// state holds the per-query softmax states an Init plan leaves for
	// the main plan (nil without one); pass1 is set while running the
	// Init plan's rows, which save into it rather than read from it.
	state *states
	pass1 bool

	// kRows and vRows are the float32 keys and values read in place,
	// without packing, or nil. Keys are read in place only for runs with
	// few queries, where the dot-product path beats packing for a GEMM.
	kRows, vRows []float32

	// prefetch asks for each KV block's keys and values in L2 one block
	// ahead; see prefetchBytes.
	prefetch bool
	// spans folds runs of consecutive KV blocks at once (span.go).
	spans bool

	// check is the NaN/Inf check's state (Executor.CheckFinite), or nil.
	check *finiteCheck

	// noTrim is Executor.noTrim: diagonal blocks as full tiles.
	noTrim bool

	// heads[i].levels[l-1] holds the keys and values of the i-th KV head
	// of the current chunk at pyramid level l.
	heads []packedHead
	first int // b·Hkv + kh of the chunk's first KV head
	// slab is the memory the packed heads are cut from, taken from
	// packSlabs and given back by release.
	slab *[]float32
}

// packSlabs recycles the packed keys and values of finished runs. Memory
// fresh from the operating system costs a page fault per page on first
// touch — about 3.6 ms per MB on the 2-core development VM, as much as a
// 16K-token head's packing itself — so a run reuses a previous run's slab
// when one large enough is free.
var packSlabs sync.Pool // of *[]float32

// takeSlab returns a slab of at least n float32s; stale contents.
func takeSlab(n int) *[]float32 {
	if s, ok := packSlabs.Get().(*[]float32); ok {
		if cap(*s) >= n {
			*s = (*s)[:n]
			return s
		}
	}
	s := make([]float32, n)
	return &s
}

// release gives the run's slab back for the next run; nothing may use the
// packed heads afterwards.
func (r *run) release() {
	if r.slab != nil {
		packSlabs.Put(r.slab)
		r.slab, r.heads = nil, nil
	}
}

type packedHead struct {
	levels []packed
}

// packed is one KV head's keys and values at one pyramid level, laid out
// block by block for the kernels.
type packed struct {
	width int       // entries a block holds: ⌈BlockK/pool⌉
	kT    []float32 // block kb is a D×width matrix, row stride width, at kb·D·width
	v     []float32 // block kb is a width×Dv matrix, row stride Dv, at kb·width·Dv
	bias  []float32 // level > 1: ln(tokens pooled) per entry, at kb·width; nil at level 1
	n     []int     // entries per block
}

// levelWidth is how many entries one block holds at level lv.
func levelWidth(blockK int, lv plan.Level) int { return (blockK + lv.Pool() - 1) / lv.Pool() }

// directQueries is the most query rows of a tile (queries times the heads
// stacked in it) for which keys are read in place with dot products rather
// than packed for the GEMM: chunked prefill of 16 queries on one head reads
// K/V 5× faster this way than packing (go test ./cpu -bench
// 'DecodeShapes/Hq8-Hkv8-Nq16', 2-core dev machine), while 64 stacked rows
// of a GQA group are no faster.
const directQueries = 16

// readInPlace decides which float32 inputs the kernels read without
// packing. Pyramid levels are built from packed level-1 data, so plans with
// pooled levels pack everything.
func (r *run) readInPlace() {
	if r.maxLevel > plan.Full {
		return
	}
	if r.k.DType() == tensor.Float32 && r.g.Nq*r.stack <= directQueries {
		r.kRows = r.k.Float32s()
	}
	if r.v.DType() == tensor.Float32 {
		r.vRows = r.v.Float32s()
	}
	r.prefetch = r.kRows == nil && r.p.BlockK*(r.g.D+r.g.Dv)*4 >= prefetchBytes
}

// prefetchBytes is the size of a KV block (keys and values) from which
// the GEMM path prefetches the next block while it computes on the
// current one. Measured on the 2-core AVX-512 machine (BENCHMARKS.md,
// issue 16): 64×64 blocks at D=128 (64 KiB) gain about 6%, while at D=64
// (32 KiB) the prefetches cost more than they save. The decode kernels,
// which read keys in place, prefetch within their own loops.
const prefetchBytes = 64 << 10

// packedBytes is the memory one packed KV head takes, all levels included.
func (r *run) packedBytes() int {
	d, dv := r.g.D, r.g.Dv
	if r.kRows != nil {
		d = 0
	}
	if r.vRows != nil {
		dv = 0
	}
	per := 0
	for lv := plan.Full; lv <= r.maxLevel; lv++ {
		per += r.p.KBlocks() * levelWidth(r.p.BlockK, lv) * (d + dv + 1) * 4
	}
	return max(1, per)
}

// head returns the packed KV head of query head h in batch b.
func (r *run) head(b, h int) *packedHead {
	return &r.heads[b*r.g.Hkv+r.g.KVHead(h)-r.first]
}

// pack fills r.heads with the KV heads first .. first+count-1, numbered
// b·Hkv + kh.
func (r *run) pack(first, count, workers int) {
	p, g := r.p, r.g
	nb := p.KBlocks()
	if r.slab == nil && len(r.heads) < count {
		r.slab = takeSlab(count * r.packedBytes() / 4)
	}
	free := *r.slab
	if len(r.heads) > 0 {
		free = free[len(r.heads)*r.packedBytes()/4:]
	}
	// cut returns the next n float32s of the slab. Packing writes every
	// entry a kernel reads (a block's first n keys and values, the first m
	// pooled ones); the rest may hold an earlier run's data.
	cut := func(n int) []float32 {
		if len(free) < n { // more heads than the first chunk: not reached
			return make([]float32, n)
		}
		c := free[:n:n]
		free = free[n:]
		return c
	}
	for len(r.heads) < count {
		ph := packedHead{levels: make([]packed, r.maxLevel)}
		for i := range ph.levels {
			l := &ph.levels[i]
			l.width = levelWidth(p.BlockK, plan.Level(i+1))
			if r.kRows == nil {
				l.kT = cut(nb * g.D * l.width)
			}
			if r.vRows == nil {
				l.v = cut(nb * l.width * g.Dv)
			}
			l.n = make([]int, nb)
			bias := cut(nb * l.width) // packedBytes counts it at level 1 too
			if i > 0 {
				l.bias = bias
			}
		}
		r.heads = append(r.heads, ph)
	}
	r.first = first
	parallel(count*nb, workers, func(i int) {
		ph, kb := &r.heads[i/nb], i%nb
		b, kh := (first+i/nb)/g.Hkv, (first+i/nb)%g.Hkv
		base := &ph.levels[0]
		lo, hi := p.KeyRange(kb)
		base.n[kb] = hi - lo
		var checked uint32
		if r.kRows == nil {
			r.packKeys(base.kT[kb*g.D*p.BlockK:], b, kh, lo, hi)
			checked |= checkedK
		}
		if r.vRows == nil {
			for j := lo; j < hi; j++ {
				r.v.ReadRow(b, kh, j, base.v[(kb*p.BlockK+j-lo)*g.Dv:])
			}
			if r.check != nil {
				r.check.row(base.v[kb*p.BlockK*g.Dv : (kb*p.BlockK+hi-lo)*g.Dv])
			}
			checked |= checkedV
		}
		if r.check != nil {
			r.check.claim(first+i/nb, kb, checked)
		}
		for lv := 2; lv <= len(ph.levels); lv++ {
			r.pool(ph, kb, plan.Level(lv))
		}
	})
}

// packKeys writes keys lo..hi-1 of KV head kh in batch b, transposed, to
// kT (D×BlockK, row stride BlockK): float32 keys straight from the tensor
// with kernel.Transpose (16×16 tiles in registers on AVX-512: packing was
// 4.5–5% of the samples of a dense causal N=2048 D=64 pass in the Go
// transpose, 2% in this one), others converted first, eight at a time
// (transposeRows). It checks each key row under Executor.CheckFinite.
func (r *run) packKeys(kT []float32, b, kh, lo, hi int) {
	d, bk := r.g.D, r.p.BlockK
	kf := r.k.Float32s()
	if kf != nil {
		off, ld := r.k.RowOffset(b, kh, lo), r.k.RowStride()
		if r.check != nil {
			for j := range hi - lo {
				r.check.row(kf[off+j*ld : off+j*ld+d])
			}
		}
		kernel.Transpose(hi-lo, d, kf[off:], ld, kT, bk)
		return
	}
	var stage []float32
	if kf == nil {
		stage = make([]float32, 8*d)
	}
	var rows [8][]float32
	for j0 := lo; j0 < hi; j0 += 8 {
		m := min(8, hi-j0)
		for i := range m {
			if kf != nil {
				off := r.k.RowOffset(b, kh, j0+i)
				rows[i] = kf[off : off+d]
			} else {
				rows[i] = stage[i*d : (i+1)*d]
				r.k.ReadRow(b, kh, j0+i, rows[i])
			}
			if r.check != nil {
				r.check.row(rows[i])
			}
		}
		transposeRows(kT[j0-lo:], bk, rows[:m], d)
	}
}

// pool builds block kb of level lv by averaging groups of 2^(lv-1)
// consecutive level-1 keys and values (PSA §3, the KV pyramid).
func (r *run) pool(ph *packedHead, kb int, lv plan.Level) {
	p, g := r.p, r.g
	base, dst := &ph.levels[0], &ph.levels[lv-1]
	n, size := base.n[kb], lv.Pool()
	m := (n + size - 1) / size
	dst.n[kb] = m
	w := dst.width
	kT0, kT := base.kT[kb*g.D*p.BlockK:], dst.kT[kb*g.D*w:]
	v0, v := base.v[kb*p.BlockK*g.Dv:], dst.v[kb*w*g.Dv:]
	for t := range m {
		lo, hi := t*size, min(t*size+size, n)
		inv := 1 / float32(hi-lo)
		dst.bias[kb*w+t] = float32(math.Log(float64(hi - lo)))
		for d := range g.D {
			var s float32
			for j := lo; j < hi; j++ {
				s += kT0[d*p.BlockK+j]
			}
			kT[d*w+t] = s * inv
		}
		out := v[t*g.Dv : (t+1)*g.Dv]
		clear(out)
		for j := lo; j < hi; j++ {
			for d, x := range v0[j*g.Dv : (j+1)*g.Dv] {
				out[d] += x
			}
		}
		for d := range out {
			out[d] *= inv
		}
	}
}

// parallel calls f(i) for i in [0, n) on up to workers goroutines.
func parallel(n, workers int, f func(i int)) {
	workers = min(workers, n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// states is the online-softmax state of every query token of every head,
// at index (b·Hq + h)·Nq + token: what S2O's pass 1 leaves in its buffers
// (A, Lbuf, Mbuf) for pass 2 (S2O Alg. 2–3).
type states struct {
	dv   int
	m, l []float32
	acc  []float32
}

func newStates(g tensor.Geometry) *states {
	n := g.B * g.Hq * g.Nq
	s := &states{dv: g.Dv, m: make([]float32, n), l: make([]float32, n), acc: make([]float32, n*g.Dv)}
	for i := range s.m {
		s.m[i] = float32(math.Inf(-1))
	}
	return s
}
