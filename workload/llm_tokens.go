package workload

// The llm workload's tokens: the embeddings of a document model and, from
// them, each head's keys, values and queries (the plan they follow is in
// llm.go, the head types in llm_heads.go).

import "math"

// input generates batch b's token embeddings and heavy hitters. The
// embeddings follow a document model: a latent that is a topic vector
// (switching every ~N/16 tokens among llmTopics topics, so topics recur)
// plus a smooth AR(1) drift, mapped through a fixed embedding matrix, plus
// per-token noise.
func (pl *llmPlan) input(b int) llmInput {
	r := pl.r
	n := r.N
	emb := newMatrix(llmEmbedDim, llmLatentDim).gaussian(newRNG(r.Seed, tagLLMEmbed), 1/math.Sqrt(llmLatentDim))
	g := newRNG(r.Seed, tagLLMInput, uint64(b))
	topics := newMatrix(llmTopics, llmLatentDim).gaussian(g, 1)
	segMean := min(max(float64(n)/16, 32), 256)
	rho := dexp(-1.0 / 8)
	innov := math.Sqrt(1 - float64(rho*rho))
	ar := make([]float64, llmLatentDim)
	g.fillNorm(ar, 1)
	z := make([]float64, llmLatentDim)
	in := llmInput{x: newMatrix(n, llmEmbedDim), hh: make([]float64, n)}
	topic, left := g.intN(llmTopics), 0
	for t := range n {
		if left == 0 {
			topic = g.intN(llmTopics)
			left = max(8, int(-segMean*dlog(1-g.uniform())))
		}
		left--
		for k := range ar {
			ar[k] = float64(rho*ar[k]) + float64(innov*g.noise())
			z[k] = float64(math.Sqrt(0.6)*topics.row(topic)[k]) + float64(math.Sqrt(0.4)*ar[k])
		}
		x := in.x.row(t)
		emb.mulVec(math.Sqrt(0.75), z, x)
		for k := range x {
			x[k] += float64(0.5 * g.noise())
		}
	}
	// Heavy hitters: distinct positions after the sinks, never the needle
	// key or the last token.
	for placed := 0; placed < r.heavy; {
		j := r.sinks + g.intN(n-1-r.sinks)
		if j == r.needleK || in.hh[j] != 0 {
			continue
		}
		in.hh[j] = 0.7 + float64(0.6*g.uniform())
		placed++
	}
	return in
}

// xi fills dst with key identity ξ_j of batch b, KV head g. It is 4×
// weaker in the global band, where queries carry their largest
// components, so that it stays a small perturbation there.
func (pl *llmPlan) xi(tok *rng, b, g, j int, dst []float64) {
	tok.reseed(pl.r.Seed, tagLLMK, uint64(b), uint64(g), uint64(j))
	tok.fillNoise(dst, pl.sigmaXi)
	for _, f := range pl.globPairs {
		dst[f] = float64(dst[f] * 0.25)
		dst[f+pl.p] = float64(dst[f+pl.p] * 0.25)
	}
}

func (pl *llmPlan) keys(w *Workload, in *llmInput, b, g int) {
	r := pl.r
	kv := &pl.kv[g]
	row := make([]float64, r.D)
	sem := make([]float64, len(pl.semDims))
	sin, cos := make([]float64, pl.p), make([]float64, pl.p)
	buf := make([]float32, r.D)
	semScale := 1 / math.Sqrt(float64(len(pl.semDims)))
	var tok rng
	for j := range r.N {
		pl.xi(&tok, b, g, j, row)
		axpy(llmKeyBias, kv.ub, row)
		if j < r.sinks {
			axpy(pl.sinkKey[j], kv.us, row)
		}
		if a := in.hh[j]; a != 0 {
			axpy(a, kv.uv, row)
		}
		if j == r.needleK {
			axpy(1, kv.un, row)
		}
		axpy(1, kv.cpos, row)
		kv.wk.mulVec(semScale, in.x.row(j), sem)
		for k, dim := range pl.semDims {
			row[dim] += sem[k]
		}
		pl.angles(j, sin, cos)
		rotatePairs(row, pl.lo, pl.hi, sin, cos)
		for k := range row {
			row[k] = float64(row[k] * pl.scaleK)
		}
		writeRow(w.K, b, g, j, row, buf)
	}
}

// values: a projection of the smooth embeddings plus noise. Sink tokens
// get small values (their attention is a no-op, as in real models); the
// needle's value is an unrelated, larger random vector.
func (pl *llmPlan) values(w *Workload, in *llmInput, b, g int) {
	r := pl.r
	kv := &pl.kv[g]
	rg := newRNG(r.Seed, tagLLMV, uint64(b), uint64(g))
	row := make([]float64, r.D)
	buf := make([]float32, r.D)
	for j := range r.N {
		kv.wv.mulVec(1, in.x.row(j), row)
		for k := range row {
			row[k] += float64(0.3 * rg.noise())
		}
		if j < r.sinks {
			for k := range row {
				row[k] = float64(row[k] * 0.2)
			}
		}
		if j == r.needleK {
			rg.fillNorm(row, 2)
		}
		writeRow(w.V, b, g, j, row, buf)
	}
}

func (pl *llmPlan) queries(w *Workload, in *llmInput, b, h int) {
	r := pl.r
	q := &pl.q[h]
	group := r.Hq / r.Hkv
	gi := h / group
	kv := &pl.kv[gi]
	rg := newRNG(r.Seed, tagLLMQ, uint64(b), uint64(h))
	row := make([]float64, r.D)
	tmp := make([]float64, r.D)
	sem := make([]float64, len(pl.semDims))
	sin, cos, negSin := make([]float64, pl.p), make([]float64, pl.p), make([]float64, pl.p)
	buf := make([]float32, r.D)
	semScale := q.par.semantic / math.Sqrt(float64(len(pl.semDims)))
	idScale := q.par.slashID / pl.xiNorm2
	var tok rng
	for i := range r.N {
		pl.angles(i, sin, cos)
		rg.fillNoise(row, q.par.noise/math.Sqrt(float64(r.D)))
		// The sink direction turned back by iθ: after RoPE turns query i
		// by iθ it meets sink token 0 (unrotated) aligned in every pair,
		// so every query sees the sink at about the head's strength at
		// any N. (Dividing by the rotated gain instead lost the sinks once
		// late queries turned the global pairs past 90°: from 16K on.)
		for f := range negSin {
			negSin[f] = -sin[f]
		}
		copy(tmp, kv.us)
		rotatePairs(tmp, pl.lo, pl.hi, negSin, cos)
		axpy(q.par.sink*(1+float64(0.1*rg.noise())), tmp, row)
		axpy(q.par.stripe, kv.uv, row)
		if q.needle && i == pl.needleQ {
			// The needle direction turned back by the query–key distance:
			// after RoPE turns the query by iθ and the needle key by its
			// own position, the two align in every pair, so the needle
			// logit is the full boost at any N (dividing by the rotated
			// gain instead failed once the distance turned the global
			// pairs past 90°: dense attention lost the needle at 16K).
			// Past 4K tokens the boost grows with N (atLength), so the
			// needle keeps its share of the mass against N competing keys.
			copy(tmp, kv.un)
			rotatePairs(tmp, pl.lo, pl.hi, pl.needleSin, pl.needleCos)
			axpy(q.par.needle, tmp, row)
		}
		axpy(1, q.posConst, row)
		q.wq.mulVec(semScale, in.x.row(i), sem)
		for k, dim := range pl.semDims {
			row[dim] += sem[k]
		}
		for oi, o := range q.offsets {
			if i-o < 0 || idScale == 0 {
				continue
			}
			pl.xi(&tok, b, gi, i-o, tmp)
			rotatePairs(tmp, pl.lo, pl.hi, q.offSin[oi], q.offCos[oi])
			axpy(idScale, tmp, row)
		}
		rotatePairs(row, pl.lo, pl.hi, sin, cos)
		for k := range row {
			row[k] = float64(row[k] * pl.scaleQ)
		}
		writeRow(w.Q, b, h, i, row, buf)
	}
}
