package workload

import (
	"context"
	"fmt"
	"math"
)

// The video and image generators mimic the joint self-attention of a
// diffusion transformer (DiT / MMDiT: CogVideoX, HunyuanVideo, Wan, Flux)
// on a latent token grid, optionally followed by text tokens.
//
// Token features are a smooth random field over the grid — a sum of random
// low-frequency Fourier features in (t, y, x), drifting with a global
// camera motion, plus per-token noise — so neighbouring tokens in space
// and time are similar, as the SpargeAttn and PSA papers observe for real
// video latents. Queries and keys are per-head projections of the same
// features, with an axial rotary embedding as in those models: the head
// dimension's rotary pairs are split between the t, y and x axes (y and x
// for image), and each pair rotates by its axis coordinate times its
// frequency. Text tokens are not rotated (position 0), as in Flux.
//
// Within each axis, the higher-frequency half of the pairs is positional:
// keys carry a constant there, and a query head's weights over those pairs
// shape a kernel peak·Σ w cos(Δθ) per axis, which decides how far in time
// and in space the head looks. The lower frequencies carry content (query
// and key projections are correlated, so similar tokens attract), and the
// slowest pairs carry a "text" direction that makes every visual query
// attend to the text tokens, which therefore act as global tokens.

const (
	visEmbedDim = 32 // width of the synthetic token features
	visFourier  = 48 // Fourier features in the smooth field
	visScaleK   = 1.5
)

// visHeadParams are a head type's strengths (logits) and bandwidths
// (tokens). Axis order is t, y, x.
type visHeadParams struct {
	name    string
	peak    [3]float64 // kernel peak per axis
	width   [3]float64 // kernel bandwidth per axis
	content float64    // content-similarity gain
	text    float64    // boost of text keys for visual queries
	noise   float64
}

// visParams returns the calibrated head types. Video heads cycle through
// spatial (same frame, broad in space), temporal (same place, across
// frames), local 3-D and global (content-driven) heads — the spatial and
// temporal head families of Sparse VideoGen, which the PSA paper builds
// on. Image heads cycle through local, wide, row-axial and global heads.
// Strengths were tuned so that, on small grids with 32 text tokens, local
// heads keep 0.2–0.5 of their mass within distance 2 and text tokens get
// 0.1–0.45.
func visParams(kind Kind, h, t, hgt, wid int) visHeadParams {
	if kind == Video {
		switch h % 4 {
		case 0:
			return visHeadParams{name: "spatial (same frame)", peak: [3]float64{5, 2.5, 2.5}, width: [3]float64{0.5, 5, 5}, content: 2, text: 10, noise: 0.15}
		case 1:
			return visHeadParams{name: "temporal (same position)", peak: [3]float64{1.5, 4, 4}, width: [3]float64{float64(t), 0.6, 0.6}, content: 1.5, text: 8, noise: 0.15}
		case 2:
			return visHeadParams{name: "local 3-D", peak: [3]float64{3, 3, 3}, width: [3]float64{1, 1.3, 1.3}, content: 1.5, text: 8, noise: 0.15}
		default:
			return visHeadParams{name: "global (content)", peak: [3]float64{1, 1, 1}, width: [3]float64{6, 6, 6}, content: 6, text: 6.5, noise: 0.15}
		}
	}
	switch h % 4 {
	case 0:
		return visHeadParams{name: "local 2-D", peak: [3]float64{0, 3.5, 3.5}, width: [3]float64{1, 1.2, 1.2}, content: 1.5, text: 5.5, noise: 0.15}
	case 1:
		return visHeadParams{name: "wide 2-D", peak: [3]float64{0, 2.5, 2.5}, width: [3]float64{1, 4, 4}, content: 2, text: 5, noise: 0.15}
	case 2:
		return visHeadParams{name: "axial (same row)", peak: [3]float64{0, 5, 1}, width: [3]float64{1, 0.5, float64(wid) / 2}, content: 1.5, text: 5.5, noise: 0.15}
	default:
		return visHeadParams{name: "global (content)", peak: [3]float64{0, 1, 1}, width: [3]float64{1, 6, 6}, content: 6, text: 5.5, noise: 0.15}
	}
}

type visKV struct {
	cpos []float64 // positional constant
	utxt []float64 // text direction (unit)
	wk   matrix    // content dims × embed
	wv   matrix    // D × embed
}

type visQ struct {
	par      visHeadParams
	wq       matrix
	posConst []float64
}

type visPlan struct {
	r         resolved
	axes      int   // 3 (video) or 2 (image)
	axisOf    []int // axis index (0 t, 1 y, 2 x) of each rotary pair
	theta     []float64
	lo, hi    []int
	posPairs  []int        // rotary pairs carrying the positional kernel
	txtDims   []int        // dimensions of the text direction (slowest pairs)
	contDims  []int        // dimensions carrying content
	sinTab    [3][]float64 // per axis: coordinate×P table, set for that axis's pairs
	cosTab    [3][]float64
	extent    [3]int // grid size per axis (t, y, x)
	kv        []visKV
	q         []visQ
	sigmaXi   float64
	scaleQ    float64
	scaleK    float64
	textQuery visHeadParams
}

func genVisual(ctx context.Context, r resolved, w *Workload) error {
	pl := newVisPlan(r)
	w.Causal = false
	w.Grid = &Grid{T: r.T, H: r.H, W: r.W}
	if r.Kind == Video {
		w.Description = fmt.Sprintf("video DiT self-attention on a %d×%d×%d latent grid (+%d text tokens): smooth space-time features, "+
			"3-D axial RoPE (base %g), spatial, temporal, local and global heads", r.T, r.H, r.W, r.TextTokens, r.base)
	} else {
		w.Description = fmt.Sprintf("image DiT self-attention on a %d×%d latent grid (+%d text tokens): smooth 2-D features, "+
			"2-D axial RoPE (base %g), local, wide, row-axial and global heads", r.H, r.W, r.TextTokens, r.base)
	}
	w.HeadPatterns = make([]string, r.Hq)
	for h := range w.HeadPatterns {
		w.HeadPatterns[h] = pl.q[h].par.name
	}
	feats := make([]matrix, r.B)
	if err := runJobs(ctx, r.B, func(b int) { feats[b] = pl.features(b) }); err != nil {
		return err
	}
	nkv := r.B * r.Hkv
	return runJobs(ctx, nkv+r.B*r.Hq, func(i int) {
		if i < nkv {
			b, g := i/r.Hkv, i%r.Hkv
			pl.keys(w, feats[b], b, g)
			pl.values(w, feats[b], b, g)
			return
		}
		i -= nkv
		pl.queries(w, feats[i/r.Hq], i/r.Hq, i%r.Hq)
	})
}

func newVisPlan(r resolved) *visPlan {
	pl := &visPlan{r: r, axes: 3, extent: [3]int{r.T, r.H, r.W}}
	if r.Kind == Image {
		pl.axes = 2
	}
	p := r.D / 2
	// Pairs per axis: video splits like Wan (t gets the remainder), image
	// halves between y and x.
	var count [3]int
	if pl.axes == 3 {
		count[1], count[2] = p/3, p/3
		count[0] = p - 2*(p/3)
	} else {
		count[1] = p / 2
		count[2] = p - p/2
	}
	pl.theta = make([]float64, p)
	pl.lo, pl.hi = make([]int, p), make([]int, p)
	pl.axisOf = make([]int, p)
	idx := 0
	for a := range 3 {
		n := count[a]
		npos := (n + 1) / 2
		ntxt := 0
		if n >= 4 {
			ntxt = max(1, n/8)
		}
		for k := range n {
			pl.theta[idx] = dpow(r.base, -float64(k)/float64(n))
			pl.lo[idx], pl.hi[idx] = idx, idx+p
			pl.axisOf[idx] = a
			switch {
			case k < npos:
				pl.posPairs = append(pl.posPairs, idx)
			case k >= n-ntxt:
				pl.txtDims = append(pl.txtDims, idx, idx+p)
			default:
				pl.contDims = append(pl.contDims, idx, idx+p)
			}
			idx++
		}
	}
	if r.D%2 == 1 { // the odd dimension is never rotated: give it to content
		pl.contDims = append(pl.contDims, r.D-1)
	}
	if len(pl.contDims) == 0 {
		for d := range r.D {
			pl.contDims = append(pl.contDims, d)
		}
	}
	if len(pl.txtDims) == 0 {
		pl.txtDims = pl.contDims
	}
	for a := range 3 {
		ext := pl.extent[a]
		pl.sinTab[a], pl.cosTab[a] = make([]float64, ext*p), make([]float64, ext*p)
		for c := range ext {
			for f := range p {
				if pl.axisOf[f] != a {
					continue
				}
				pl.sinTab[a][c*p+f], pl.cosTab[a][c*p+f] = dsincos(float64(float64(c) * pl.theta[f]))
			}
		}
	}
	pl.sigmaXi = 1 / math.Sqrt(float64(r.D))
	s := math.Sqrt(math.Sqrt(float64(r.D)))
	pl.scaleK, pl.scaleQ = visScaleK*s, s/visScaleK
	pl.textQuery = visHeadParams{name: "text", content: 3, text: 3, noise: 0.15}
	pl.buildHeads()
	return pl
}

func (pl *visPlan) buildHeads() {
	r := pl.r
	inv := 1 / math.Sqrt(visEmbedDim)
	ncont := len(pl.contDims)
	pl.kv = make([]visKV, r.Hkv)
	for gi := range pl.kv {
		g := newRNG(r.Seed, tagVisKVParams, uint64(gi))
		kv := &pl.kv[gi]
		kv.cpos = make([]float64, r.D)
		amp := 1 / math.Sqrt(float64(max(1, len(pl.posPairs))))
		for _, f := range pl.posPairs {
			s, c := dsincos(float64(2 * math.Pi * g.uniform()))
			kv.cpos[f], kv.cpos[f+len(pl.theta)] = amp*c, amp*s
		}
		kv.utxt = make([]float64, r.D)
		for _, d := range pl.txtDims {
			kv.utxt[d] = g.norm()
		}
		normalize(kv.utxt)
		kv.wk = newMatrix(ncont, visEmbedDim).gaussian(g, inv)
		kv.wv = newMatrix(r.D, visEmbedDim).gaussian(g, inv)
	}
	pl.q = make([]visQ, r.Hq)
	group := r.Hq / r.Hkv
	for h := range pl.q {
		g := newRNG(r.Seed, tagVisQParams, uint64(h))
		kv := &pl.kv[h/group]
		q := &pl.q[h]
		q.par = visParams(r.Kind, h, r.T, r.H, r.W)
		q.wq = newMatrix(ncont, visEmbedDim).gaussian(g, 0.6*inv)
		for i, v := range kv.wk.a {
			q.wq.a[i] += v
		}
		q.posConst = make([]float64, r.D)
		pl.addKernels(q.posConst, kv.cpos, q.par)
	}
}

// addKernels adds the query-side positional vector that gives, against
// keys carrying cpos, the logit Σ_axes peak_a·Σ_p w_p cos(Δ_a θ_p), with
// Σ w_p = 1 per axis and w_p ∝ θ_p·exp(−(θ_p·width_a)²/2): a discrete
// Gaussian-like kernel of the axis's bandwidth.
func (pl *visPlan) addKernels(dst, cpos []float64, par visHeadParams) {
	p := len(pl.theta)
	amp2 := 1 / float64(max(1, len(pl.posPairs)))
	for a := range 3 {
		if par.peak[a] == 0 {
			continue
		}
		var sum float64
		w := make([]float64, p)
		for _, f := range pl.posPairs {
			if pl.axisOf[f] != a {
				continue
			}
			x := float64(pl.theta[f] * par.width[a])
			w[f] = float64(pl.theta[f] * dexp(float64(-0.5*float64(x*x))))
			sum += w[f]
		}
		if sum == 0 {
			continue
		}
		for _, f := range pl.posPairs {
			if w[f] == 0 {
				continue
			}
			s := par.peak[a] * w[f] / sum / amp2
			dst[f] += float64(s * cpos[f])
			dst[f+p] += float64(s * cpos[f+p])
		}
	}
}

// features generates batch b's token features: the smooth field over the
// grid for visual tokens, i.i.d. embeddings for text tokens.
func (pl *visPlan) features(b int) matrix {
	r := pl.r
	g := newRNG(r.Seed, tagVisInput, uint64(b))
	// Scene: lengthscales of a few tokens in space and frames in time, and
	// a global motion of up to half a token per frame.
	ls := [3]float64{3, 4, 4}
	vy, vx := g.uniform()-0.5, g.uniform()-0.5
	omega := newMatrix(visFourier, 3)
	phase := make([]float64, visFourier)
	for k := range visFourier {
		for a := range 3 {
			omega.row(k)[a] = g.norm() / ls[a]
		}
		if pl.axes == 2 {
			omega.row(k)[0] = 0
		}
		phase[k] = float64(2 * math.Pi * g.uniform())
	}
	coef := newMatrix(visFourier, visEmbedDim).gaussian(g, math.Sqrt(0.8*2/visFourier))
	x := newMatrix(r.N, visEmbedDim)
	for n := range pl.r.nVis {
		t, y, xx := float64(n/(r.H*r.W)), float64(n/r.W%r.H), float64(n%r.W)
		row := x.row(n)
		for k := range visFourier {
			o := omega.row(k)
			arg := float64(o[0]*t) + float64(o[1]*(y-float64(vy*t))) + float64(o[2]*(xx-float64(vx*t))) + phase[k]
			_, c := dsincos(arg)
			axpy(c, coef.row(k), row)
		}
		for k := range row {
			row[k] += float64(math.Sqrt(0.2) * g.noise())
		}
	}
	for n := pl.r.nVis; n < r.N; n++ {
		g.fillNorm(x.row(n), 1)
	}
	return x
}

// angles fills sin and cos with the rotation of token n (identity for
// text tokens).
func (pl *visPlan) angles(n int, sin, cos []float64) {
	if n >= pl.r.nVis {
		for f := range sin {
			sin[f], cos[f] = 0, 1
		}
		return
	}
	r := pl.r
	coord := [3]int{n / (r.H * r.W), n / r.W % r.H, n % r.W}
	p := len(pl.theta)
	for f := range p {
		a := pl.axisOf[f]
		i := coord[a]*p + f
		sin[f], cos[f] = pl.sinTab[a][i], pl.cosTab[a][i]
	}
}

func (pl *visPlan) keys(w *Workload, x matrix, b, g int) {
	r := pl.r
	kv := &pl.kv[g]
	rg := newRNG(r.Seed, tagVisK, uint64(b), uint64(g))
	row := make([]float64, r.D)
	cont := make([]float64, len(pl.contDims))
	sin, cos := make([]float64, len(pl.theta)), make([]float64, len(pl.theta))
	buf := make([]float32, r.D)
	contScale := 1 / math.Sqrt(float64(len(pl.contDims)))
	for n := range r.N {
		rg.fillNoise(row, pl.sigmaXi)
		if n < r.nVis {
			axpy(1, kv.cpos, row)
		} else {
			axpy(1, kv.utxt, row)
		}
		kv.wk.mulVec(contScale, x.row(n), cont)
		for k, d := range pl.contDims {
			row[d] += cont[k]
		}
		pl.angles(n, sin, cos)
		rotatePairs(row, pl.lo, pl.hi, sin, cos)
		for k := range row {
			row[k] = float64(row[k] * pl.scaleK)
		}
		writeRow(w.K, b, g, n, row, buf)
	}
}

func (pl *visPlan) values(w *Workload, x matrix, b, g int) {
	r := pl.r
	kv := &pl.kv[g]
	rg := newRNG(r.Seed, tagVisV, uint64(b), uint64(g))
	row := make([]float64, r.D)
	buf := make([]float32, r.D)
	for n := range r.N {
		kv.wv.mulVec(1, x.row(n), row)
		for k := range row {
			row[k] += float64(0.3 * rg.noise())
		}
		writeRow(w.V, b, g, n, row, buf)
	}
}

func (pl *visPlan) queries(w *Workload, x matrix, b, h int) {
	r := pl.r
	q := &pl.q[h]
	kv := &pl.kv[h/(r.Hq/r.Hkv)]
	rg := newRNG(r.Seed, tagVisQ, uint64(b), uint64(h))
	row := make([]float64, r.D)
	cont := make([]float64, len(pl.contDims))
	sin, cos := make([]float64, len(pl.theta)), make([]float64, len(pl.theta))
	buf := make([]float32, r.D)
	for n := range r.N {
		par := &q.par
		if n >= r.nVis {
			par = &pl.textQuery
		}
		rg.fillNoise(row, par.noise/math.Sqrt(float64(r.D)))
		if n < r.nVis {
			axpy(1, q.posConst, row)
		}
		if r.TextTokens > 0 {
			axpy(par.text, kv.utxt, row)
		}
		q.wq.mulVec(par.content/math.Sqrt(float64(len(pl.contDims))), x.row(n), cont)
		for k, d := range pl.contDims {
			row[d] += cont[k]
		}
		pl.angles(n, sin, cos)
		rotatePairs(row, pl.lo, pl.hi, sin, cos)
		for k := range row {
			row[k] = float64(row[k] * pl.scaleQ)
		}
		writeRow(w.Q, b, h, n, row, buf)
	}
}
