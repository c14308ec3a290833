package chart

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
)

// decode encodes img as PNG and decodes it back, as a user's viewer would.
func decode(t *testing.T, img image.Image) (image.Image, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePNG(&buf, img); err != nil {
		t.Fatal(err)
	}
	back, err := png.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return back, buf.Bytes()
}

func isBackground(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r == 0xffff && g == 0xffff && b == 0xffff
}

// near reports whether some pixel within d of p has colour want.
func near(img image.Image, p image.Point, d int, want color.RGBA) bool {
	for y := p.Y - d; y <= p.Y+d; y++ {
		for x := p.X - d; x <= p.X+d; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == want {
				return true
			}
		}
	}
	return false
}

// TestLinePlotDrawsCurves renders random monotone curves and checks the
// decoded PNG: its size, each series' colour at each of its points and at
// the midpoint of each segment, background well away from every curve,
// and identical bytes when rendered twice.
func TestLinePlotDrawsCurves(t *testing.T) {
	r := testutil.Rand(t)
	for _, tc := range []struct {
		name string
		logY bool
		w, h int
	}{
		{"log", true, 640, 400},
		{"linear", false, 500, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &LinePlot{Title: "error vs sparsity", XLabel: "sparsity", YLabel: "rel L1", LogY: tc.logY}
			for s := range 3 {
				var xs, ys []float64
				x, y := r.Float64()*0.2, math.Pow(10, -4+r.Float64())
				for range 5 {
					xs, ys = append(xs, x), append(ys, y)
					x += 0.05 + 0.1*r.Float64()
					y *= 1.5 + 3*r.Float64()
				}
				p.Series = append(p.Series, Series{Name: string(rune('a' + s)), X: xs, Y: ys})
			}
			img, err := p.Render(tc.w, tc.h)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := decode(t, img)
			if got.Bounds() != image.Rect(0, 0, tc.w, tc.h) {
				t.Fatalf("bounds %v, want %dx%d", got.Bounds(), tc.w, tc.h)
			}
			l, _ := p.layout(tc.w, tc.h)
			for i, s := range p.Series {
				pts := l.points(s)
				for j, pt := range pts {
					if !pt.ok || !pt.In(l.plot) {
						t.Fatalf("series %d point %d (%v, %v) not placed inside %v", i, j, s.X[j], s.Y[j], l.plot)
					}
					// Later series may overdraw earlier ones at crossings: look
					// within the marker's radius for its colour or a later one.
					marked := false
					for later := i; later < len(p.Series) && !marked; later++ {
						marked = near(got, pt.Point, 4, Palette(later))
					}
					if !marked {
						t.Errorf("series %d: no %v near point %v", i, Palette(i), pt.Point)
					}
					if j > 0 {
						mid := image.Pt((pt.X+pts[j-1].X)/2, (pt.Y+pts[j-1].Y)/2)
						// A later series crossing here may overdraw it too.
						drawn := false
						for later := i; later < len(p.Series) && !drawn; later++ {
							drawn = near(got, mid, 2, Palette(later))
						}
						if !drawn {
							t.Errorf("series %d: segment %d has no %v near its midpoint %v", i, j, Palette(i), mid)
						}
					}
				}
			}
			// The plot corner far from the data range's padding holds no ink
			// but grid lines: nothing of any series' colour.
			corner := image.Pt(l.plot.Min.X+2, l.plot.Min.Y+2)
			for i := range p.Series {
				if near(got, corner, 1, Palette(i)) {
					t.Errorf("series %d colour in the empty top-left corner", i)
				}
			}
			var ink int
			for y := range tc.h {
				for x := range tc.w {
					if !isBackground(got.At(x, y)) {
						ink++
					}
				}
			}
			if ink < tc.w || ink > tc.w*tc.h/2 {
				t.Errorf("%d non-background pixels of %d", ink, tc.w*tc.h)
			}
			// The same pixels encode to the same PNG bytes.
			img2, _ := p.Render(tc.w, tc.h)
			if !bytes.Equal(img.Pix, img2.Pix) {
				t.Error("two renders of one plot differ")
			}
		})
	}
}

// TestLogAxisSkipsNonPositive: on a log axis, zero and negative y values
// are left out rather than drawn at -Inf, and the rest still render.
func TestLogAxisSkipsNonPositive(t *testing.T) {
	p := &LinePlot{LogY: true, Series: []Series{{Name: "s", X: []float64{0, 0.5, 1}, Y: []float64{0, 1e-3, 1e-2}}}}
	img, err := p.Render(300, 200)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := p.layout(300, 200)
	pts := l.points(p.Series[0])
	if pts[0].ok || !pts[1].ok || !pts[2].ok {
		t.Fatalf("points %+v: want the zero left out", pts)
	}
	if !near(img, pts[2].Point, 1, Palette(0)) {
		t.Error("positive point not drawn")
	}
	if l.y.lo != -3 || l.y.hi != -2 {
		t.Errorf("log range 1e%v..1e%v, want whole decades 1e-3..1e-2", l.y.lo, l.y.hi)
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0.13, 0.61, []float64{0.2, 0.3, 0.4, 0.5, 0.6}},
		{-3, 12, []float64{0, 5, 10}},
	} {
		got, _ := linearTicks(tc.lo, tc.hi)
		if len(got) != len(tc.want) {
			t.Errorf("linearTicks(%v, %v) = %v, want %v", tc.lo, tc.hi, got, tc.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-12 {
				t.Errorf("linearTicks(%v, %v) = %v, want %v", tc.lo, tc.hi, got, tc.want)
			}
		}
	}
	lo, hi, ticks, lab := logTicks([]float64{3e-4, 0.02})
	if lo != -4 || hi != -1 || ticks[0] != 1e-4 || !lab[0] || lab[1] || ticks[len(ticks)-1] != 0.1 {
		t.Errorf("logTicks: %v %v %v %v", lo, hi, ticks, lab)
	}
	if s := formatTick(1e-3, axis{log: true}); s != "1e-3" {
		t.Errorf("formatTick(1e-3) = %q", s)
	}
	if s := formatTick(0.6000000001, axis{ticks: []float64{0.2, 0.4}}); s != "0.6" {
		t.Errorf("formatTick(0.6) = %q", s)
	}
}

// TestGridPanels renders two panels and checks that each cell's colour
// lands where the layout puts it, and that the bytes are deterministic.
func TestGridPanels(t *testing.T) {
	r := testutil.Rand(t)
	const n = 8
	scale := &ColorScale{Label: "mass", Lo: 1e-4, Hi: 1, Log: true, Map: Viridis}
	vals := make([][]float64, n)
	mass := make([][]color.RGBA, n)
	levels := make([][]color.RGBA, n)
	for i := range n {
		vals[i] = make([]float64, n)
		mass[i] = make([]color.RGBA, n)
		levels[i] = make([]color.RGBA, n)
		for j := range n {
			vals[i][j] = math.Pow(10, -4*r.Float64())
			mass[i][j] = scale.Color(vals[i][j])
			levels[i][j] = Palette(r.IntN(3))
		}
	}
	g := &Grid{Title: "head 0", XLabel: "key block", YLabel: "query block", PanelSize: 64, Panels: []Panel{
		{Title: "true mass", Cells: mass, Scale: scale},
		{Title: "plan", Cells: levels, Keys: []Key{{"skip", Palette(0)}, {"full", Palette(1)}, {"pooled x2", Palette(2)}}},
	}}
	img, err := g.Render()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := decode(t, img)
	if got.Bounds().Dx() < 2*64 || got.Bounds().Dy() < 64 {
		t.Fatalf("bounds %v too small for two 64-px panels", got.Bounds())
	}
	// The cells' positions: recompute the layout as Render does.
	left := 2*padding + lineH + textWidth("0000")
	cellW := left + 64 + 2*padding
	top := padding + lineH + padding
	for k, p := range g.Panels {
		rect := panelRect(k*cellW+left, top, 64)
		for i := range n {
			for j := range n {
				// The centre pixel of cell (i, j): 64/8 = 8 px per cell.
				pt := image.Pt(rect.Min.X+j*8+4, rect.Min.Y+i*8+4)
				if c := color.RGBAModel.Convert(got.At(pt.X, pt.Y)); c != p.Cells[i][j] {
					t.Fatalf("panel %d cell (%d,%d) at %v is %v, want %v", k, i, j, pt, c, p.Cells[i][j])
				}
			}
		}
	}
	img2, _ := g.Render()
	if !bytes.Equal(img.Pix, img2.Pix) {
		t.Error("two renders of one grid differ")
	}
}

func TestColorScale(t *testing.T) {
	s := &ColorScale{Lo: 1e-3, Hi: 1, Log: true, Map: Viridis}
	for _, tc := range []struct {
		v, want float64
	}{{1e-3, 0}, {1, 1}, {10, 1}, {1e-6, 0}, {0, 0}, {math.NaN(), 0}, {math.Sqrt(1e-3), 0.5}} {
		if got := s.fraction(tc.v); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("fraction(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if Viridis(0) != viridis[0] || Viridis(1) != viridis[8] || Viridis(0.5) != viridis[4] {
		t.Error("Viridis does not hit its anchors")
	}
}

func TestInvalidFigures(t *testing.T) {
	ok := [][]color.RGBA{{Ink}}
	for name, err := range map[string]error{
		"tiny":        func() error { _, err := (&LinePlot{}).Render(10, 10); return err }(),
		"huge":        func() error { _, err := (&LinePlot{}).Render(MaxSide+1, 400); return err }(),
		"ragged":      func() error { _, err := (&LinePlot{Series: []Series{{X: []float64{1}}}}).Render(400, 300); return err }(),
		"no panels":   func() error { _, err := (&Grid{}).Render(); return err }(),
		"empty panel": func() error { _, err := (&Grid{Panels: []Panel{{}}}).Render(); return err }(),
		"ragged grid": func() error {
			_, err := (&Grid{Panels: []Panel{{Cells: [][]color.RGBA{{Ink, Ink}, {Ink}}}}}).Render()
			return err
		}(),
		"small panel": func() error { _, err := (&Grid{PanelSize: 8, Panels: []Panel{{Cells: ok}}}).Render(); return err }(),
		"no map": func() error {
			_, err := (&Grid{Panels: []Panel{{Cells: ok, Scale: &ColorScale{}}}}).Render()
			return err
		}(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
