package workload

import (
	"context"
	"fmt"
	"math"
)

// The llm generator builds every query and key as a sum of components that
// live in chosen rotary-frequency bands, then applies RoPE. Pre-RoPE, with
// q̃ and k̃ the vectors before rotation and scaling, the logit is
// q̃ᵀ R((j−i)θ) k̃; the scaling (D^¼ on both sides) cancels 1/√D, so
// component amplitudes below are in logit units.
//
// Bands (pair p rotates dimensions p and p+D/2, frequency θ_p = base^(−2p/D)):
//   - positional: the highest frequencies. Keys carry a constant vector c
//     here; a query carrying Σ_o α_o·R(−oθ)(w⊙c) gets the logit
//     Σ_o α_o Σ_p w_p cos((i−j−o)θ_p), a kernel peaked at distance o. o = 0
//     gives RoPE's recency bias (local windows), o > 0 slash stripes.
//   - semantic: the middle frequencies. Projections of the smooth token
//     embeddings; query and key projections are correlated, so tokens with
//     similar content (the same topic) attract each other, with RoPE's
//     natural decay over distance.
//   - global: the lowest frequencies, which rotate least over the whole
//     sequence. Orthogonal directions u_b (a shared key bias, as real keys
//     have), u_s (sinks), u_v (heavy hitters) and u_n (the needle). What
//     rotation remains would fade the sinks for late queries; each query's
//     sink component (and the needle query's needle component) is scaled
//     by the inverse of the surviving fraction, so the realized logits
//     match the head's strengths.
//
// Every key also carries a per-token random "identity" ξ_j over all
// dimensions. Slash heads' queries include R(−oθ)ξ_{i−o}, an exact match for
// the key o tokens back — what a previous-token or induction head does.

const (
	llmEmbedDim  = 32  // width of the synthetic token embeddings
	llmLatentDim = 16  // rank of their smooth latent
	llmTopics    = 6   // distinct topics a document switches between
	llmXiNorm    = 1.0 // expected norm of a key's identity vector ξ
	llmKeyBias   = 0.8 // norm of the shared key bias
	llmScaleK    = 1.5 // k = llmScaleK·D^¼·rotated k̃; q uses D^¼/llmScaleK
)

type llmKV struct {
	us, uv, un, ub []float64 // global-band unit directions
	cpos           []float64 // positional-band constant, unit norm
	wk             matrix    // semantic dims × embed
	wv             matrix    // D × embed
}

type llmQ struct {
	typ      llmHeadType
	par      llmHeadParams
	needle   bool
	wq       matrix    // semantic dims × embed
	posConst []float64 // pre-RoPE positional component
	offsets  []int     // slash offsets (slash heads)
	offSin   [][]float64
	offCos   [][]float64
}

type llmInput struct {
	x  matrix    // N × embed token embeddings
	hh []float64 // heavy-hitter key strength per position (0 = none)
}

type llmPlan struct {
	r                    resolved
	p                    int // rotary pairs, D/2
	theta                []float64
	lo, hi               []int // dimensions of every pair
	posPairs, globPairs  []int
	semDims              []int
	sinTab, cosTab       []float64 // N×P angle table (nil when too big)
	kv                   []llmKV
	q                    []llmQ
	sigmaXi              float64
	xiNorm2              float64 // expected |ξ|²
	scaleQ, scaleK       float64
	needleQ              int
	needleHeads          []int
	needleCos, needleSin []float64 // cos and −sin of (needle query − needle key)·θ
	sinkKey              []float64
}

func genLLM(ctx context.Context, r resolved, w *Workload) error {
	pl := newLLMPlan(r)
	w.Causal = true
	w.Description = fmt.Sprintf("causal LLM prefill with RoPE (rotate-half, base %g): %d attention sinks, local windows, "+
		"%d heavy-hitter vertical stripes, slash heads, topic-driven semantic heads, and a needle at key %d retrieved by the last query",
		r.base, r.sinks, r.heavy, r.needleK)
	w.Needle = &Needle{QueryIndex: pl.needleQ, KeyIndex: r.needleK, Heads: append([]int(nil), pl.needleHeads...)}
	w.HeadPatterns = make([]string, r.Hq)
	for h, q := range pl.q {
		w.HeadPatterns[h] = q.typ.String()
		if q.needle && q.typ != headRetrieval {
			w.HeadPatterns[h] += " + needle"
		}
	}

	inputs := make([]llmInput, r.B)
	if err := runJobs(ctx, r.B, func(b int) { inputs[b] = pl.input(b) }); err != nil {
		return err
	}
	nkv := r.B * r.Hkv
	return runJobs(ctx, nkv+r.B*r.Hq, func(i int) {
		if i < nkv {
			b, g := i/r.Hkv, i%r.Hkv
			pl.keys(w, &inputs[b], b, g)
			pl.values(w, &inputs[b], b, g)
			return
		}
		i -= nkv
		b, h := i/r.Hq, i%r.Hq
		pl.queries(w, &inputs[b], b, h)
	})
}

func newLLMPlan(r resolved) *llmPlan {
	d, n := r.D, r.N
	p := d / 2
	pl := &llmPlan{r: r, p: p, needleQ: n - 1}
	pl.theta = make([]float64, p)
	pl.lo, pl.hi = make([]int, p), make([]int, p)
	for f := range p {
		pl.theta[f] = dpow(r.base, -2*float64(f)/float64(d))
		pl.lo[f], pl.hi[f] = f, f+p
	}
	// Global band: the pairs that rotate by at most one radian over the
	// whole sequence, clamped to [P/8, P/4] pairs.
	nglob := 0
	for _, t := range pl.theta {
		if float64(t*float64(n)) <= 1 {
			nglob++
		}
	}
	nglob = min(max(nglob, max(1, p/8)), max(1, p/4))
	// Positional band: frequencies down to 1/(2·Window), clamped so the
	// semantic band keeps at least P/8 pairs.
	npos := 0
	for _, t := range pl.theta {
		if float64(t*float64(2*r.window)) >= 1 {
			npos++
		}
	}
	npos = min(max(npos, max(1, p/4)), max(1, p-nglob-p/8))
	for f := range npos {
		pl.posPairs = append(pl.posPairs, f)
	}
	for f := max(npos, p-nglob); f < p; f++ {
		pl.globPairs = append(pl.globPairs, f)
	}
	if len(pl.globPairs) == 0 {
		pl.globPairs = []int{p - 1}
	}
	for f := npos; f < p-nglob; f++ {
		pl.semDims = append(pl.semDims, f, f+p)
	}
	if len(pl.semDims) == 0 { // tiny D: share the global band
		for _, f := range pl.globPairs {
			pl.semDims = append(pl.semDims, f, f+p)
		}
	}

	pl.needleCos, pl.needleSin = make([]float64, p), make([]float64, p)
	for f, t := range pl.theta {
		sn, cs := dsincos(float64(float64(pl.needleQ-r.needleK) * t))
		pl.needleCos[f], pl.needleSin[f] = cs, -sn
	}

	pl.sigmaXi = llmXiNorm / math.Sqrt(float64(d))
	pl.xiNorm2 = pl.sigmaXi * pl.sigmaXi * (float64(d) - float64(float64(2*len(pl.globPairs))*(1-1.0/16)))
	s := math.Sqrt(math.Sqrt(float64(d)))
	pl.scaleK, pl.scaleQ = llmScaleK*s, s/llmScaleK

	// Sink keys: token 0 strongest, then 0.8, then 0.6 for the rest.
	pl.sinkKey = make([]float64, r.sinks)
	for j := range pl.sinkKey {
		pl.sinkKey[j] = max(0.6, 1-float64(0.2*float64(j)))
	}

	if n*p <= 1<<23 { // at most 128 MiB of tables; else rotate on the fly
		pl.sinTab, pl.cosTab = make([]float64, n*p), make([]float64, n*p)
		for i := range n {
			for f, t := range pl.theta {
				pl.sinTab[i*p+f], pl.cosTab[i*p+f] = dsincos(float64(float64(i) * t))
			}
		}
	}

	pl.buildHeads()
	return pl
}

// globDirs returns unit directions for the sink, heavy-hitter, needle and
// key-bias components, supported on the global band. With at least four
// global pairs each direction gets pairs of its own — rotation maps a
// pair's plane to itself, so the directions stay orthogonal after RoPE
// turns queries against keys by any angle. The sink, needle and
// heavy-hitter directions take turns at the least-rotating pairs; the
// bias gets the fastest one. Within its pairs a direction is random,
// weighted towards slower pairs. Tiny head dimensions share the band and
// fall back to Gram–Schmidt.
func (pl *llmPlan) globDirs(g *rng) (us, uv, un, ub []float64) {
	d := pl.r.D
	us, uv, un, ub = make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d)
	fill := func(v []float64, f int) {
		rot := float64(pl.theta[f] * float64(pl.r.N))
		wt := 1 / (1 + float64(rot*rot))
		v[f], v[f+pl.p] = float64(wt*g.norm()), float64(wt*g.norm())
	}
	gp := pl.globPairs // ascending frequency index: the slowest pair is last
	if len(gp) >= 4 {
		fill(ub, gp[0])
		order := [][]float64{us, un, uv}
		for k, i := 0, len(gp)-1; i >= 1; k, i = k+1, i-1 {
			fill(order[k%3], gp[i])
		}
		for _, v := range [][]float64{us, uv, un, ub} {
			normalize(v)
		}
		return us, uv, un, ub
	}
	for _, v := range [][]float64{us, uv, un, ub} {
		for _, f := range gp {
			fill(v, f)
		}
	}
	// The needle and sink directions come first so they stay exactly
	// orthogonal (before rotation) when the band is too small for all four.
	orthonormalize([][]float64{un, us, uv, ub})
	return us, uv, un, ub
}

func (pl *llmPlan) buildHeads() {
	r := pl.r
	nsem := len(pl.semDims)
	inv := 1 / math.Sqrt(llmEmbedDim)
	pl.kv = make([]llmKV, r.Hkv)
	for gi := range pl.kv {
		g := newRNG(r.Seed, tagLLMKVParams, uint64(gi))
		kv := &pl.kv[gi]
		kv.us, kv.uv, kv.un, kv.ub = pl.globDirs(g)
		kv.cpos = make([]float64, r.D)
		amp := 1 / math.Sqrt(float64(len(pl.posPairs)))
		for _, f := range pl.posPairs {
			s, c := dsincos(float64(2 * math.Pi * g.uniform()))
			kv.cpos[f], kv.cpos[f+pl.p] = amp*c, amp*s
		}
		kv.wk = newMatrix(nsem, llmEmbedDim).gaussian(g, inv)
		kv.wv = newMatrix(r.D, llmEmbedDim).gaussian(g, inv)
	}

	pl.q = make([]llmQ, r.Hq)
	group := r.Hq / r.Hkv
	for h := range pl.q {
		g := newRNG(r.Seed, tagLLMQParams, uint64(h))
		kv := &pl.kv[h/group]
		q := &pl.q[h]
		q.typ = llmHeadType(h % int(numLLMHeadTypes))
		q.par = llmParams(q.typ).atLength(r.N)
		q.needle = q.typ == headRetrieval
		// Query and key projections share a component, so that content
		// similarity raises the logit (x_iᵀ W_qᵀ W_k x_j has a positive
		// definite part).
		q.wq = newMatrix(nsem, llmEmbedDim).gaussian(g, 0.6*inv)
		for i, v := range kv.wk.a {
			q.wq.a[i] += v
		}
		win := q.par.widen * float64(r.window)
		if q.typ == headSlash {
			q.offsets = pl.slashOffsets(g)
		}
		q.posConst = make([]float64, r.D)
		pl.addKernel(q.posConst, kv.cpos, 0, q.par.local, win, q.par.spread)
		for _, o := range q.offsets {
			pl.addKernel(q.posConst, kv.cpos, o, q.par.slashPos, win, q.par.spread)
			sin, cos := make([]float64, pl.p), make([]float64, pl.p)
			for f, t := range pl.theta {
				s, c := dsincos(float64(float64(o) * t))
				sin[f], cos[f] = -s, c // rotation by −oθ
			}
			q.offSin = append(q.offSin, sin)
			q.offCos = append(q.offCos, cos)
		}
	}
	for h, q := range pl.q {
		if q.needle {
			pl.needleHeads = append(pl.needleHeads, h)
		}
	}
	if len(pl.needleHeads) == 0 { // a single head: it retrieves too
		h := r.Hq - 1
		pl.q[h].needle = true
		pl.q[h].par.needle = llmParams(headRetrieval).atLength(r.N).needle
		pl.needleHeads = []int{h}
	}
}

// slashOffsets picks a head's slash offsets: a short one (1 or 2, a
// previous-token head) and two longer ones drawn log-uniformly from
// [8, min(512, N/4)].
func (pl *llmPlan) slashOffsets(g *rng) []int {
	n := pl.r.N
	offs := []int{1 + g.intN(2)}
	hi := float64(min(512, n/4))
	for range 2 {
		if hi <= 8 {
			break
		}
		o := int(dexp(dlog(8) + float64(g.uniform()*dlog(hi/8))))
		if o != offs[len(offs)-1] && o < n {
			offs = append(offs, o)
		}
	}
	return offs
}

// addKernel adds to dst the query-side positional vector that, against
// keys carrying cpos, yields the logit peak·Σ_p w_p cos((i−j−o)θ_p) with
// Σ_p w_p = 1 and weights rolling off below frequency 1/win and, with
// spread > 0, above 1/spread, which widens the peak to about spread tokens.
func (pl *llmPlan) addKernel(dst, cpos []float64, o int, peak, win, spread float64) {
	if peak == 0 {
		return
	}
	w := make([]float64, len(pl.posPairs))
	var sum float64
	for i, f := range pl.posPairs {
		x := 1 / float64(win*pl.theta[f])
		x = float64(x * x)
		w[i] = 1 / (1 + float64(x*x))
		if spread > 0 { // and above frequency 1/spread: a peak spread tokens wide
			y := float64(spread * pl.theta[f])
			y = float64(y * y)
			w[i] = float64(w[i] / (1 + float64(y*y)))
		}
		sum += w[i]
	}
	amp2 := 1 / float64(len(pl.posPairs)) // |c_p|²
	for i, f := range pl.posPairs {
		a := peak * w[i] / sum / amp2
		s, c := dsincos(float64(-float64(o) * pl.theta[f]))
		x, y := cpos[f], cpos[f+pl.p]
		dst[f] += float64(a * (float64(x*c) - float64(y*s)))
		dst[f+pl.p] += float64(a * (float64(x*s) + float64(y*c)))
	}
}

// angles fills sin and cos with the rotation of token i.
func (pl *llmPlan) angles(i int, sin, cos []float64) {
	if pl.sinTab != nil {
		copy(sin, pl.sinTab[i*pl.p:(i+1)*pl.p])
		copy(cos, pl.cosTab[i*pl.p:(i+1)*pl.p])
		return
	}
	for f, t := range pl.theta {
		sin[f], cos[f] = dsincos(float64(float64(i) * t))
	}
}
