package permute

// Cell is one visual token's position in a T×H×W grid.
type Cell struct{ T, H, W int }

// vec is a 3-vector of grid steps, in (w, h, t) axes.
type vec [3]int

func (a vec) add(b vec) vec { return vec{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }
func (a vec) sub(b vec) vec { return vec{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }
func (a vec) neg() vec      { return vec{-a[0], -a[1], -a[2]} }

// half halves each component, rounding toward zero.
func (a vec) half() vec { return vec{a[0] / 2, a[1] / 2, a[2] / 2} }

// unit is the sign of each component: the direction of an axis-aligned vec.
func (a vec) unit() vec { return vec{sign(a[0]), sign(a[1]), sign(a[2])} }

// length is the number of cells an axis-aligned vec spans.
func (a vec) length() int { return abs(a[0] + a[1] + a[2]) }

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// HilbertCurve returns every cell of a t×h×w grid once, in the order of a
// generalized Hilbert curve that works for any sizes, not only powers of
// two. The recursion is Červený's "gilbert" construction (the generalized
// Hilbert curve, 2018): a box spanned by a major axis a and two minor axes b
// and c is cut in half along its long axes, preferring even halves, and the
// parts are visited in Hilbert order with rotated axes, so that each part
// ends next to where the next one starts.
//
// When every side is even, or the box is flat (a side of 1), consecutive
// cells are grid neighbours (they differ by one in one coordinate). Odd
// sides can force a few diagonal steps; TestHilbertAdjacency measures how
// many. It returns nil if a side is not positive.
func HilbertCurve(t, h, w int) []Cell {
	if t <= 0 || h <= 0 || w <= 0 {
		return nil
	}
	out := make([]Cell, 0, t*h*w)
	emit := func(p vec) { out = append(out, Cell{T: p[2], H: p[1], W: p[0]}) }
	// The longest side is the major axis, so the curve runs along it first.
	x, y, z := vec{w, 0, 0}, vec{0, h, 0}, vec{0, 0, t}
	switch {
	case w >= h && w >= t:
		gilbert(vec{}, x, y, z, emit)
	case h >= w && h >= t:
		gilbert(vec{}, y, x, z, emit)
	default:
		gilbert(vec{}, z, x, y, emit)
	}
	return out
}

// gilbert emits the cells of the box at origin p spanned by a (major), b
// and c, starting at p and ending at a corner adjacent to the box's far end
// along a. The recursion depth is logarithmic in the sides.
func gilbert(p, a, b, c vec, emit func(vec)) {
	w, h, d := a.length(), b.length(), c.length()
	da, db, dc := a.unit(), b.unit(), c.unit()

	// A line of cells: walk it.
	switch {
	case h == 1 && d == 1:
		line(p, da, w, emit)
		return
	case w == 1 && d == 1:
		line(p, db, h, emit)
		return
	case w == 1 && h == 1:
		line(p, dc, d, emit)
		return
	}

	a2, b2, c2 := a.half(), b.half(), c.half()
	// Prefer even halves: an odd half would leave the sub-curve's exit on
	// the wrong side of its box.
	if a2.length()%2 == 1 && w > 2 {
		a2 = a2.add(da)
	}
	if b2.length()%2 == 1 && h > 2 {
		b2 = b2.add(db)
	}
	if c2.length()%2 == 1 && d > 2 {
		c2 = c2.add(dc)
	}

	switch {
	case 2*w > 3*h && 2*w > 3*d:
		// Long along a: two boxes side by side.
		gilbert(p, a2, b, c, emit)
		gilbert(p.add(a2), a.sub(a2), b, c, emit)
	case 3*h > 4*d:
		// Flat in c: a 2-D Hilbert step in the a-b plane, c kept whole.
		gilbert(p, b2, c, a2, emit)
		gilbert(p.add(b2), a, b.sub(b2), c, emit)
		gilbert(p.add(a.sub(da)).add(b2.sub(db)), b2.neg(), c, a.sub(a2).neg(), emit)
	case 3*d > 4*h:
		// Flat in b: a 2-D Hilbert step in the a-c plane, b kept whole.
		gilbert(p, c2, a2, b, emit)
		gilbert(p.add(c2), a, b, c.sub(c2), emit)
		gilbert(p.add(a.sub(da)).add(c2.sub(dc)), c2.neg(), a.sub(a2).neg(), b, emit)
	default:
		// The 3-D Hilbert step: five boxes covering the eight octants.
		gilbert(p, b2, c2, a2, emit)
		gilbert(p.add(b2), c, a2, b.sub(b2), emit)
		gilbert(p.add(b2.sub(db)).add(c.sub(dc)), a, b2.neg(), c.sub(c2).neg(), emit)
		gilbert(p.add(a.sub(da)).add(b2).add(c.sub(dc)), c.neg(), a.sub(a2).neg(), b.sub(b2), emit)
		gilbert(p.add(a.sub(da)).add(b2.sub(db)), b2.neg(), c2, a.sub(a2).neg(), emit)
	}
}

func line(p, step vec, n int, emit func(vec)) {
	for range n {
		emit(p)
		p = p.add(step)
	}
}

// rowMajor lists cells with w fastest, then h, then t: the native order of
// video latents (workload.Grid, and most diffusion transformers).
func rowMajor(t, h, w int) []Cell {
	return nested(t, h, w, func(ti, hi, wi int) Cell { return Cell{ti, hi, wi} })
}

// columnMajor lists cells with h fastest, then w, then t.
func columnMajor(t, h, w int) []Cell {
	return nested(t, w, h, func(ti, wi, hi int) Cell { return Cell{ti, hi, wi} })
}

// timeMajor lists cells with t fastest, then w, then h.
func timeMajor(t, h, w int) []Cell {
	return nested(h, w, t, func(hi, wi, ti int) Cell { return Cell{ti, hi, wi} })
}

// nested lists cell(a, b, c) for a < na, b < nb, c < nc, c fastest.
func nested(na, nb, nc int, cell func(a, b, c int) Cell) []Cell {
	out := make([]Cell, 0, na*nb*nc)
	for a := range na {
		for b := range nb {
			for c := range nc {
				out = append(out, cell(a, b, c))
			}
		}
	}
	return out
}
