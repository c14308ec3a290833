package chart

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strconv"
)

// Panel is one heatmap of a Grid: a matrix of coloured cells with a title
// and either a legend of categorical keys or a colour bar below it.
type Panel struct {
	Title string
	// Cells[r][c] colours row r (top to bottom), column c (left to
	// right). Every row has the same length.
	Cells [][]color.RGBA
	// Keys is a legend of categorical colours; nil for none.
	Keys []Key
	// Scale draws a colour bar; nil for none.
	Scale *ColorScale
}

// Key is one legend entry: a colour and what it means.
type Key struct {
	Label string
	Color color.RGBA
}

// ColorScale maps values in [Lo, Hi] (log-spaced when Log) to colours
// through Map, which takes a fraction in [0, 1]. Values outside the range
// are clamped; non-finite ones and, on a log scale, non-positive ones get
// the colour of Lo.
type ColorScale struct {
	Label  string
	Lo, Hi float64
	Log    bool
	Map    func(t float64) color.RGBA
}

// Color returns the colour of v.
func (s *ColorScale) Color(v float64) color.RGBA {
	return s.Map(s.fraction(v))
}

func (s *ColorScale) fraction(v float64) float64 {
	lo, hi := s.Lo, s.Hi
	if s.Log {
		if !(v > 0) {
			return 0
		}
		lo, hi, v = math.Log10(lo), math.Log10(hi), math.Log10(v)
	}
	if !finite(v) || !(hi > lo) {
		return 0
	}
	return min(1, max(0, (v-lo)/(hi-lo)))
}

// viridis anchors, sampled from matplotlib's viridis at t = 0, 1/8, ..., 1:
// perceptually uniform, readable in grey and for colour-blind readers.
var viridis = [...]color.RGBA{
	{68, 1, 84, 255}, {71, 44, 122, 255}, {59, 81, 139, 255}, {44, 113, 142, 255},
	{33, 144, 141, 255}, {39, 173, 129, 255}, {92, 200, 99, 255}, {170, 220, 50, 255},
	{253, 231, 37, 255},
}

// Viridis maps t in [0, 1] to the viridis colour map (clamped), interpolating
// linearly between nine anchors.
func Viridis(t float64) color.RGBA {
	if !(t > 0) {
		return viridis[0]
	}
	if t >= 1 {
		return viridis[len(viridis)-1]
	}
	f := t * float64(len(viridis)-1)
	i := int(f)
	w := f - float64(i)
	a, b := viridis[i], viridis[i+1]
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x)*(1-w) + float64(y)*w)) }
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 255}
}

// Grid is a figure of panels laid out in rows, each panel drawn in a
// PanelSize×PanelSize square with cells sampled nearest-neighbour.
type Grid struct {
	Title     string
	Panels    []Panel
	PanelSize int // pixels per panel side; 0 means 320
	Columns   int // panels per row; 0 means min(len(Panels), 4)
	// XLabel and YLabel name the cell axes of every panel, e.g. "key
	// block" and "query block".
	XLabel, YLabel string
}

// Geometry of a Grid cell: title above, panel, axis label and keys below.
const (
	keysRows = 3
	barH     = 10
)

// Render draws the grid.
func (g *Grid) Render() (*image.RGBA, error) {
	size := g.PanelSize
	if size == 0 {
		size = 320
	}
	if len(g.Panels) == 0 {
		return nil, fmt.Errorf("%w: a grid needs at least one panel", ErrInvalid)
	}
	if size < 32 || size > 2048 {
		return nil, fmt.Errorf("%w: panel size %d must be in 32..2048", ErrInvalid, size)
	}
	cols := g.Columns
	if cols <= 0 {
		cols = min(len(g.Panels), 4)
	}
	for i, p := range g.Panels {
		if len(p.Cells) == 0 || len(p.Cells[0]) == 0 {
			return nil, fmt.Errorf("%w: panel %d (%q) has no cells", ErrInvalid, i, p.Title)
		}
		for r := range p.Cells {
			if len(p.Cells[r]) != len(p.Cells[0]) {
				return nil, fmt.Errorf("%w: panel %d (%q): row %d has %d cells, row 0 has %d", ErrInvalid, i, p.Title, r, len(p.Cells[r]), len(p.Cells[0]))
			}
		}
		if p.Scale != nil && p.Scale.Map == nil {
			return nil, fmt.Errorf("%w: panel %d (%q): colour scale has no Map", ErrInvalid, i, p.Title)
		}
	}
	rows := (len(g.Panels) + cols - 1) / cols
	left := 2*padding + lineH + textWidth("0000") // rotated y label, row ticks
	cellW := left + size + 2*padding
	cellH := lineH + padding + size + padding + lineH + padding + keysRows*(lineH+2) + padding
	top := padding
	if g.Title != "" {
		top += lineH + padding
	}
	width, height := cols*cellW+padding, top+rows*cellH
	if width > MaxSide || height > MaxSide {
		return nil, fmt.Errorf("%w: %d panels of %d px make a %d×%d image, over %d; use fewer panels or a smaller size", ErrInvalid, len(g.Panels), size, width, height, MaxSide)
	}
	c := newCanvas(width, height)
	if g.Title != "" {
		c.textCentered(width/2, padding, g.Title, Ink)
	}
	for i, p := range g.Panels {
		x0 := (i%cols)*cellW + left
		y0 := top + (i/cols)*cellH
		g.drawPanel(c, p, x0, y0, size)
	}
	return c.img, nil
}

// panelRect is where a panel's cells go, given the cell's top-left corner.
func panelRect(x0, y0, size int) image.Rectangle {
	return image.Rect(x0, y0+lineH+padding, x0+size, y0+lineH+padding+size)
}

func (g *Grid) drawPanel(c *canvas, p Panel, x0, y0, size int) {
	c.text(x0, y0, p.Title, Ink)
	r := panelRect(x0, y0, size)
	nr, nc := len(p.Cells), len(p.Cells[0])
	for py := range size {
		row := p.Cells[py*nr/size]
		for px := range size {
			c.img.SetRGBA(r.Min.X+px, r.Min.Y+py, row[px*nc/size])
		}
	}
	c.frame(r.Inset(-1), frameInk)
	// Axis ends: 0 at the top-left corner, the last index at the far ends.
	c.text(r.Min.X-padding-textWidth("0"), r.Min.Y, "0", Ink)
	last := strconv.Itoa(nr - 1)
	c.text(r.Min.X-padding-textWidth(last), r.Max.Y-lineH, last, Ink)
	c.textUp(r.Min.X-padding-lineH-textWidth("0000"), (r.Min.Y+r.Max.Y)/2, g.YLabel, Ink)
	below := r.Max.Y + padding
	c.text(r.Min.X, below, "0", Ink)
	last = strconv.Itoa(nc - 1)
	c.text(r.Max.X-textWidth(last), below, last, Ink)
	c.textCentered((r.Min.X+r.Max.X)/2, below, g.XLabel, Ink)
	y := below + lineH + padding
	if p.Scale != nil {
		// The colour bar, its range at the ends and its label centred.
		bar := image.Rect(r.Min.X, y, r.Max.X, y+barH)
		for px := range bar.Dx() {
			col := p.Scale.Map(float64(px) / float64(max(bar.Dx()-1, 1)))
			c.fill(image.Rect(bar.Min.X+px, bar.Min.Y, bar.Min.X+px+1, bar.Max.Y), col)
		}
		lo, hi := formatScale(p.Scale.Lo, p.Scale.Log), formatScale(p.Scale.Hi, p.Scale.Log)
		c.text(r.Min.X, y+barH+2, lo, Ink)
		c.text(r.Max.X-textWidth(hi), y+barH+2, hi, Ink)
		c.textCentered((r.Min.X+r.Max.X)/2, y+barH+2, p.Scale.Label, Ink)
		y += barH + lineH + 4
	}
	// Keys flow left to right, wrapping at the panel's width.
	x := r.Min.X
	for _, k := range p.Keys {
		w := 14 + textWidth(k.Label) + 2*padding
		if x > r.Min.X && x+w > r.Max.X {
			x, y = r.Min.X, y+lineH+2
		}
		sw := image.Rect(x, y+2, x+10, y+12)
		c.fill(sw, k.Color)
		c.frame(sw, frameInk)
		c.text(x+14, y, k.Label, Ink)
		x += w
	}
}

func formatScale(v float64, log bool) string {
	if log {
		return fmt.Sprintf("%.0e", v)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
