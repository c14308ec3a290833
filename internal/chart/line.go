package chart

import (
	"fmt"
	"image"
	"math"
	"slices"
	"strconv"
)

// Series is one line of a LinePlot: points (X[i], Y[i]) joined in order of X.
type Series struct {
	Name string
	X, Y []float64
}

// LinePlot is a plot of one or more series against shared axes, with a
// legend to the right of the axes.
type LinePlot struct {
	Title, XLabel, YLabel string
	// LogY puts the y axis on a log scale; points with y ≤ 0 are then left
	// out (and break their line), as are non-finite points on any scale.
	LogY bool
	// XMin and XMax fix the x range when XMax > XMin; otherwise it fits
	// the data with a small margin.
	XMin, XMax float64
	Series     []Series
}

// axis maps data values to pixels along one direction.
type axis struct {
	lo, hi   float64 // data range (log10 of it on a log axis)
	log      bool
	p0, p1   int // pixels of lo and hi
	ticks    []float64
	labelled []bool
}

func (a axis) pixel(v float64) int {
	if a.log {
		v = math.Log10(v)
	}
	return int(math.Round(float64(a.p0) + (v-a.lo)/(a.hi-a.lo)*float64(a.p1-a.p0)))
}

// ok reports whether v can be placed on the axis.
func (a axis) ok(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!a.log || v > 0)
}

// layout is where a LinePlot's parts go in a width×height image.
type layout struct {
	plot   image.Rectangle // the axes' inner area
	x, y   axis
	legend image.Point // top-left of the legend
}

// Render draws the plot in a width×height image.
func (p *LinePlot) Render(width, height int) (*image.RGBA, error) {
	l, err := p.layout(width, height)
	if err != nil {
		return nil, err
	}
	c := newCanvas(width, height)
	// Grid, ticks and tick labels.
	for i, t := range l.x.ticks {
		px := l.x.pixel(t)
		c.fill(image.Rect(px, l.plot.Min.Y, px+1, l.plot.Max.Y), gridInk)
		c.fill(image.Rect(px, l.plot.Max.Y, px+1, l.plot.Max.Y+4), frameInk)
		if l.x.labelled[i] {
			c.textCentered(px, l.plot.Max.Y+padding, formatTick(t, l.x), Ink)
		}
	}
	for i, t := range l.y.ticks {
		py := l.y.pixel(t)
		c.fill(image.Rect(l.plot.Min.X, py, l.plot.Max.X, py+1), gridInk)
		tick := 4
		if !l.y.labelled[i] {
			tick = 2
		}
		c.fill(image.Rect(l.plot.Min.X-tick, py, l.plot.Min.X, py+1), frameInk)
		if l.y.labelled[i] {
			s := formatTick(t, l.y)
			c.text(l.plot.Min.X-padding-textWidth(s), py-lineH/2, s, Ink)
		}
	}
	c.frame(l.plot.Inset(-1), frameInk)
	// Title and axis labels.
	c.textCentered((l.plot.Min.X+l.plot.Max.X)/2, padding, p.Title, Ink)
	c.textCentered((l.plot.Min.X+l.plot.Max.X)/2, l.plot.Max.Y+padding+lineH+padding, p.XLabel, Ink)
	c.textUp(padding, (l.plot.Min.Y+l.plot.Max.Y)/2, p.YLabel, Ink)
	// Series, clipped to the axes.
	c.clip = l.plot
	for i, s := range p.Series {
		col := Palette(i)
		pts := l.points(s)
		for j := 1; j < len(pts); j++ {
			if pts[j-1].ok && pts[j].ok {
				c.line(pts[j-1].X, pts[j-1].Y, pts[j].X, pts[j].Y, 2, col)
			}
		}
		for _, pt := range pts {
			if pt.ok {
				c.marker(i, pt.X, pt.Y, 4, col)
			}
		}
	}
	// Legend.
	c.clip = c.img.Bounds()
	for i, s := range p.Series {
		y := l.legend.Y + i*(lineH+4)
		col := Palette(i)
		c.line(l.legend.X, y+lineH/2, l.legend.X+20, y+lineH/2, 2, col)
		c.marker(i, l.legend.X+10, y+lineH/2, 4, col)
		c.text(l.legend.X+26, y, s.Name, Ink)
	}
	return c.img, nil
}

// point is a series point in pixels; ok is false where it cannot be drawn.
type point struct {
	image.Point
	ok bool
}

// points returns the series' points in pixels, in order of x.
func (l *layout) points(s Series) []point {
	idx := make([]int, len(s.X))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case s.X[a] < s.X[b]:
			return -1
		case s.X[a] > s.X[b]:
			return 1
		}
		return 0
	})
	pts := make([]point, len(idx))
	for j, i := range idx {
		x, y := s.X[i], s.Y[i]
		if l.x.ok(x) && l.y.ok(y) {
			pts[j] = point{image.Pt(l.x.pixel(x), l.y.pixel(y)), true}
		}
	}
	return pts
}

func (p *LinePlot) layout(width, height int) (*layout, error) {
	if width < 200 || height < 150 || width > MaxSide || height > MaxSide {
		return nil, fmt.Errorf("%w: size %d×%d; width must be in 200..%d and height in 150..%d", ErrInvalid, width, height, MaxSide, MaxSide)
	}
	var xs, ys []float64
	for _, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("%w: series %q has %d x values and %d y values", ErrInvalid, s.Name, len(s.X), len(s.Y))
		}
		for i := range s.X {
			if finite(s.X[i]) && finite(s.Y[i]) && (!p.LogY || s.Y[i] > 0) {
				xs = append(xs, s.X[i])
				ys = append(ys, s.Y[i])
			}
		}
	}
	l := &layout{}
	if p.XMax > p.XMin {
		l.x.lo, l.x.hi = p.XMin, p.XMax
	} else {
		l.x.lo, l.x.hi = padRange(xs)
	}
	l.x.ticks, l.x.labelled = linearTicks(l.x.lo, l.x.hi)
	l.y.log = p.LogY
	if p.LogY {
		l.y.lo, l.y.hi, l.y.ticks, l.y.labelled = logTicks(ys)
	} else {
		l.y.lo, l.y.hi = padRange(ys)
		l.y.ticks, l.y.labelled = linearTicks(l.y.lo, l.y.hi)
	}
	// Margins: y tick labels and the rotated y label on the left, legend
	// on the right, title on top, x tick labels and x label below.
	left := padding + lineH + padding
	for i, t := range l.y.ticks {
		if l.y.labelled[i] {
			left = max(left, padding+lineH+2*padding+textWidth(formatTick(t, l.y)))
		}
	}
	legendW := 0
	for _, s := range p.Series {
		legendW = max(legendW, 26+textWidth(s.Name))
	}
	if legendW > 0 {
		legendW += 2 * padding
	}
	top := 2*padding + lineH
	bottom := 3*padding + 2*lineH
	l.plot = image.Rect(left, top, width-padding-legendW, height-bottom)
	if l.plot.Dx() < 50 || l.plot.Dy() < 50 {
		return nil, fmt.Errorf("%w: %d×%d leaves no room for the axes after labels and legend; make the image larger", ErrInvalid, width, height)
	}
	l.x.p0, l.x.p1 = l.plot.Min.X, l.plot.Max.X-1
	l.y.p0, l.y.p1 = l.plot.Max.Y-1, l.plot.Min.Y
	l.legend = image.Pt(l.plot.Max.X+2*padding, l.plot.Min.Y)
	return l, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// padRange is the range of xs widened by 5% on each side, or [0, 1] when
// xs is empty, and ±0.5 around a single value.
func padRange(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 1
	}
	lo, hi = slices.Min(xs), slices.Max(xs)
	if hi == lo {
		d := max(math.Abs(lo)*0.1, 0.05)
		return lo - d, hi + d
	}
	d := 0.05 * (hi - lo)
	return lo - d, hi + d
}

// linearTicks returns three to eight round ticks (1, 2 or 5 × 10^k apart)
// within [lo, hi], all labelled.
func linearTicks(lo, hi float64) (ticks []float64, labelled []bool) {
	step := niceStep((hi - lo) / 7)
	for i := math.Ceil(lo / step); i*step <= hi+step*1e-9; i++ {
		ticks = append(ticks, i*step)
		labelled = append(labelled, true)
	}
	return ticks, labelled
}

func niceStep(raw float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*e {
			return m * e
		}
	}
	return 10 * e
}

// logTicks fits whole decades around the positive ys and returns the range
// in log10 units, with labelled ticks at the decades (and at 2 and 5 when
// the data span a single decade) and unlabelled ones at 2..9.
func logTicks(ys []float64) (lo, hi float64, ticks []float64, labelled []bool) {
	if len(ys) == 0 {
		return -1, 0, []float64{0.1, 1}, []bool{true, true}
	}
	lo, hi = math.Floor(math.Log10(slices.Min(ys))), math.Ceil(math.Log10(slices.Max(ys)))
	if hi == lo {
		hi++
	}
	few := hi-lo <= 1
	// At most ~8 labelled decades: label every k-th one.
	every := int(math.Ceil((hi - lo) / 8))
	for d := lo; d <= hi; d++ {
		base := math.Pow(10, d)
		ticks = append(ticks, base)
		labelled = append(labelled, int(d-lo)%every == 0)
		if d == hi {
			break
		}
		for m := 2; m <= 9; m++ {
			ticks = append(ticks, float64(m)*base)
			labelled = append(labelled, few && (m == 2 || m == 5))
		}
	}
	return lo, hi, ticks, labelled
}

// formatTick writes a tick value compactly: 1e-3 style on a log axis,
// with as many decimals as the tick spacing needs on a linear one.
func formatTick(v float64, a axis) string {
	if a.log {
		e := math.Floor(math.Log10(v) + 1e-9)
		m := v / math.Pow(10, e)
		if math.Abs(m-1) < 1e-9 {
			return fmt.Sprintf("1e%d", int(e))
		}
		return fmt.Sprintf("%.0fe%d", m, int(e))
	}
	if len(a.ticks) < 2 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	step := a.ticks[1] - a.ticks[0]
	dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	if math.Abs(v) < step*1e-9 {
		v = 0
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}
