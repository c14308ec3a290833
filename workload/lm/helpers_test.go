package lm

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"
)

// testModel is a random model in float64: the exact values a weight file
// encodes (scale·q), and the file itself.
type testModel struct {
	cfg    Config
	emb    [][]float64 // [vocab][d]
	layers []testLayer
	final  []float64
	file   []byte
}

type testLayer struct {
	attnNorm, mlpNorm          []float64
	wq, wk, wv, wo, w1, w3, w2 [][]float64 // [out][in], as PyTorch's Linear
}

// newTestModel draws a random model of shape cfg and encodes it.
func newTestModel(rng *rand.Rand, cfg Config) *testModel {
	m := &testModel{cfg: cfg}
	buf := []byte(magic)
	for _, u := range []int{cfg.Vocab, cfg.DModel, cfg.Layers, cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.Hidden, 0} {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(u))
	}
	buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(cfg.RoPEBase)))
	buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(cfg.NormEps)))
	m.cfg.RoPEBase, m.cfg.NormEps = float64(float32(cfg.RoPEBase)), float64(float32(cfg.NormEps))
	mat := func(rows, cols int, gain float64) [][]float64 {
		w := make([][]float64, rows)
		qs := make([]byte, 0, rows*cols)
		for i := range w {
			row := make([]float64, cols)
			mx := 0.0
			for j := range row {
				row[j] = rng.NormFloat64() * gain / math.Sqrt(float64(cols))
				mx = max(mx, math.Abs(row[j]))
			}
			s := float32(mx / 127)
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(s))
			for j := range row {
				q := int8(math.Round(row[j] / float64(s)))
				qs = append(qs, byte(q))
				row[j] = float64(s) * float64(q)
			}
			w[i] = row
		}
		buf = append(buf, qs...)
		return w
	}
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(float32(0.5 + rng.Float64()))
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(v[i])))
		}
		return v
	}
	d, q, kv := cfg.DModel, cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	m.emb = mat(cfg.Vocab, d, 1)
	for range cfg.Layers {
		var l testLayer
		l.attnNorm = vec(d)
		l.wq, l.wk, l.wv, l.wo = mat(q, d, 2), mat(kv, d, 2), mat(kv, d, 1), mat(d, q, 0.5)
		l.mlpNorm = vec(d)
		l.w1, l.w3, l.w2 = mat(cfg.Hidden, d, 1), mat(cfg.Hidden, d, 1), mat(d, cfg.Hidden, 0.5)
		m.layers = append(m.layers, l)
	}
	m.final = vec(d)
	m.file = binary.LittleEndian.AppendUint32(buf, crc32.ChecksumIEEE(buf))
	return m
}

// refPass is the float64 reference forward pass: every layer's Q, K
// (after RoPE), V and attention output as [head][pos][dim], and the
// log2-probabilities [pos][byte].
type refPass struct {
	q, k, v, out [][][][]float64 // [layer][head][pos][dim]
	logp2        [][]float64
	bits         float64
}

func linear(w [][]float64, x []float64) []float64 {
	y := make([]float64, len(w))
	for i, row := range w {
		for j, a := range row {
			y[i] += a * x[j]
		}
	}
	return y
}

func rmsNorm64(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * inv * w[i]
	}
	return y
}

// forward64 runs the model in float64 with dense causal attention.
func (m *testModel) forward64(text []byte) *refPass {
	c := m.cfg
	n, hd, half := len(text), c.HeadDim, c.HeadDim/2
	xs := make([][]float64, n)
	for i, b := range text {
		xs[i] = append([]float64(nil), m.emb[b]...)
	}
	r := &refPass{}
	split := func(y []float64, heads, pos int, dst [][][]float64, rot bool) {
		for h := range heads {
			v := append([]float64(nil), y[h*hd:(h+1)*hd]...)
			if rot {
				for i := range half {
					a := float64(pos) * math.Pow(c.RoPEBase, -float64(2*i)/float64(hd))
					x1, x2 := v[i], v[i+half]
					v[i], v[i+half] = x1*math.Cos(a)-x2*math.Sin(a), x2*math.Cos(a)+x1*math.Sin(a)
				}
			}
			dst[h][pos] = v
		}
	}
	alloc := func(heads int) [][][]float64 {
		t := make([][][]float64, heads)
		for h := range t {
			t[h] = make([][]float64, n)
		}
		return t
	}
	for _, l := range m.layers {
		q, k, v, out := alloc(c.Heads), alloc(c.KVHeads), alloc(c.KVHeads), alloc(c.Heads)
		for p := range n {
			a := rmsNorm64(xs[p], l.attnNorm, c.NormEps)
			split(linear(l.wq, a), c.Heads, p, q, true)
			split(linear(l.wk, a), c.KVHeads, p, k, true)
			split(linear(l.wv, a), c.KVHeads, p, v, false)
		}
		group := c.Heads / c.KVHeads
		for h := range c.Heads {
			for p := range n {
				s := make([]float64, p+1)
				mx := math.Inf(-1)
				for j := range s {
					for i := range hd {
						s[j] += q[h][p][i] * k[h/group][j][i]
					}
					s[j] /= math.Sqrt(float64(hd))
					mx = max(mx, s[j])
				}
				var z float64
				o := make([]float64, hd)
				for j := range s {
					e := math.Exp(s[j] - mx)
					z += e
					for i := range hd {
						o[i] += e * v[h/group][j][i]
					}
				}
				for i := range o {
					o[i] /= z
				}
				out[h][p] = o
			}
		}
		r.q, r.k, r.v, r.out = append(r.q, q), append(r.k, k), append(r.v, v), append(r.out, out)
		for p := range n {
			cat := make([]float64, 0, c.Heads*hd)
			for h := range c.Heads {
				cat = append(cat, out[h][p]...)
			}
			for i, y := range linear(l.wo, cat) {
				xs[p][i] += y
			}
			a := rmsNorm64(xs[p], l.mlpNorm, c.NormEps)
			g, u := linear(l.w1, a), linear(l.w3, a)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			for i, y := range linear(l.w2, g) {
				xs[p][i] += y
			}
		}
	}
	for p := range n {
		f := rmsNorm64(xs[p], m.final, c.NormEps)
		logits := linear(m.emb, f)
		mx := math.Inf(-1)
		for _, v := range logits {
			mx = max(mx, v)
		}
		var z float64
		for _, v := range logits {
			z += math.Exp(v - mx)
		}
		lp := make([]float64, len(logits))
		for i, v := range logits {
			lp[i] = (v - mx - math.Log(z)) / math.Ln2
		}
		r.logp2 = append(r.logp2, lp)
		if p+1 < n {
			r.bits -= lp[text[p+1]]
		}
	}
	return r
}
