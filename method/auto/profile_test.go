package auto

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleProfile() *Profile {
	return &Profile{Version: Version, Method: "auto", BlockQ: 128, BlockK: 64, Causal: true, Budget: 0.05,
		Margin: 0.1, HeadCap: 0.15, Layers: []Layer{{Name: "layer0", L1: 0.045, Sparsity: 0.525, Heads: []Head{
			{Method: "sparge", Knob: 0.9, Lambda: -4, L1: 0.04, Sparsity: 0.6},
			{Method: "sparge+psa", Knob: 0.7, L1: 0.03, Sparsity: 0.7},
			{Method: Dense},
			{Method: "window", Knob: 512, L1: 0.01, Sparsity: 0.8},
		}}}}
}

func TestProfileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	p := sampleProfile()
	if err := SaveFile(path, p); err != nil {
		t.Fatal(err)
	}
	back, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Fatalf("round trip: got %+v, want %+v", back, p)
	}
	pl, err := back.Planner("layer0")
	if err != nil || len(pl.Heads) != 4 {
		t.Fatalf("Planner: %v, %d heads", err, len(pl.Heads))
	}
	if _, err := back.Planner("nope"); !errors.Is(err, ErrProfile) {
		t.Fatalf("missing layer: %v", err)
	}
}

// TestLoadHostile checks that truncated, oversized and hostile files give
// typed errors.
func TestLoadHostile(t *testing.T) {
	var good bytes.Buffer
	if err := Save(&good, sampleProfile()); err != nil {
		t.Fatal(err)
	}
	edit := func(from, to string) string { return strings.Replace(good.String(), from, to, 1) }
	cases := map[string]string{
		"truncated":      good.String()[:good.Len()/2],
		"empty":          "",
		"array":          "[]",
		"version":        edit(fmt.Sprintf(`"version": %d`, Version), `"version": 2`),
		"head cap":       edit(`"head_cap": 0.15`, `"head_cap": 0`),
		"margin":         edit(`"margin": 0.1`, `"margin": 1`),
		"layer l1":       edit(`"l1": 0.045`, `"l1": -1`),
		"method":         edit(`"method": "auto"`, `"method": "sparge"`),
		"unknown field":  edit(`"causal": true`, `"causal": true, "x": 1`),
		"trailing":       good.String() + "{}",
		"budget":         edit(`"budget": 0.05`, `"budget": 1.5`),
		"block":          edit(`"block_q": 128`, `"block_q": 0`),
		"head method":    edit(`"method": "window"`, `"method": "s2o"`),
		"window knob":    edit(`"knob": 512`, `"knob": 1e300`),
		"λ on window":    edit(`"knob": 512,`, `"knob": 512, "lambda": -3,`),
		"positive λ":     edit(`"lambda": -4`, `"lambda": 4`),
		"sparsity":       edit(`"sparsity": 0.8`, `"sparsity": 3`),
		"negative l1":    edit(`"l1": 0.01`, `"l1": -0.01`),
		"duplicate":      edit(`"layers": [`, `"layers": [{"name":"layer0","l1":0,"sparsity":0,"heads":[{"method":"dense","knob":0,"l1":0,"sparsity":0}]},`),
		"no heads":       edit(`"layers": [`, `"layers": [{"name":"x","heads":[]},`),
		"huge":           `{"version":3,"method":"auto","pad":"` + strings.Repeat("x", MaxProfileBytes) + `"}`,
		"nested garbage": `{"version":3,"layers":[[[[[[[[[[]]]]]]]]]]}`,
	}
	for name, data := range cases {
		_, err := Load(strings.NewReader(data))
		var ve *VersionError
		if !errors.Is(err, ErrProfile) {
			t.Errorf("%s: got %v, want ErrProfile", name, err)
		}
		if name == "version" && !errors.As(err, &ve) {
			t.Errorf("version: got %T, want *VersionError", err)
		}
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
