package lm

import (
	"math/rand/v2"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the weight loader: it must return a
// model or an error, never panic, and a model it returns must have the
// exact size its header asks for.
func FuzzLoad(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	cfg := tinyConfig()
	cfg.Layers, cfg.DModel, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.HeadDim = 1, 4, 4, 2, 1, 2
	good := newTestModel(rng, cfg).file
	f.Add(good)
	f.Add(good[:headerSize+4])
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Load(data)
		if err != nil {
			return
		}
		if int64(len(data)) != m.Config().fileSize() {
			t.Fatalf("accepted %d bytes for a model of %d", len(data), m.Config().fileSize())
		}
	})
}
