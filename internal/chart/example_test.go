package chart_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/sparseattn/sparseattn/internal/chart"
)

// Example plots the error of two methods against the sparsity they reach.
func Example() {
	p := &chart.LinePlot{
		Title: "llm: error vs sparsity", XLabel: "sparsity", YLabel: "relative L1", LogY: true,
		Series: []chart.Series{
			{Name: "oracle", X: []float64{0.3, 0.5, 0.7}, Y: []float64{1e-3, 4e-3, 2e-2}},
			{Name: "window", X: []float64{0.4, 0.6, 0.8}, Y: []float64{2e-2, 6e-2, 0.2}},
		},
	}
	img, err := p.Render(640, 400)
	if err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer // or an *os.File
	if err := chart.WritePNG(&buf, img); err != nil {
		log.Fatal(err)
	}
	fmt.Println(img.Bounds().Dx(), img.Bounds().Dy())
	// Output: 640 400
}
