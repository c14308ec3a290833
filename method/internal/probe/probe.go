// Package probe computes the exact attention of a few probe queries — the
// last queries of a head — over all keys, and its vertical (per key) and
// slash (per query–key offset) sums: the estimate MInference and
// FlexPrefill select their vertical-slash patterns from.
package probe

import (
	"math"

	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Probe is the softmax attention of the last queries of one head. Its
// probabilities are kept factored, as the canonical order computes them
// (see Last): a float32 exponential per visible key and a float64 factor
// per tile of Tile keys; Row, Vertical and Slash multiply them out.
type Probe struct {
	// Pos is each probe query's position among the keys (token + Nk − Nq).
	Pos []int
	Nk  int
	// Queries holds the probe queries, row-major, D per row.
	Queries []float32

	tiles int
	last  []int     // per query: the last key it sees, −1 for none
	e     []float32 // e[i·Nk + j]: key j's exponential in query i's row, j ≤ last[i]
	c     []float64 // c[i·tiles + t]: tile t's factor Exp64(m_t − m)/S in query i's row
}

// Tile is the number of keys per softmax tile of the canonical probe (see
// Last).
const Tile = 128

// Scratch is one goroutine's reusable memory for probes: Scratch.Last
// keeps its buffers from call to call, so a planner that probes head after
// head allocates (and touches) them once. The zero value is ready to use;
// a Scratch must not be used by two goroutines at once.
type Scratch struct {
	p      Probe
	kt     []float32 // one tile of keys, in interleaved Dot64Panel panels
	aq     []float64 // the probe queries widened to float64, rows padded to 4
	out    []float64 // one Dot64Panel result
	lg     []float64 // a batch's logits in the current tile, 4 × Tile
	buf    []float64 // one tile's shifted logits, then exponentials, for plan.Sum64
	mt, st []float64 // per query and tile: maximum and exponential sum
	w      []float64
}

// Last returns the probe of the last min(n, Nq) queries of query head h in
// batch b, with the tiling's causal masking and softmax scale.
//
// The softmax is computed in a canonical order (the device planners'
// probe, cuda/kernels/probe.cuh, computes the same factored softmax in
// its own float32 rounding, within cuda/selftest's probeTol): logit
// l_j = plan.Dot64(q, k_j)·scale; the visible keys are cut into tiles of
// Tile keys from key 0; tile t has maximum m_t, exponentials e_j =
// float32(plan.Exp64(l_j − m_t)) and sum s_t = plan.Sum64 of them (as
// float64); with m the row maximum, the row sum is S = plan.Sum64 over
// tiles of s_t·Exp64(m_t − m), and P_j = e_j·(Exp64(m_t − m)/S).
// Mathematically this is softmax(l); the float32 exponentials halve the
// device's scratch and cost about 6e-8 relative.
func Last(t plan.Tiling, q, k *tensor.Tensor, b, h, n int) *Probe {
	return new(Scratch).Last(t, q, k, b, h, n)
}

// Last is the package's Last computed in s's memory: the probe it returns
// is valid until s's next call. The dot products run in
// kernel.Dot64Panel (four probe queries against sixteen keys, each product
// added in plan.Dot64's order), a tile of keys at a time, so every value
// has the bits of the one-dot-product-after-another definition.
func (s *Scratch) Last(t plan.Tiling, q, k *tensor.Tensor, b, h, n int) *Probe {
	g := t.Geometry
	n = max(min(n, g.Nq), 0)
	d, nk := g.D, g.Nk
	tiles := (nk + Tile - 1) / Tile
	p := &s.p
	*p = Probe{Nk: nk, tiles: tiles,
		Pos: grow(p.Pos, n), Queries: grow(p.Queries, n*d), last: grow(p.last, n),
		e: grow(p.e, n*nk), c: grow(p.c, n*tiles)}
	const rows, keys = 4, 2 * kernel.Dot64Lanes
	padded := (n + rows - 1) / rows * rows
	s.aq = grow(s.aq, padded*d)
	clear(s.aq[n*d:])
	most := -1 // the last key any probe query sees
	for i := range n {
		tok := g.Nq - n + i
		p.Pos[i] = tok + g.QueryOffset()
		qi := p.Queries[i*d : (i+1)*d]
		q.ReadRow(b, h, tok, qi)
		for e, v := range qi {
			s.aq[i*d+e] = float64(v)
		}
		p.last[i] = nk - 1
		if t.Causal {
			p.last[i] = max(min(p.Pos[i], nk-1), -1)
		}
		most = max(most, p.last[i])
	}
	s.kt = grow(s.kt, Tile*d)
	s.out = grow(s.out, rows*keys)
	s.lg = grow(s.lg, rows*Tile)
	s.buf = grow(s.buf, Tile)
	s.mt, s.st = grow(s.mt, n*tiles), grow(s.st, n*tiles)
	scale := float64(t.SoftmaxScale())
	row := make([]float32, d)
	kh := g.KVHead(h)
	for tt := 0; tt*Tile <= most; tt++ {
		lo, hi := tt*Tile, min(tt*Tile+Tile, most+1)
		// The tile's keys in panels of kernel.Dot64Lanes: element e of key
		// lo+j at (j/8)·8·D + e·8 + j%8; keys past hi are zeros.
		clear(s.kt[(hi-lo)/kernel.Dot64Lanes*kernel.Dot64Lanes*d:])
		for j := lo; j < hi; j++ {
			k.ReadRow(b, kh, j, row)
			panel := s.kt[(j-lo)/kernel.Dot64Lanes*kernel.Dot64Lanes*d+(j-lo)%kernel.Dot64Lanes:]
			for e, v := range row {
				panel[e*kernel.Dot64Lanes] = v
			}
		}
		for r0 := 0; r0 < n; r0 += rows {
			// Rows see more keys as i grows: the batch's last row sees most.
			bhi := min(hi, p.last[min(r0+rows, n)-1]+1)
			if bhi <= lo {
				continue
			}
			for j0 := 0; lo+j0 < bhi; j0 += keys {
				kernel.Dot64Panel(s.aq[r0*d:], d, d, s.kt[j0*d:], s.out)
				for r := range rows {
					for c, v := range s.out[r*keys : (r+1)*keys] {
						s.lg[r*Tile+j0+c] = float64(v * scale)
					}
				}
			}
			for r := range min(rows, n-r0) {
				i := r0 + r
				ihi := min(hi, p.last[i]+1)
				if ihi <= lo {
					continue
				}
				lg := s.lg[r*Tile : r*Tile+ihi-lo]
				m := math.Inf(-1)
				for _, v := range lg {
					m = max(m, v)
				}
				// float32(plan.Exp64(l_j − m)), the exponentials eight at
				// a time (kernel.Exp64s: the same bits).
				ei, x := p.e[i*nk+lo:i*nk+ihi], s.buf[:ihi-lo]
				for j, v := range lg {
					x[j] = v - m
				}
				kernel.Exp64s(x, x)
				for j, v := range x {
					ei[j] = float32(v)
					x[j] = float64(ei[j])
				}
				s.mt[i*tiles+tt], s.st[i*tiles+tt] = m, plan.Sum64(s.buf[:ihi-lo])
			}
		}
	}
	s.w = grow(s.w, tiles)
	for i := range n {
		if p.last[i] < 0 {
			continue
		}
		nt := p.last[i]/Tile + 1
		mt, st := s.mt[i*tiles:i*tiles+nt], s.st[i*tiles:i*tiles+nt]
		mx := math.Inf(-1)
		for _, m := range mt {
			mx = max(mx, m)
		}
		for tt := range nt {
			s.w[tt] = float64(st[tt] * plan.Exp64(mt[tt]-mx))
		}
		sum := plan.Sum64(s.w[:nt])
		for tt := range nt {
			p.c[i*tiles+tt] = plan.Exp64(mt[tt]-mx) / sum
		}
	}
	return p
}

// Len is the number of probe queries.
func (p *Probe) Len() int { return len(p.Pos) }

// Row returns probe query i's attention probabilities over the Nk keys in
// dst (reallocated when shorter than Nk): zero for keys it cannot see, and
// all zero when it sees none.
func (p *Probe) Row(i int, dst []float64) []float64 {
	dst = grow(dst, p.Nk)
	clear(dst)
	for j := 0; j <= p.last[i]; j++ {
		dst[j] = float64(float64(p.e[i*p.Nk+j]) * p.c[i*p.tiles+j/Tile])
	}
	return dst
}

// Vertical is the attention each key receives, summed over the probe
// queries in increasing order (the device planners repeat the order). The
// sums skip the keys a query cannot see: their probability is +0 and the
// others are non-negative (or NaN), so adding it would change no bit.
func (p *Probe) Vertical() []float64 {
	return p.VerticalInto(nil)
}

// VerticalInto is Vertical in dst's memory (reallocated when shorter than
// Nk).
func (p *Probe) VerticalInto(dst []float64) []float64 {
	v := grow(dst, p.Nk)
	clear(v)
	for i := range p.Pos {
		for tt := 0; tt*Tile <= p.last[i]; tt++ {
			c := p.c[i*p.tiles+tt]
			lo, hi := tt*Tile, min(tt*Tile+Tile, p.last[i]+1)
			e, vt := p.e[i*p.Nk+lo:i*p.Nk+hi], v[lo:hi]
			for j, x := range e {
				vt[j] += float64(float64(x) * c)
			}
		}
	}
	return v
}

// Slash is the attention along each diagonal, summed over the probe
// queries in increasing order: s[d+Nk−1] holds offset d = position − key, for d in
// [−(Nk−1), Nk−1] (negative offsets: keys after the query, non-causal
// only).
func (p *Probe) Slash() []float64 {
	return p.SlashInto(nil)
}

// SlashInto is Slash in dst's memory (reallocated when shorter than
// 2·Nk − 1).
func (p *Probe) SlashInto(dst []float64) []float64 {
	s := grow(dst, max(2*p.Nk-1, 0))
	clear(s)
	for i, pos := range p.Pos {
		// Offset pos − j ≥ −(Nk−1) holds for j < pos + Nk; the other bound
		// always holds, pos being below Nk.
		end := min(p.last[i], pos+p.Nk-1)
		base := pos + p.Nk - 1
		for tt := 0; tt*Tile <= end; tt++ {
			c := p.c[i*p.tiles+tt]
			lo, hi := tt*Tile, min(tt*Tile+Tile, end+1)
			e := p.e[i*p.Nk+lo : i*p.Nk+hi]
			st := s[base-hi+1 : base-lo+1]
			for j, x := range e {
				st[len(st)-1-j] += float64(float64(x) * c)
			}
		}
	}
	return s
}

// grow returns s resized to n, reallocated only when too small.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
