package auto

import (
	"errors"
	"fmt"
	"io"

	"github.com/sparseattn/sparseattn/internal/jsonfile"
	"github.com/sparseattn/sparseattn/plan"
)

// Version is the profile format this package writes and reads. Version 2
// bounds the layer's rel L1 (version 1 bounded each head's), and records
// the margin, the head cap and what each layer reached. Version 3 runs
// flexprefill heads at τ 0.2 (flexprefill.DefaultTau) where version 2 ran
// τ 0.1, so a version-2 flexprefill knob named another planner. Version 4
// runs psa heads and compositions with psa's outlier-led sampling (the
// zero psa.Planner's OutlierQ and OutlierK) where version 3 drew every
// sampled token at random, and unisparse heads with the outlier query
// (unisparse.Planner's default; version 3 ran Top-P alone), so a
// version-3 psa or unisparse knob named another planner.
const Version = 4

// MaxProfileBytes bounds the size of a profile file Load accepts.
const MaxProfileBytes = 16 << 20

// maxHeads and maxLayers bound a profile's shape.
const (
	maxHeads  = 1 << 16
	maxLayers = 1 << 12
)

// VersionError reports a profile written in a format this build does not
// read.
type VersionError struct {
	Got int
}

// Error says which version was found and which one is read.
func (e *VersionError) Error() string {
	return fmt.Sprintf("auto: profile version %d, this build reads version %d; re-run sparseattn tune --method auto", e.Got, Version)
}

// Unwrap makes errors.Is(err, ErrProfile) true.
func (e *VersionError) Unwrap() error { return ErrProfile }

// Profile is a tuned per-head choice of method and knob for a model: one
// Layer per attention layer, one Head per query head, with the tiling and
// the error budget it was tuned for (Config's fields of the same names).
type Profile struct {
	Version int     `json:"version"`
	Method  string  `json:"method"` // "auto"
	BlockQ  int     `json:"block_q"`
	BlockK  int     `json:"block_k"`
	Causal  bool    `json:"causal"`
	Budget  float64 `json:"budget"`   // bound on each layer's rel L1 against dense
	Margin  float64 `json:"margin"`   // share of the budget left unspent
	HeadCap float64 `json:"head_cap"` // bound on each head's rel L1
	Layers  []Layer `json:"layers"`
}

// Layer holds the choices of one attention layer and what they reached on
// the calibration inputs: the layer's largest rel L1 over the inputs and
// its heads' mean sparsity.
type Layer struct {
	Name     string  `json:"name"`
	Heads    []Head  `json:"heads"`
	L1       float64 `json:"l1"`
	Sparsity float64 `json:"sparsity"`
}

// Head is one query head's choice and what it achieved on the calibration
// inputs.
type Head struct {
	Method string  `json:"method"`           // a name of Methods()
	Knob   float64 `json:"knob"`             // the method's knob (0 for dense)
	Lambda float64 `json:"lambda,omitempty"` // SpargeAttn's λ (0: off)
	// Measured on the calibration inputs with single-head runs: the worst
	// rel L1 against dense and the mean executor sparsity.
	L1       float64 `json:"l1"`
	Sparsity float64 `json:"sparsity"`
}

// Planner returns the planner of the named layer.
func (p *Profile) Planner(layer string) (Planner, error) {
	for _, l := range p.Layers {
		if l.Name == layer {
			return Planner{Heads: append([]Head(nil), l.Heads...)}, nil
		}
	}
	return Planner{}, fmt.Errorf("%w: no layer %q", ErrProfile, layer)
}

// Set adds the layer, replacing one of the same name.
func (p *Profile) Set(l Layer) {
	for i := range p.Layers {
		if p.Layers[i].Name == l.Name {
			p.Layers[i] = l
			return
		}
	}
	p.Layers = append(p.Layers, l)
}

// checkBudget rejects budgets that cannot be met or make no sense.
func checkBudget(b float64) error {
	if !(b >= 1e-6 && b < 1) {
		return fmt.Errorf("budget %v must be in [1e-6, 1): below float32 rounding decides, and rel L1 1 is an all-zero output", b)
	}
	return nil
}

// Validate checks every field, so that a loaded profile can drive the
// planner safely.
func (p *Profile) Validate() error {
	if p.Version != Version {
		return &VersionError{Got: p.Version}
	}
	if p.Method != "auto" {
		return fmt.Errorf("%w: method %q, want \"auto\"", ErrProfile, p.Method)
	}
	if p.BlockQ < 1 || p.BlockQ > plan.MaxBlock || p.BlockK < 1 || p.BlockK > plan.MaxBlock {
		return fmt.Errorf("%w: block sizes %d×%d must be in 1..%d", ErrProfile, p.BlockQ, p.BlockK, plan.MaxBlock)
	}
	if err := checkBudget(p.Budget); err != nil {
		return fmt.Errorf("%w: %v", ErrProfile, err)
	}
	if err := checkBudget(p.HeadCap); err != nil {
		return fmt.Errorf("%w: head cap: %v", ErrProfile, err)
	}
	if !(p.Margin >= 0 && p.Margin < 1) {
		return fmt.Errorf("%w: margin %v must be in [0, 1)", ErrProfile, p.Margin)
	}
	if len(p.Layers) > maxLayers {
		return fmt.Errorf("%w: %d layers, at most %d", ErrProfile, len(p.Layers), maxLayers)
	}
	seen := map[string]bool{}
	for _, l := range p.Layers {
		if seen[l.Name] {
			return fmt.Errorf("%w: layer %q appears twice", ErrProfile, l.Name)
		}
		seen[l.Name] = true
		if len(l.Heads) == 0 || len(l.Heads) > maxHeads {
			return fmt.Errorf("%w: layer %q has %d heads, want 1..%d", ErrProfile, l.Name, len(l.Heads), maxHeads)
		}
		if !(l.L1 >= 0 && l.L1 <= 1e6 && l.Sparsity >= 0 && l.Sparsity <= 1) {
			return fmt.Errorf("%w: layer %q: rel L1 %v must be finite and ≥ 0, sparsity %v in [0, 1]", ErrProfile, l.Name, l.L1, l.Sparsity)
		}
		for h, hd := range l.Heads {
			if _, err := NewMethod(hd.Method, hd.Knob, hd.Lambda); err != nil {
				return fmt.Errorf("layer %q head %d: %w", l.Name, h, err)
			}
			for _, x := range []float64{hd.L1, hd.Sparsity} {
				if !(x >= 0 && x <= 1e6) {
					return fmt.Errorf("%w: layer %q head %d: measured value %v must be finite and ≥ 0", ErrProfile, l.Name, h, x)
				}
			}
			if hd.Sparsity > 1 {
				return fmt.Errorf("%w: layer %q head %d: sparsity %v above 1", ErrProfile, l.Name, h, hd.Sparsity)
			}
		}
	}
	return nil
}

// Save writes the profile as indented JSON after validating it.
func Save(w io.Writer, p *Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return jsonfile.Encode(w, p)
}

// Load reads and validates a profile. Malformed, oversized or hostile
// input gives an error wrapping ErrProfile; another format version gives a
// *VersionError. It reads at most MaxProfileBytes+1 bytes, and what it
// allocates beyond that is bounded by what those bytes encode.
func Load(r io.Reader) (*Profile, error) {
	p, err := jsonfile.Load[Profile](r, MaxProfileBytes, Version, ErrProfile)
	if vm, ok := errors.AsType[*jsonfile.VersionMismatch](err); ok {
		return nil, &VersionError{Got: vm.Got}
	}
	return p, err
}

// SaveFile writes the profile to path, replacing it atomically.
func SaveFile(path string, p *Profile) error {
	return jsonfile.WriteAtomic(path, ".auto-profile-*.json", func(w io.Writer) error { return Save(w, p) })
}

// LoadFile reads a profile from path.
func LoadFile(path string) (*Profile, error) { return jsonfile.ReadFile(path, Load) }
