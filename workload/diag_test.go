package workload

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestDiagnostics prints per-head attention statistics. It is skipped
// unless WORKLOAD_DIAG is set; it was used to calibrate the generators.
func TestDiagnostics(t *testing.T) {
	if os.Getenv("WORKLOAD_DIAG") == "" {
		t.Skip("set WORKLOAD_DIAG=1 to print calibration statistics")
	}
	for _, cfg := range []Config{
		Default(),
		{Kind: LLM, Seed: 7, B: 1, Hq: 8, Hkv: 2, N: 512, D: 64},
	} {
		start := time.Now()
		w, err := Generate(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s N=%d D=%d: generated in %v", cfg.Kind, cfg.N, cfg.D, time.Since(start))
		r, _ := resolve(cfg)
		in := newLLMPlan(r).input(0)
		var qs []int
		step := max(1, cfg.N/256)
		for i := 16; i < cfg.N; i += step {
			qs = append(qs, i)
		}
		for h := range cfg.Hq {
			a := loadHead(w, 0, h)
			st := causalStats(a, qs, 64)
			var hh float64
			for _, i := range qs {
				p := probs(a.q[i], a.k, i, true, nil)
				for j := range i + 1 {
					if in.hh[j] != 0 {
						hh += p[j]
					}
				}
			}
			hh /= float64(len(qs))
			pn := probs(a.q[w.Needle.QueryIndex], a.k, w.Needle.QueryIndex, true, nil)
			t.Logf("h%d %-36s sink %.3f (unif %.3f) local64 %.3f (unif %.3f) hh %.3f max %.3f Hrel %.3f cover90 %.3f needleP %.3f  adjcos q %.2f k %.2f",
				h, w.HeadPatterns[h], st.sinkMass, st.sinkUniform, st.localMass, st.localUniform, hh, st.maxProb, st.entropyRatio, st.cover90,
				pn[w.Needle.KeyIndex], adjacentCos(a.q), adjacentCos(a.k))
		}
	}
}

func TestDiagnosticsVisual(t *testing.T) {
	if os.Getenv("WORKLOAD_DIAG") == "" {
		t.Skip("set WORKLOAD_DIAG=1 to print calibration statistics")
	}
	for _, cfg := range []Config{
		{Kind: Video, Seed: 5, B: 1, Hq: 4, D: 64, Frames: 4, Height: 12, Width: 16, TextTokens: 32},
		{Kind: Video, Seed: 5, B: 1, Hq: 4, D: 128, Frames: 8, Height: 16, Width: 24},
		{Kind: Image, Seed: 5, B: 1, Hq: 4, D: 64, Height: 24, Width: 32, TextTokens: 32},
		{Kind: Random, Seed: 5, B: 1, Hq: 2, D: 64, N: 512},
	} {
		start := time.Now()
		w, err := Generate(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s N=%d D=%d: generated in %v", cfg.Kind, w.Config.N, cfg.D, time.Since(start))
		g := Grid{T: 1, H: 1, W: w.Config.N}
		if w.Grid != nil {
			g = *w.Grid
		}
		var qs []int
		for i := 0; i < g.T*g.H*g.W; i += 3 {
			qs = append(qs, i)
		}
		for h := range cfg.Hq {
			a := loadHead(w, 0, h)
			st := gridStats(a, g, qs)
			name := ""
			if w.HeadPatterns != nil {
				name = w.HeadPatterns[h]
			}
			t.Logf("h%d %-26s r2 %.3f (unif %.4f) text %.3f (unif %.3f) max %.3f Hrel %.3f cover90 %.3f adjcos q %.2f k %.2f",
				h, name, st.localMass, st.localUniform, st.sinkMass, st.sinkUniform, st.maxProb, st.entropyRatio, st.cover90,
				adjacentCos(a.q), adjacentCos(a.k))
		}
	}
}
