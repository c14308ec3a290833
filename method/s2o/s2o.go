// Package s2o plans S2O: early stopping for sparse attention via online
// permutation (Zhang et al., "S2O: Early Stopping for Sparse Attention via
// Online Permutation").
//
// The query tokens are cut into segments of Segment tokens. For every
// (batch, query head) the planner builds two kinds of index arrays and never
// moves data (S2O §3.1, Alg. 1):
//
//   - Q_perm (with Planner.QueryPerm only): inside each segment, queries
//     sorted by their score against a guide key, the mean key of the first
//     segment (Eq. 1).
//   - KV_perm: for each segment, the keys of its causal prefix sorted by
//     their score against the segment's mean query (Eq. 2).
//
// Execution is the plan's token orders plus its stop rule (S2O §3.2–3.3).
// Each segment has one key order,
//
//	[Window keys before the segment, then its own keys, in natural order][its prefix in KV_perm order]
//
// The paper's main method (Alg. 1–3, Planner.QueryPerm) runs two passes.
// Pass 1, the dense intra-segment causal window (Alg. 2), visits the tiles
// of the first part that hold a visible pair, in natural query order, and
// leaves each query's online-softmax state (m, ℓ, acc). It is the plan's
// Init plan. Pass 2 (Alg. 3) is the plan itself: query tiles gathered by
// Q_perm resume those states and walk the ranked prefix in tiles gathered
// by index, each row ending after the first tile whose gain Δℓ < Tau·ℓ for
// every query of the tile. The executor keeps that last tile, which Alg. 3
// discards; it is already computed, so keeping it only lowers the error.
// Nothing is copied in the planner; the executor gathers rows by index.
//
// The default is the fused single-pass variant of Alg. 4 instead: no
// Q_perm, queries in natural order, pass 1 and pass 2 streamed as one row,
// pass 1 protected from the stop rule by a per-row StopRule.RowAfter. On
// our workloads both variants lie on one sparsity-error curve (RESULTS.md,
// "Claim: Q_perm helps (Table 3) — does not reproduce on our workload"),
// and the fused one is faster end to end: it skips the Init pass's short
// rows and the per-query state round trip between the passes.
//
// Our extension, not in the paper (outlier.go): each segment's outlier
// queries, those farthest from the mean query that KV_perm is built from,
// are scored against the ranked keys too, and their top keys lead the
// ranked part of the segment's key order, so that pass 2 computes them
// before the stop can fire: a key that one query alone retrieves (a
// needle) ranks low against the mean and would be skipped. Outliers
// sets how many (DefaultOutliers); NoOutliers gives the paper's order.
//
// Non-causal attention (Tiling.Causal false) ranks every key outside the
// segment's own window, not just the prefix. Work is counted by the
// executor, tile by tile.
package s2o

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// DefaultTau is the paper's early-stop threshold: what a zero Tau means,
// and what the CLI runs.
const DefaultTau = 0.005

// NoStop is the Tau that turns the early stop off, which makes the plan
// exact: no gain is below a negative τ·ℓ (any negative Tau does the same).
const NoStop = -1.0

// Planner plans S2O. The zero value is S2O's fused single pass with
// DefaultSegment and DefaultTau, the CLI's default.
type Planner struct {
	// Segment is S, the tokens per segment: a positive multiple of the
	// tiling's BlockQ, or 0 for DefaultSegment. The paper uses 2048 at
	// 128K and smaller segments for shorter sequences.
	Segment int
	// Tau is the early-stop threshold τ < 1: a row stops after the first
	// pass-2 tile whose gain in the softmax normalizer is below τ·ℓ. 0
	// means DefaultTau, the paper's 0.005; a negative τ (NoStop) turns the
	// stop off, which makes the plan exact.
	Tau float64
	// Window is W ≥ 0, the tokens just before each segment also computed
	// densely in pass 1 (Alg. 4's local window for boundary stability).
	Window int
	// QueryPerm selects S2O's main method (Alg. 1–3): queries permuted by
	// Q_perm within each segment, and two passes, pass 2 resuming pass 1's
	// per-query states. False, the default, is the fused single pass in
	// natural query order (Alg. 4, the "w/o Q_perm" ablation of Table 3):
	// on our workloads it reaches the same sparsity at the same error and
	// runs faster (RESULTS.md, "Claim: Q_perm helps (Table 3) — does not
	// reproduce on our workload").
	QueryPerm bool
	// Outliers is the number of outlier queries per segment, our
	// extension of KV_perm (outlier.go): the segment's queries farthest
	// from its mean query, each scored against the ranked keys, whose top
	// keys move to the front of the segment's ranked keys. 0 means
	// DefaultOutliers; a negative value (NoOutliers) checks none, the
	// paper's order.
	Outliers int
}

// Name returns "s2o".
func (s Planner) Name() string { return "s2o" }

// DefaultSegment is the segment length a zero Segment means for nq query
// tokens in blocks of bq: nq/16 clamped to [512, 2048], rounded up to a
// multiple of bq. Longer segments plan faster (fewer key orders to rank:
// on an H100 at 32K tokens, 19% of a dense pass at S = 2048 against 41%
// at 512) for a little less sparsity at the same error (0.83 against 0.88
// at 32K on the calibrated llm workload: RESULTS.md, "S2O's segment
// length").
func DefaultSegment(nq, bq int) int {
	seg := min(max(nq/16, 512), 2048)
	if bq <= 0 {
		return seg
	}
	return (seg + bq - 1) / bq * bq
}

// Resolve returns s with the defaults its zero fields mean for tiling t
// filled in (Segment, Tau). Plan and Layout call it, and so does the device
// planner (package cuda, through Layout).
func (s Planner) Resolve(t plan.Tiling) Planner {
	if s.Segment == 0 {
		s.Segment = DefaultSegment(t.Geometry.Nq, t.BlockQ)
	}
	if s.Tau == 0 {
		s.Tau = DefaultTau
	}
	if s.Outliers == 0 {
		s.Outliers = DefaultOutliers
	}
	return s
}

// check validates the hyperparameters against the tiling.
func (s Planner) check(t plan.Tiling) error {
	if t.BlockQ <= 0 {
		return fmt.Errorf("%w: s2o needs a positive BlockQ, got %d", plan.ErrInvalid, t.BlockQ)
	}
	if s.Segment <= 0 || s.Segment%t.BlockQ != 0 {
		return fmt.Errorf("%w: s2o segment length %d must be a positive multiple of BlockQ=%d", plan.ErrInvalid, s.Segment, t.BlockQ)
	}
	if !(s.Tau < 1) || math.IsInf(s.Tau, 0) {
		return fmt.Errorf("%w: s2o τ=%v must be finite and below 1 (0: %v; negative: no early stop)", plan.ErrInvalid, s.Tau, DefaultTau)
	}
	if s.Window < 0 {
		return fmt.Errorf("%w: s2o local window %d must be ≥ 0", plan.ErrInvalid, s.Window)
	}
	// More outlier queries than a segment holds would only cost: memory
	// and rounds of pickOutliers that grow with the count, not the input.
	if s.Outliers < NoOutliers || s.Outliers > s.Segment {
		return fmt.Errorf("%w: s2o outlier queries %d per segment must be in [1, %d], the segment's length (0: %d; %d: none, the paper's order)",
			plan.ErrInvalid, s.Outliers, s.Segment, DefaultOutliers, NoOutliers)
	}
	return nil
}

// Plan builds KV_perm (and Q_perm, with QueryPerm) from q and k and returns
// the plan that executes S2O with early stopping: one fused pass, or with
// QueryPerm the two passes. v is not read.
func (s Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	s = s.Resolve(t)
	if err := s.check(t); err != nil {
		return nil, err
	}
	if err := heads.CheckInputs(t, q, k, "s2o"); err != nil {
		return nil, err
	}
	g := t.Geometry
	if _, err := plan.NewBuilder(t); err != nil { // checks the tiling before any work
		return nil, err
	}
	segs := (g.Nq + s.Segment - 1) / s.Segment
	perHead := make([]headOrders, g.B*g.Hq)
	err := heads.ForEachWorker(ctx, len(perHead), func() func(int) {
		keys := make([]float32, g.Nk*g.D) // the head's keys, row-major
		var keyT []float32                // the same keys in panels, where scores uses them
		if panels {
			keyT = make([]float32, panelKeys(g.Nk)*g.D)
		}
		lastKV := -1
		var sc scratch
		return func(i int) {
			b, h := i/g.Hq, i%g.Hq
			if kv := b*g.Hkv + g.KVHead(h); kv != lastKV {
				for j := range g.Nk {
					k.ReadRow(b, g.KVHead(h), j, keys[j*g.D:(j+1)*g.D])
				}
				if panels {
					interleave(keyT, keys, g.D)
				}
				lastKV = kv
			}
			perHead[i] = s.orders(t, q, keys, keyT, b, h, segs, &sc)
		}
	})
	if err != nil {
		return nil, err
	}

	return s.assemble(t, perHead, segs)
}

// assemble builds the plan from every head's index arrays: one key order
// per (b, h, segment), shared by the segment's query blocks. Pass 1 lists
// the segment's own tiles that hold a pair visible to a query of the row
// (all of them when not causal); pass 2 lists every ranked prefix tile, all
// visible to every query of the segment. The fused variant puts both in
// one row, pass 1 protected by RowAfter. With Q_perm, pass 1 is an Init
// plan in natural query order (S2O Alg. 2) and the plan itself is pass 2
// in permuted order (Alg. 3), resuming pass 1's states.
func (s Planner) assemble(t plan.Tiling, perHead []headOrders, segs int) (*plan.Plan, error) {
	g := t.Geometry
	heads := len(perHead)
	qblocks := (g.Nq + t.BlockQ - 1) / t.BlockQ
	rows := heads * qblocks
	total := 0
	for _, ho := range perHead {
		for _, seg := range ho.segs {
			total += len(seg.keys)
		}
	}
	order := &plan.TokenOrder{KV: make([]int32, 0, total), KVStart: make([]int, 1, heads*segs+1), RowKV: make([]int32, rows)}
	for _, ho := range perHead {
		for _, seg := range ho.segs {
			order.KV = append(order.KV, seg.keys...)
			order.KVStart = append(order.KVStart, len(order.KV))
		}
	}
	for i := range perHead {
		for qb := range qblocks {
			order.RowKV[i*qblocks+qb] = int32(i*segs + qb*t.BlockQ/s.Segment)
		}
	}
	main, err := plan.NewBuilder(t)
	if err != nil {
		return nil, err
	}
	first := main // the builder of pass-1 rows
	if s.QueryPerm {
		if first, err = plan.NewBuilder(t); err != nil {
			return nil, err
		}
	}
	after := make([]int32, rows)
	for i, ho := range perHead {
		for qb := range qblocks {
			r := i*qblocks + qb
			seg := ho.segs[qb*t.BlockQ/s.Segment]
			nb := (len(seg.keys) + t.BlockK - 1) / t.BlockK
			localBlocks := (seg.local + t.BlockK - 1) / t.BlockK
			// Pass 1 runs in natural query order.
			latest := min((qb+1)*t.BlockQ, g.Nq) - 1 + g.QueryOffset()
			for kb := range localBlocks {
				lo := kb * t.BlockK
				if !t.Causal || int(slices.Min(seg.keys[lo:min(lo+t.BlockK, len(seg.keys))])) <= latest {
					first.Add(r, kb, plan.Full)
					after[r]++
				}
			}
			for kb := localBlocks; kb < nb; kb++ {
				main.Add(r, kb, plan.Full)
			}
		}
	}
	var stop *plan.StopRule
	if s.Tau > 0 {
		stop = &plan.StopRule{Tau: float32(s.Tau)}
	}
	if !s.QueryPerm {
		main.SetOrder(order)
		if stop != nil {
			stop.RowAfter = after
			main.SetStop(stop)
		}
		return main.Build()
	}
	first.SetOrder(order)
	init, err := first.Build()
	if err != nil {
		return nil, err
	}
	permuted := *order
	permuted.Query = make([]int32, 0, heads*g.Nq)
	for _, ho := range perHead {
		permuted.Query = append(permuted.Query, ho.query...)
	}
	main.SetOrder(&permuted)
	main.SetInit(init)
	if stop != nil {
		main.SetStop(stop)
	}
	return main.Build()
}

// headOrders is one query head's index arrays.
type headOrders struct {
	query []int32    // Q_perm: token at each query position, Nq entries
	segs  []segOrder // one key order per segment
}

// segOrder is one segment's key order: local tokens first (pass 1), then
// the ranked ones (pass 2, KV_perm).
type segOrder struct {
	keys  []int32
	local int // how many leading entries of keys are the pass-1 window
}

// scratch is one worker's reusable buffers for orders.
type scratch struct {
	qrows  []float32 // one segment's queries, row-major
	score  []float32 // per query token: scores against the guide key (Eq. 1)
	kscore []float32 // panelRows segments' key scores (Eq. 2), Nk each
	qmeans []float32 // every segment's mean query, D each
	rank   ranker
	panel  panelScratch
	dist   []float64 // one segment's queries' squared distances from its mean
	pick   []int     // one segment's outlier queries, offsets in the segment
	outq   []float32 // every segment's outlier queries, Outliers rows each
	nout   []int     // how many outlier queries each segment has
	top    []uint64  // each outlier query's top key, as keyRank (MaxUint64: none)
	moved  []int32   // one segment's moved keys, distinct, in increasing order
}

// orders computes Q_perm and the key orders of query head h in batch b.
// keys holds the head's keys row-major and keyT the same keys in panels
// (panelKeys; nil unless panels). Queries are read one segment at a time: Eq. 1, the
// segment's mean query and its outliers need no other. The key scores of
// Eq. 2 (and the outliers' scores) are then computed panelRows segments at
// a time, every row against the same key panels.
func (s Planner) orders(t plan.Tiling, q *tensor.Tensor, keys, keyT []float32, b, h, segs int, sc *scratch) headOrders {
	g := t.Geometry
	d := g.D
	off := g.QueryOffset()
	ho := headOrders{query: make([]int32, g.Nq), segs: make([]segOrder, segs)}
	for i := range ho.query {
		ho.query[i] = int32(i)
	}
	sc.qrows = grow(sc.qrows, min(s.Segment, g.Nq)*d)
	sc.score = grow(sc.score, g.Nq)
	sc.qmeans = grow(sc.qmeans, segs*d)
	outliers := max(s.Outliers, 0)
	sc.outq = grow(sc.outq, segs*outliers*d)
	sc.nout = slices.Grow(sc.nout[:0], segs)[:segs]
	var guide []float32
	if s.QueryPerm {
		guide = meanRows(keys, d, 0, min(s.Segment, g.Nk))
	}
	// The segments' key orders are slices of one allocation: segment n
	// lists every key before the end of its window (all keys when not
	// causal).
	total := 0
	for n := range segs {
		total += g.Nk
		if t.Causal {
			total -= g.Nk - min(max(min((n+1)*s.Segment, g.Nq)+off, 0), g.Nk)
		}
	}
	store := make([]int32, 0, total)
	for n := range segs {
		qlo, qhi := n*s.Segment, min((n+1)*s.Segment, g.Nq)
		qrows := sc.qrows[:(qhi-qlo)*d]
		for i := qlo; i < qhi; i++ {
			q.ReadRow(b, h, i, qrows[(i-qlo)*d:(i-qlo+1)*d])
		}
		// S2O Alg. 1 line 5, Eq. 1: queries scored against the guide key,
		// the mean key of the first segment, and sorted within their
		// segment.
		if s.QueryPerm {
			scoreAll(sc.score, ho.query[qlo:qhi], guide, func(i int32) []float32 { return qrows[(int(i)-qlo)*d : (int(i)-qlo+1)*d] })
			sc.rank.sort(ho.query[qlo:qhi], sc.score)
		}
		// Alg. 1 line 3: the segment's mean query, and its outliers.
		qmean := sc.qmeans[n*d : (n+1)*d]
		meanInto(qmean, qrows, d)
		sc.nout[n] = 0
		if outliers > 0 {
			sc.dist = grow64(sc.dist, qhi-qlo)
			distances(sc.dist, qrows, qmean, d)
			sc.pick = pickOutliers(sc.pick[:0], sc.dist, outliers)
			for o, i := range sc.pick {
				copy(sc.outq[(n*outliers+o)*d:], qrows[i*d:(i+1)*d])
			}
			sc.nout[n] = len(sc.pick)
		}

		// The segment's key order: its own window (its own keys sit at
		// the positions of its queries), then the ranked keys in token
		// order, sorted below.
		wlo, whi := s.window(t, n)
		start := len(store)
		for j := wlo; j < whi; j++ {
			store = append(store, int32(j))
		}
		local := len(store) - start
		for j := range wlo {
			store = append(store, int32(j))
		}
		if !t.Causal {
			for j := whi; j < g.Nk; j++ {
				store = append(store, int32(j))
			}
		}
		ho.segs[n] = segOrder{keys: store[start:len(store):len(store)], local: local}
	}

	// S2O Alg. 1 lines 10–13, Eq. 2: each segment's ranked keys scored
	// against its mean query and sorted, panelRows segments at a time.
	// A segment ranks the keys before its window (causal) or every key
	// outside it; the panels cover every key up to the last one ranked.
	ranked := func(n int) []int32 { o := ho.segs[n]; return o.keys[o.local:] }
	reach := func(n int) int {
		if !t.Causal {
			return g.Nk
		}
		wlo, _ := s.window(t, n)
		return wlo
	}
	sc.kscore = grow(sc.kscore, panelRows*g.Nk)
	var vis [panelRows]int
	for n0 := 0; n0 < segs; n0 += panelRows {
		rows := min(panelRows, segs-n0)
		for r := range rows {
			vis[r] = reach(n0 + r)
		}
		sc.panel.scores(sc.qmeans[n0*d:(n0+rows)*d], d, keyT, keys, vis[:rows], func(r, j0 int, out []float64) {
			dst := sc.kscore[r*g.Nk+j0 : r*g.Nk+j0+len(out)]
			for i, v := range out {
				dst[i] = float32(v)
			}
		})
		for r := range rows {
			if keys := ranked(n0 + r); len(keys) > 0 {
				sc.rank.sort(keys, sc.kscore[r*g.Nk:(r+1)*g.Nk])
			}
		}
	}
	if outliers == 0 {
		return ho
	}

	// The outliers' top keys (outlier.go), panelRows outliers at a time,
	// then moved to the front of their segments' ranked keys.
	sc.top = slices.Grow(sc.top[:0], segs*outliers)[:segs*outliers]
	nrows := segs * outliers
	for r0 := 0; r0 < nrows; r0 += panelRows {
		rows := min(panelRows, nrows-r0)
		for r := range rows {
			n := (r0 + r) / outliers
			vis[r] = 0
			if (r0+r)%outliers < sc.nout[n] && len(ranked(n)) > 0 {
				vis[r] = reach(n)
			}
			sc.top[r0+r] = math.MaxUint64 // none
		}
		sc.panel.scores(sc.outq[r0*d:(r0+rows)*d], d, keyT, keys, vis[:rows], func(r, j0 int, out []float64) {
			n := (r0 + r) / outliers
			wlo, whi := s.window(t, n)
			top := &sc.top[r0+r]
			for i, v := range out {
				j := j0 + i
				if j >= wlo && j < whi {
					continue // the segment's window: not ranked
				}
				*top = min(*top, keyRank(float32(v), j))
			}
		})
	}
	for n := range segs {
		sc.moved = sc.moved[:0]
		for _, top := range sc.top[n*outliers : n*outliers+sc.nout[n]] {
			if j := int32(uint32(top)); top != math.MaxUint64 && !slices.Contains(sc.moved, j) {
				sc.moved = append(sc.moved, j)
			}
		}
		slices.Sort(sc.moved)
		promote(ranked(n), sc.moved)
	}
	return ho
}

// Score is S2O's canonical score of row x against the vector m (Eq. 1:
// a query against the guide key; Eq. 2: a key against a segment's mean
// query): their dot product in float64 (plan.Dot64: exact products added
// in index order), rounded to float32. Both planners rank by it — this
// one and the device's (cuda/kernels/plan_s2o.cu), which repeats the same
// operations — so their orders agree bit for bit; equal roundings keep
// index order in both (the rank is stable).
func Score(x, m []float32) float32 { return float32(plan.Dot64(x, m)) }

// scoreAll sets score[i] = Score(row(i), m) for every i in idx, four rows
// at a time (plan.Dot64x4 gives Dot64's bits).
func scoreAll(score []float32, idx []int32, m []float32, row func(int32) []float32) {
	n := len(idx) &^ 3
	for p := 0; p < n; p += 4 {
		s0, s1, s2, s3 := plan.Dot64x4(m, row(idx[p]), row(idx[p+1]), row(idx[p+2]), row(idx[p+3]))
		score[idx[p]], score[idx[p+1]], score[idx[p+2]], score[idx[p+3]] = float32(s0), float32(s1), float32(s2), float32(s3)
	}
	for _, i := range idx[n:] {
		score[i] = Score(row(i), m)
	}
}

// meanRows is the mean of rows [lo, hi) of the row-major matrix x with d
// columns; zeros when the range is empty.
func meanRows(x []float32, d, lo, hi int) []float32 {
	m := make([]float32, d)
	if hi <= lo {
		return m
	}
	acc := make([]float64, d)
	for i := lo; i < hi; i++ {
		for c, v := range x[i*d : (i+1)*d] {
			acc[c] += float64(v)
		}
	}
	for c := range m {
		m[c] = float32(acc[c] / float64(hi-lo))
	}
	return m
}
