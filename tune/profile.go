package tune

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/jsonfile"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
)

// Version is the profile format this package writes and reads.
const Version = 1

// MaxProfileBytes bounds the size of a profile file Load accepts.
const MaxProfileBytes = 16 << 20

// maxHeads bounds the query heads of one layer in a profile.
const maxHeads = 1 << 16

// Errors of this package. ErrProfile wraps every problem with a profile
// file; a version mismatch is a *VersionError, which wraps ErrProfile too.
var (
	ErrProfile = errors.New("tune: bad profile")
	ErrBudget  = errors.New("tune: impossible error budget")
	ErrInput   = errors.New("tune: bad calibration inputs")
)

// VersionError reports a profile written in a format this build does not
// read.
type VersionError struct {
	Got int
}

// Error says which version was found and which one is read.
func (e *VersionError) Error() string {
	return fmt.Sprintf("tune: profile version %d, this build reads version %d; re-run sparseattn tune", e.Got, Version)
}

// Unwrap makes errors.Is(err, ErrProfile) true.
func (e *VersionError) Unwrap() error { return ErrProfile }

// Profile is a tuned set of SpargeAttn hyperparameters for a model: one
// Layer per attention layer, one Head per query head. It records the
// tiling and error bounds it was tuned for.
type Profile struct {
	Version  int     `json:"version"`
	Method   string  `json:"method"` // "sparge"
	BlockQ   int     `json:"block_q"`
	BlockK   int     `json:"block_k"`
	RowGroup int     `json:"row_group"`
	Causal   bool    `json:"causal"`
	L1       float64 `json:"l1"`               // bound on rel L1 of M_g alone
	L2       float64 `json:"l2"`               // bound on rel L1 with the λ filter too
	Margin   float64 `json:"margin,omitempty"` // tuned against l·(1−margin)
	Layers   []Layer `json:"layers"`
}

// Layer holds the tuned hyperparameters of one attention layer.
type Layer struct {
	Name  string `json:"name"`
	Heads []Head `json:"heads"`
}

// Head is one query head's tuned hyperparameters and what they achieved
// on the calibration inputs.
type Head struct {
	CDF    float64 `json:"cdf"`    // τ
	Theta  float64 `json:"theta"`  // θ (negative: no judge)
	Lambda float64 `json:"lambda"` // λ (0: no filter)
	// Measured on the calibration inputs: the worst rel L1 with M_g alone
	// and with the λ filter, and the mean sparsity (executor counters).
	L1Mask       float64 `json:"l1_mask"`
	L1           float64 `json:"l1"`
	SparsityMask float64 `json:"sparsity_mask"` // with M_g alone
	Sparsity     float64 `json:"sparsity"`
}

// Params returns the head's planner parameters.
func (h Head) Params() sparge.Params {
	return sparge.Params{CDF: h.CDF, Theta: h.Theta, Lambda: h.Lambda}
}

// Params returns the layer's per-head planner parameters, for
// sparge.Planner.Heads.
func (l Layer) Params() []sparge.Params {
	out := make([]sparge.Params, len(l.Heads))
	for i, h := range l.Heads {
		out[i] = h.Params()
	}
	return out
}

// Layer returns the layer with the given name.
func (p *Profile) Layer(name string) (*Layer, error) {
	for i := range p.Layers {
		if p.Layers[i].Name == name {
			return &p.Layers[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no layer %q", ErrProfile, name)
}

// Planner returns the SpargeAttn planner that runs the named layer as
// tuned (at the profile's tiling: see Options).
func (p *Profile) Planner(layer string) (sparge.Planner, error) {
	l, err := p.Layer(layer)
	if err != nil {
		return sparge.Planner{}, err
	}
	return sparge.Planner{Heads: l.Params(), RowGroup: p.RowGroup}, nil
}

// Options returns the sparseattn.Attention options that run the named
// layer as tuned: its planner, and the causal masking and tiling it was
// tuned at.
func (p *Profile) Options(layer string) (sparseattn.Options, error) {
	pl, err := p.Planner(layer)
	if err != nil {
		return sparseattn.Options{}, err
	}
	return sparseattn.Options{Planner: pl, Causal: p.Causal, BlockQ: p.BlockQ, BlockK: p.BlockK}, nil
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

// Validate checks every field, so that a loaded profile can drive the
// planner safely.
func (p *Profile) Validate() error {
	if p.Version != Version {
		return &VersionError{Got: p.Version}
	}
	if p.Method != "sparge" {
		return fmt.Errorf("%w: method %q, want \"sparge\"", ErrProfile, p.Method)
	}
	if p.BlockQ < 1 || p.BlockQ > plan.MaxBlock || p.BlockK < 1 || p.BlockK > plan.MaxBlock {
		return fmt.Errorf("%w: block sizes %d×%d must be in 1..%d", ErrProfile, p.BlockQ, p.BlockK, plan.MaxBlock)
	}
	if p.RowGroup < 0 || (p.RowGroup > 0 && p.BlockQ%p.RowGroup != 0) {
		return fmt.Errorf("%w: row group %d must divide block_q %d (0: block_q/4)", ErrProfile, p.RowGroup, p.BlockQ)
	}
	if err := checkBudget(p.L1, p.L2); err != nil {
		return fmt.Errorf("%w: %v", ErrProfile, err)
	}
	if math.IsNaN(p.Margin) || p.Margin < 0 || p.Margin >= 1 {
		return fmt.Errorf("%w: margin %v must be in [0, 1)", ErrProfile, p.Margin)
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
		for h, hd := range l.Heads {
			if !(hd.CDF > 0) {
				return fmt.Errorf("%w: layer %q head %d: τ=%v must be in (0, 1]", ErrProfile, l.Name, h, hd.CDF)
			}
			if err := hd.Params().Validate(); err != nil {
				return fmt.Errorf("%w: layer %q head %d: %v", ErrProfile, l.Name, h, err)
			}
			for _, x := range []float64{hd.L1Mask, hd.L1, hd.SparsityMask, hd.Sparsity} {
				if math.IsNaN(x) || x < 0 || math.IsInf(x, 0) {
					return fmt.Errorf("%w: layer %q head %d: measured value %v must be finite and ≥ 0", ErrProfile, l.Name, h, x)
				}
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
// *VersionError.
func Load(r io.Reader) (*Profile, error) {
	p, err := jsonfile.Load[Profile](r, MaxProfileBytes, Version, ErrProfile)
	if vm, ok := errors.AsType[*jsonfile.VersionMismatch](err); ok {
		return nil, &VersionError{Got: vm.Got}
	}
	return p, err
}

// SaveFile writes the profile to path, replacing it atomically.
func SaveFile(path string, p *Profile) error {
	return jsonfile.WriteAtomic(path, ".profile-*.json", func(w io.Writer) error { return Save(w, p) })
}

// LoadFile reads a profile from path.
func LoadFile(path string) (*Profile, error) { return jsonfile.ReadFile(path, Load) }
