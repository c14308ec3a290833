// Package minference plans MInference's vertical-slash pattern (Jiang et
// al., "MInference 1.0: Accelerating Pre-filling for Long-Context LLMs via
// Dynamic Sparse Attention", NeurIPS 2024, §3.2), converted to blocks.
//
// The last LastQ queries of each head are attended exactly (the probe).
// Summed over them, each key's attention is a vertical line score and each
// diagonal's (query position − key) a slash line score. The head keeps the
// Vertical best keys and the Slash best diagonals; as in the reference
// code, the first 30 keys (sinks) and the 100 most recent diagonals (local
// window) always rank first. A query block then visits every KV block that
// holds one of its kept verticals or meets one of its kept diagonals. The
// reference kernel computes verticals column by column; a block plan visits
// the whole block that holds a vertical, so it computes more, never less.
package minference

import (
	"context"
	"fmt"
	"slices"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/method/internal/probe"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Always-kept lines, as in the reference implementation.
const (
	SinkKeys      = 30  // the first keys, kept as verticals
	RecentSlashes = 100 // the diagonals nearest the main one, kept as slashes
)

// ProbeTile is the number of keys per softmax tile of the probe
// (probe.Last's canonical order), which the device planner repeats.
const ProbeTile = probe.Tile

// MInference's defaults (its reference configuration for 128K-token
// prompts): 64 probe queries, 1000 vertical and 6096 slash lines at
// DefaultLength keys.
const (
	DefaultLastQ    = 64
	DefaultVertical = 1000
	DefaultSlash    = 6096
	DefaultLength   = 128 << 10
)

// Planner plans the vertical-slash pattern. Its zero value works: a zero
// field takes MInference's default, with the line counts scaled to the
// number of keys (see ForLength).
type Planner struct {
	LastQ    int // probe queries; 0 means DefaultLastQ
	Vertical int // vertical lines kept; 0 means DefaultVertical·Nk/DefaultLength, at least min(LastQ, Nk)
	Slash    int // slash lines kept; 0 means DefaultSlash·Nk/DefaultLength, at least 1
	// Budget in (0, 1] scales both line counts (at least 1 line each
	// remains); 0 means 1. It is the knob a sweep turns.
	Budget float64
}

// ForLength returns m with its zero fields set to the defaults for nk
// keys and its Budget applied (and then cleared). MInference's 1000 vertical and 6096 slash lines are a setting for
// 128K tokens; kept at 4K they would keep every line (no sparsity), so the
// defaults keep the same fraction of the lines (0.76% and 4.65%), rounded
// up, with at least one vertical line per probe query (LastQ): each probe
// query may retrieve a key of its own, and below 8K tokens the scaled
// count kept too few to hold them (the synthetic llm workload's needle,
// the last query's one key, was lost at 1K and 2K with 8 and 16 lines,
// and kept with 64). Planners call it at plan time; device planners call
// it too.
func (m Planner) ForLength(nk int) Planner {
	scale := func(def int) int { return max(1, (def*nk+DefaultLength-1)/DefaultLength) }
	if m.LastQ == 0 {
		m.LastQ = DefaultLastQ
	}
	if m.Vertical == 0 {
		m.Vertical = max(min(m.LastQ, nk), scale(DefaultVertical))
	}
	if m.Slash == 0 {
		m.Slash = scale(DefaultSlash)
	}
	if m.Budget > 0 && m.Budget < 1 {
		m.Vertical = max(1, int(m.Budget*float64(m.Vertical)))
		m.Slash = max(1, int(m.Budget*float64(m.Slash)))
	}
	m.Budget = 0
	return m
}

// Name returns "minference".
func (m Planner) Name() string { return "minference" }

func (m Planner) check() error {
	if m.LastQ < 1 || m.Vertical < 1 || m.Slash < 1 {
		return fmt.Errorf("%w: minference needs LastQ, Vertical and Slash ≥ 1 (or 0 for the defaults), got %d, %d and %d", plan.ErrInvalid, m.LastQ, m.Vertical, m.Slash)
	}
	return nil
}

// Lines are one head's kept vertical keys and slash offsets
// (position − key; negative only for non-causal attention).
type Lines struct {
	Vertical []int
	Slash    []int
}

// Plan probes every head and converts its lines to blocks.
func (m Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	if !(m.Budget >= 0 && m.Budget <= 1) {
		return nil, fmt.Errorf("%w: minference budget %v must be in [0, 1]", plan.ErrInvalid, m.Budget)
	}
	m = m.ForLength(t.Geometry.Nk)
	if err := m.check(); err != nil {
		return nil, err
	}
	if err := heads.CheckInputs(t, q, k, "minference"); err != nil {
		return nil, err
	}
	return heads.SelectBlocksWorker(ctx, t, func() func(*plan.Plan, int, int) func(int, []int32) []int32 {
		var sc probe.Scratch
		return func(dense *plan.Plan, b, h int) func(int, []int32) []int32 {
			l := m.Lines(sc.Last(t, q, k, b, h, m.LastQ))
			return func(qb int, visible []int32) []int32 { return Blocks(dense, qb, visible, l) }
		}
	})
}

// Lines picks the head's vertical and slash lines from its probe
// (MInference §3.2, Alg. 3): the Vertical keys and Slash diagonals with the
// largest summed probe attention, sinks and recent diagonals first.
func (m Planner) Lines(p *probe.Probe) Lines {
	vert := p.Vertical()
	keys := make([]int, 0, p.Nk)
	for j := range vert {
		keys = append(keys, j)
	}
	slices.SortStableFunc(keys, func(a, b int) int { return rank(a < SinkKeys, b < SinkKeys, vert[a], vert[b]) })
	slash := p.Slash()
	offs := make([]int, 0, len(slash))
	for i, x := range slash {
		if x > 0 || i >= p.Nk-1 { // lines with mass, and every non-negative offset
			offs = append(offs, i-(p.Nk-1))
		}
	}
	recent := func(d int) bool { return d >= 0 && d < RecentSlashes }
	slices.SortStableFunc(offs, func(a, b int) int {
		return rank(recent(a), recent(b), slash[a+p.Nk-1], slash[b+p.Nk-1])
	})
	return Lines{Vertical: keys[:min(m.Vertical, len(keys))], Slash: offs[:min(m.Slash, len(offs))]}
}

// LineScores returns head (b, h)'s exact line scores, the ones Lines
// ranks: the probe attention of the last lastQ queries summed per key
// (vertical[j]) and per offset d = position − key (slash[d+Nk−1]). A device
// planner that scores in other arithmetic is checked against them.
func LineScores(t plan.Tiling, q, k *tensor.Tensor, b, h, lastQ int) (vertical, slash []float64) {
	p := probe.Last(t, q, k, b, h, lastQ)
	return p.Vertical(), p.Slash()
}

// rank orders forced lines first, then larger scores.
func rank(forcedA, forcedB bool, a, b float64) int {
	switch {
	case forcedA != forcedB:
		if forcedA {
			return -1
		}
		return 1
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// Blocks converts lines to the KV blocks query block qb of plan p visits:
// among its visible blocks (in key order), those that hold a kept vertical
// key, or a key at a kept offset from one of the block's query positions.
func Blocks(p *plan.Plan, qb int, visible []int32, l Lines) []int32 {
	g := p.Geometry
	qlo, qhi := p.QueryRange(qb)
	plo, phi := qlo+g.QueryOffset(), qhi-1+g.QueryOffset()
	want := make([]bool, p.KBlocks())
	for _, j := range l.Vertical {
		want[j/p.BlockK] = true
	}
	for _, d := range l.Slash {
		lo, hi := max(plo-d, 0), min(phi-d, g.Nk-1)
		for kb := lo / p.BlockK; lo <= hi && kb <= hi/p.BlockK; kb++ {
			want[kb] = true
		}
	}
	var out []int32
	for _, kb := range visible {
		if want[kb] {
			out = append(out, kb)
		}
	}
	return out
}
