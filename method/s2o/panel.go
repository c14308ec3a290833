package s2o

import (
	"github.com/sparseattn/sparseattn/internal/kernel"
	"github.com/sparseattn/sparseattn/plan"
)

// panels says whether scores runs kernel.Dot64Panel8 (in AVX-512 assembly
// here) on interleaved key panels; otherwise it runs plan.Dot64x4 on the
// row-major keys, which the portable Dot64Panel8 is slower than (16K, one
// core: 140 ms against 86 without the outlier query). Both give
// plan.Dot64's bits.
var panels = kernel.Accelerated() == "avx512"

// panelRows is how many rows (mean queries, outlier queries) one
// kernel.Dot64Panel8 call scores against the key panels.
const panelRows = 8

// panelStep is how many keys one kernel.Dot64Panel8 call scores: two
// interleaved panels.
const panelStep = 2 * kernel.Dot64Lanes

// panelKeys is nk rounded up to whole calls of kernel.Dot64Panel8.
func panelKeys(nk int) int { return (nk + panelStep - 1) / panelStep * panelStep }

// interleave writes the row-major keys (d columns) into keyT in
// kernel.Dot64Panel's interleaved panels: key j's element e at
// keyT[j/8·8·d + e·8 + j%8]. The padding keys up to panelKeys stay zero.
func interleave(keyT, keys []float32, d int) {
	const lanes = kernel.Dot64Lanes
	for j := range len(keys) / d {
		panel := keyT[j/lanes*lanes*d:]
		for e, x := range keys[j*d : (j+1)*d] {
			panel[e*lanes+j%lanes] = x
		}
	}
}

// panelScratch is scores's reusable buffers.
type panelScratch struct {
	a   []float64 // panelRows rows of d values, float32 values widened
	out [panelRows * panelStep]float64
}

// scores computes Dot64(row r, key j) — plan.Dot64's bits, Score before
// its rounding to float32 — for every row r of rows (row-major, d columns,
// at most panelRows rows) and every key j < vis[r], from the panels keyT
// (panels) or the row-major keys, and hands them to emit in increasing j,
// panelStep keys at a time: emit(r, j0, s) gets keys j0, j0+1, … in s.
func (p *panelScratch) scores(rows []float32, d int, keyT, keys []float32, vis []int, emit func(r, j0 int, s []float64)) {
	n := len(rows) / d
	most := 0
	for _, v := range vis[:n] {
		most = max(most, v)
	}
	if !panels {
		for j0 := 0; j0 < most; j0 += panelStep {
			for r := range n {
				m := min(panelStep, vis[r]-j0)
				if m <= 0 {
					continue
				}
				x, out := rows[r*d:(r+1)*d], p.out[:m]
				i := 0
				for ; i+4 <= m; i += 4 {
					j := (j0 + i) * d
					out[i], out[i+1], out[i+2], out[i+3] = plan.Dot64x4(x, keys[j:j+d], keys[j+d:j+2*d], keys[j+2*d:j+3*d], keys[j+3*d:j+4*d])
				}
				for ; i < m; i++ {
					out[i] = plan.Dot64(keys[(j0+i)*d:(j0+i+1)*d], x)
				}
				emit(r, j0, out)
			}
		}
		return
	}
	if cap(p.a) < panelRows*d {
		p.a = make([]float64, panelRows*d)
	}
	a := p.a[:panelRows*d]
	for i, x := range rows {
		a[i] = float64(x)
	}
	clear(a[n*d:])
	for j0 := 0; j0 < most; j0 += panelStep {
		kernel.Dot64Panel8(a, d, d, keyT[j0*d:], p.out[:])
		for r := range n {
			if keys := min(panelStep, vis[r]-j0); keys > 0 {
				emit(r, j0, p.out[r*panelStep:r*panelStep+keys])
			}
		}
	}
}

// grow returns x resliced to n values, reallocated when it is too short.
func grow(x []float32, n int) []float32 {
	if cap(x) < n {
		return make([]float32, n)
	}
	return x[:n]
}

// grow64 is grow for float64 values.
func grow64(x []float64, n int) []float64 {
	if cap(x) < n {
		return make([]float64, n)
	}
	return x[:n]
}

// meanInto sets m to the mean of the rows of the row-major matrix x (len(m)
// columns), as meanRows does; zeros when x is empty.
func meanInto(m, x []float32, d int) {
	copy(m, meanRows(x, d, 0, len(x)/d))
}
