package s2o

import "github.com/sparseattn/sparseattn/internal/kernel"

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
// at most panelRows rows) and every key j < vis[r] of the panels keyT, and
// hands them to emit in increasing j, panelStep keys at a time: emit(r,
// j0, s) gets keys j0, j0+1, … in s.
func (p *panelScratch) scores(rows []float32, d int, keyT []float32, vis []int, emit func(r, j0 int, s []float64)) {
	n := len(rows) / d
	if cap(p.a) < panelRows*d {
		p.a = make([]float64, panelRows*d)
	}
	a := p.a[:panelRows*d]
	for i, x := range rows {
		a[i] = float64(x)
	}
	clear(a[n*d:])
	most := 0
	for _, v := range vis[:n] {
		most = max(most, v)
	}
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
