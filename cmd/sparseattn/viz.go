package main

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/evaluate"
	"github.com/sparseattn/sparseattn/internal/chart"
	"github.com/sparseattn/sparseattn/internal/progress"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/plan"
)

const vizSummary = `Draws, for one batch entry and query head, the true block attention mass
(the softmax weight each query block puts on each KV block, averaged over the
block's queries; log-scaled colours) beside each method's plan for that head:
which blocks it skips, computes in full, or reads pooled (PSA's pyramid
levels, each in its own colour). Each plan's title gives the sparsity from the
executor's counters and the relative L1 error, both over all heads. Look here
first when a method misbehaves: a plan that skips bright blocks loses mass.

Plans with token orders (S2O) are drawn in the original token positions,
shaded by the fraction of each block's visible pairs they visit. Run-time
decisions (the λ filter, early stop) are not drawn: the counters include them.

Inputs are those of "sparseattn eval".`

// Colours of a level map.
var (
	colorSkip      = color.RGBA{255, 255, 255, 255}
	colorInvisible = color.RGBA{215, 215, 215, 255}
	colorFull      = color.RGBA{31, 78, 140, 255}
)

// levelColor is the colour of a plan level: skip white, full dark blue,
// pooled levels in distinct palette hues.
func levelColor(l plan.Level) color.RGBA {
	switch l {
	case plan.Skip:
		return colorSkip
	case plan.Full:
		return colorFull
	}
	return chart.Palette(int(l) - 1) // 2 → orange, 3 → green, ...
}

// checkOutputDir is a usage error unless the directory of path, the value
// of --flag, exists.
func checkOutputDir(flag, path string) error {
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: --%s %s: directory %s does not exist", errUsage, flag, path, filepath.Dir(path))
	}
	return nil
}

func runViz(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("viz", vizSummary, stderr)
	var in inputFlags
	in.register(fs)
	var mf methodFlags
	mf.register(fs, sparseMethodNames())
	rf := runFlags{repeat: 1}
	rf.registerTiling(fs)
	scale := registerScale(fs)
	batch := fs.Int("batch-index", 0, "batch entry to draw")
	head := fs.Int("head-index", 0, "query head to draw")
	out := fs.String("png", "viz.png", "PNG file to write")
	size := fs.Int("panel-size", 0, "pixels per panel side, 64..1024 (0 = about 4 px per block, 256..512)")
	decades := fs.Float64("decades", 5, "most decades of block mass the colour scale spans below the largest, 1..12")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkRun(&rf, *scale, stderr); err != nil {
		return err
	}
	switch {
	case *size != 0 && (*size < 64 || *size > 1024):
		return fmt.Errorf("%w: --panel-size %d must be 0 (auto) or in 64..1024", errUsage, *size)
	case !(*decades >= 1 && *decades <= 12):
		return fmt.Errorf("%w: --decades %v must be in 1..12", errUsage, *decades)
	case *batch < 0 || *head < 0:
		return fmt.Errorf("%w: --batch-index and --head-index must be ≥ 0", errUsage)
	}
	if err := checkOutputDir("png", *out); err != nil {
		return err
	}
	planners, err := mf.planners()
	if err != nil {
		return err
	}
	planners = withDenseFirst(planners)
	bar := progress.New(stderr, len(planners)+2)
	defer bar.Finish()
	bar.Label("loading input")
	prob, g, err := in.loadValid(ctx, fs)
	if err != nil {
		return err
	}
	if *batch >= g.B || *head >= g.Hq {
		return fmt.Errorf("%w: --batch-index %d and --head-index %d must be below the input's B=%d and Hq=%d", errUsage, *batch, *head, g.B, g.Hq)
	}
	bar.Step("true block mass")
	tiling := plan.Tiling{Geometry: g, Causal: prob.Causal, BlockQ: rf.blockQ, BlockK: rf.blockK, Scale: float32(*scale)}
	mass, err := oracle.BlockMass(ctx, tiling, prob.q, prob.k, *batch, *head)
	if err != nil {
		return err
	}
	dense, err := plan.Dense(tiling)
	if err != nil {
		return err
	}
	bar.Step("")
	grid := &chart.Grid{
		Title: fmt.Sprintf("%s  batch %d, query head %d of %d (KV head %d)  N=%d  blocks %dx%d", prob.Source, *batch, *head, g.Hq,
			g.KVHead(*head), g.Nk, rf.blockQ, rf.blockK),
		XLabel: "key block", YLabel: "query block", PanelSize: *size,
	}
	if grid.PanelSize == 0 {
		n := max(dense.QBlocks(), dense.KBlocks())
		grid.PanelSize = min(512, max(256, n*4))
	}
	grid.Panels = append(grid.Panels, massPanel(dense, mass, *decades))
	var ref *evaluate.Reference
	for _, pl := range planners {
		row, res, err := measure(ctx, rf, bar, prob, sparseattn.Options{Causal: prob.Causal, Planner: pl, Scale: float32(*scale)}, pl.Name(), ref)
		if err != nil {
			return fmt.Errorf("%s: %w", pl.Name(), err)
		}
		if ref == nil { // dense: the reference, not drawn
			ref = referenceOf(row, res)
			continue
		}
		grid.Panels = append(grid.Panels, planPanel(planTitle(pl.Name(), row, res.Plan), res.Plan, *batch, *head))
	}
	if len(grid.Panels) == 1 {
		grid.Panels[0].Title += " (no method named but dense)"
	}
	bar.Finish()
	img, err := grid.Render()
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := chart.WritePNG(f, img); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%dx%d): true block mass of batch %d, head %d beside %d plan(s)\n",
		*out, img.Bounds().Dx(), img.Bounds().Dy(), *batch, *head, len(grid.Panels)-1)
	return nil
}

// planTitle names the method with its sparsity and error over all heads,
// and flags the run-time decisions the panel cannot show: "+lambda" for a
// SpargeAttn filter, "+stop" for an S2O early-stop rule.
func planTitle(name string, row evalRow, p *plan.Plan) string {
	title := fmt.Sprintf("%s  sparsity %.2f  L1 %.1e", name, row.Sparsity, float64(row.RelL1))
	if p.Filter != nil {
		title += "  +lambda"
	}
	if p.Stop != nil {
		title += "  +stop"
	}
	return title
}

// massPanel colours each block by its true mass on a log scale from the
// smallest visible mass, or decades below the largest if that is higher,
// to the largest; blocks no query can see are grey.
func massPanel(dense *plan.Plan, mass [][]float64, decades float64) chart.Panel {
	hi, lo := 0.0, math.Inf(1)
	for qb, row := range mass {
		for kb, m := range row {
			if visible, _ := dense.BlockVisibility(qb, kb); visible && m > 0 {
				hi, lo = max(hi, m), min(lo, m)
			}
		}
	}
	if hi == 0 {
		hi, lo = 1, 0.1
	}
	// The scale spans the visible masses, at most decades below the largest.
	lo = max(lo, hi*math.Pow(10, -decades))
	if lo >= hi {
		lo = hi / 10
	}
	scale := &chart.ColorScale{Label: "block mass (log)", Lo: lo, Hi: hi, Log: true, Map: chart.Viridis}
	cells := make([][]color.RGBA, len(mass))
	for qb, row := range mass {
		cells[qb] = make([]color.RGBA, len(row))
		for kb, m := range row {
			if visible, _ := dense.BlockVisibility(qb, kb); !visible {
				cells[qb][kb] = colorInvisible
				continue
			}
			cells[qb][kb] = scale.Color(m)
		}
	}
	p := chart.Panel{Title: "true block attention mass", Cells: cells, Scale: scale}
	if dense.Causal {
		p.Keys = []chart.Key{{Label: "not visible", Color: colorInvisible}}
	}
	return p
}

// planPanel draws head (b, h) of p: a level map in the natural order, or,
// for a plan with token orders, the visited fraction of each block's pairs.
func planPanel(title string, p *plan.Plan, b, h int) chart.Panel {
	nq, nk := p.QBlocks(), p.KBlocks()
	cells := make([][]color.RGBA, nq)
	for qb := range cells {
		cells[qb] = make([]color.RGBA, nk)
	}
	if p.Order != nil || p.Init != nil {
		return orderedPanel(title, p, b, h, cells)
	}
	used := map[plan.Level]bool{}
	for qb := range nq {
		for kb := range nk {
			cells[qb][kb] = colorSkip
			if visible, _ := p.BlockVisibility(qb, kb); !visible {
				cells[qb][kb] = colorInvisible
			}
		}
		blocks, levels := p.Entries(p.Row(b, h, qb))
		for i, kb := range blocks {
			l := plan.Full
			if levels != nil {
				l = levels[i]
			}
			if l == plan.Skip {
				continue
			}
			used[l] = true
			cells[qb][kb] = levelColor(l)
		}
	}
	keys := []chart.Key{{Label: "skip", Color: colorSkip}, {Label: "full", Color: colorFull}}
	for l := plan.Level(2); l <= plan.MaxLevel; l++ {
		if used[l] {
			keys = append(keys, chart.Key{Label: fmt.Sprintf("pooled x%d", l.Pool()), Color: levelColor(l)})
		}
	}
	if p.Causal {
		keys = append(keys, chart.Key{Label: "not visible", Color: colorInvisible})
	}
	return chart.Panel{Title: title, Cells: cells, Keys: keys}
}

// orderedPanel maps the visits of a token-ordered plan, and of its first
// pass if it has one, back to original token positions and shades each
// block by the fraction of its visible pairs visited.
func orderedPanel(title string, p *plan.Plan, b, h int, cells [][]color.RGBA) chart.Panel {
	g := p.Geometry
	nq, nk := p.QBlocks(), p.KBlocks()
	visited := make([][]float64, nq)
	total := make([][]float64, nq)
	for qb := range nq {
		visited[qb] = make([]float64, nk)
		total[qb] = make([]float64, nk)
		qlo, qhi := p.QueryRange(qb)
		for kb := range nk {
			klo, khi := p.KeyRange(kb)
			for i := qlo; i < qhi; i++ {
				if p.Causal {
					// Visible keys of query i: kj ≤ i + Nk − Nq.
					total[qb][kb] += float64(max(0, min(khi, i+g.Nk-g.Nq+1)-klo))
				} else {
					total[qb][kb] += float64(khi - klo)
				}
			}
		}
	}
	addVisits(p, b, h, visited)
	if p.Init != nil { // S2O's first pass: its visits count too
		addVisits(p.Init, b, h, visited)
	}
	ramp := func(t float64) color.RGBA {
		mix := func(a, b uint8) uint8 { return uint8(math.Round(float64(a) + t*(float64(b)-float64(a)))) }
		return color.RGBA{mix(colorSkip.R, colorFull.R), mix(colorSkip.G, colorFull.G), mix(colorSkip.B, colorFull.B), 255}
	}
	scale := &chart.ColorScale{Label: "visited fraction", Lo: 0, Hi: 1, Map: ramp}
	for qb := range nq {
		for kb := range nk {
			if total[qb][kb] == 0 {
				cells[qb][kb] = colorInvisible
				continue
			}
			cells[qb][kb] = scale.Color(visited[qb][kb] / total[qb][kb])
		}
	}
	return chart.Panel{Title: title, Cells: cells, Scale: scale}
}

// addVisits adds to visited[qb][kb] the visible (query, key) pairs of
// head (b, h) that p computes, in original token positions (S2O §3.2:
// under token orders, block indices refer to positions in the permuted
// order).
func addVisits(p *plan.Plan, b, h int, visited [][]float64) {
	g := p.Geometry
	o := p.Order
	if o == nil {
		o = &plan.TokenOrder{}
	}
	head := b*g.Hq + h
	queryToken := func(pos int) int {
		if o.Query == nil {
			return pos
		}
		return int(o.Query[head*g.Nq+pos])
	}
	for qb := range p.QBlocks() {
		r := p.Row(b, h, qb)
		keys := []int32(nil) // nil: natural order
		if o.RowKV != nil && o.RowKV[r] >= 0 {
			keys = o.KV[o.KVStart[o.RowKV[r]]:o.KVStart[o.RowKV[r]+1]]
		}
		qlo, qhi := p.QueryRange(qb)
		blocks, levels := p.Entries(r)
		for e, kb := range blocks {
			if levels != nil && levels[e] == plan.Skip {
				continue
			}
			lo := int(kb) * p.BlockK
			hi := lo + p.BlockK
			if keys != nil {
				hi = min(hi, len(keys))
			} else {
				hi = min(hi, g.Nk)
			}
			for qp := qlo; qp < qhi; qp++ {
				qt := queryToken(qp)
				for kp := lo; kp < hi; kp++ {
					kt := kp
					if keys != nil {
						kt = int(keys[kp])
					}
					if p.Visible(qt, kt) {
						visited[qt/p.BlockQ][kt/p.BlockK]++
					}
				}
			}
		}
	}
}
