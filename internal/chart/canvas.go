// Package chart draws the two kinds of figure sparseattn shows its users, as
// PNG images: line plots (error against sparsity, one line per method) and
// grids of block heatmaps (true attention mass next to each method's plan).
//
// It rasterises on the standard library's image package: straight lines,
// rectangles and markers are a few dozen lines of integer code, and text
// uses the 7×13 fixed bitmap font of golang.org/x/image/font/basicfont,
// the Go team's own font package. gonum.org/v1/plot would draw prettier
// figures but brings a large dependency tree (vector backends, TrueType
// fonts, PDF/SVG writers) for two figure types; x/image adds one module
// maintained with the standard library. The font covers printable ASCII
// only (other characters draw as a replacement box), so labels keep to it.
// Output is deterministic: the same figure always encodes to the same bytes.
package chart

import (
	"errors"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// ErrInvalid is wrapped by every error about a figure that cannot be drawn.
var ErrInvalid = errors.New("chart: invalid figure")

// MaxSide is the largest width or height, in pixels, a figure may have.
const MaxSide = 8192

// Colours used by every figure.
var (
	Background = color.RGBA{255, 255, 255, 255}
	Ink        = color.RGBA{33, 33, 33, 255}
	gridInk    = color.RGBA{228, 228, 228, 255}
	frameInk   = color.RGBA{120, 120, 120, 255}
)

// palette is Tableau 10: distinct hues that stay apart for most colour
// vision deficiencies when paired with distinct marker shapes.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255},
}

// Palette returns the i-th of ten distinct categorical colours, cycling.
func Palette(i int) color.RGBA {
	return palette[((i%len(palette))+len(palette))%len(palette)]
}

// WritePNG encodes img as PNG.
func WritePNG(w io.Writer, img image.Image) error {
	return png.Encode(w, img)
}

// Text metrics of the built-in font.
const (
	charW   = 7
	ascent  = 11
	lineH   = 13
	padding = 6
)

var face = basicfont.Face7x13

// canvas draws on an RGBA image, clipped to clip.
type canvas struct {
	img  *image.RGBA
	clip image.Rectangle
}

func newCanvas(w, h int) *canvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(Background), image.Point{}, draw.Src)
	return &canvas{img: img, clip: img.Bounds()}
}

func (c *canvas) set(x, y int, col color.RGBA) {
	if (image.Point{x, y}).In(c.clip) {
		c.img.SetRGBA(x, y, col)
	}
}

// fill paints the rectangle r.
func (c *canvas) fill(r image.Rectangle, col color.RGBA) {
	draw.Draw(c.img, r.Intersect(c.clip), image.NewUniform(col), image.Point{}, draw.Src)
}

// frame outlines r with a one-pixel border inside it.
func (c *canvas) frame(r image.Rectangle, col color.RGBA) {
	c.fill(image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), col)
	c.fill(image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), col)
	c.fill(image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), col)
	c.fill(image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), col)
}

// line draws a segment of the given width (Bresenham, square pen).
func (c *canvas) line(x0, y0, x1, y1, width int, col color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	lo := -(width - 1) / 2
	for {
		for i := lo; i < lo+width; i++ {
			for j := lo; j < lo+width; j++ {
				c.set(x0+i, y0+j, col)
			}
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

// marker draws shape s of radius r centred on (x, y).
func (c *canvas) marker(s, x, y, r int, col color.RGBA) {
	for dy := -r; dy <= r; dy++ {
		for dx := -r; dx <= r; dx++ {
			var in bool
			switch s % 4 {
			case 0: // circle
				in = dx*dx+dy*dy <= r*r+r/2
			case 1: // square
				in = abs(dx) < r && abs(dy) < r
			case 2: // diamond
				in = abs(dx)+abs(dy) <= r
			case 3: // triangle, apex up
				in = dy >= -r && 2*abs(dx) <= dy+r
			}
			if in {
				c.set(x+dx, y+dy, col)
			}
		}
	}
}

// textWidth is the width of s in pixels.
func textWidth(s string) int { return font.MeasureString(face, s).Round() }

// text draws s with its top-left corner at (x, y).
func (c *canvas) text(x, y int, s string, col color.RGBA) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: face, Dot: fixed.P(x, y+ascent)}
	d.DrawString(s)
}

// textCentered draws s centred horizontally on cx, top at y.
func (c *canvas) textCentered(cx, y int, s string, col color.RGBA) {
	c.text(cx-textWidth(s)/2, y, s, col)
}

// textUp draws s rotated a quarter turn anticlockwise, reading bottom to
// top, centred vertically on cy with its left edge (the text's top) at x.
func (c *canvas) textUp(x, cy int, s string, col color.RGBA) {
	w := textWidth(s)
	tmp := newCanvas(w, lineH)
	tmp.text(0, 0, s, col)
	top := cy - w/2
	for ty := range lineH {
		for tx := range w {
			if px := tmp.img.RGBAAt(tx, ty); px != Background {
				c.set(x+ty, top+w-1-tx, px)
			}
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
