package plan

import (
	"fmt"
	"math"

	"github.com/sparseattn/sparseattn/tensor"
)

// MaxBlock is the largest block edge a plan may use.
const MaxBlock = 4096

// Tiling fixes what every plan for one problem shares: the geometry,
// causality and block sizes.
type Tiling struct {
	Geometry tensor.Geometry // the problem the plan was made for
	Causal   bool            // token-exact causal masking, queries aligned to the end of the keys
	BlockQ   int             // query rows per block
	BlockK   int             // key rows per block
	// Scale multiplies QKᵀ before the softmax; 0 means 1/sqrt(D). Planners
	// that estimate attention use it too.
	Scale float32
}

// SoftmaxScale is Scale, or 1/sqrt(D) when Scale is 0.
func (l Tiling) SoftmaxScale() float32 {
	if l.Scale == 0 {
		return float32(1 / math.Sqrt(float64(l.Geometry.D)))
	}
	return l.Scale
}

// Validate reports an error wrapping ErrInvalid unless the geometry is a
// valid attention problem and the block sizes are in 1..MaxBlock.
func (l Tiling) Validate() error { return l.check() }

func (l Tiling) check() error {
	g := l.Geometry
	if g.B <= 0 || g.Hq <= 0 || g.Hkv <= 0 || g.Nq <= 0 || g.Nk <= 0 || g.D <= 0 || g.Dv <= 0 || g.Hq%g.Hkv != 0 {
		return fmt.Errorf("%w: geometry %+v", ErrInvalid, g)
	}
	if l.Scale < 0 || math.IsNaN(float64(l.Scale)) || math.IsInf(float64(l.Scale), 0) {
		return fmt.Errorf("%w: softmax scale %v must be positive and finite (0 for 1/sqrt(D))", ErrInvalid, l.Scale)
	}
	if l.BlockQ <= 0 || l.BlockQ > MaxBlock || l.BlockK <= 0 || l.BlockK > MaxBlock {
		return fmt.Errorf("%w: block sizes %d×%d must be in 1..%d", ErrInvalid, l.BlockQ, l.BlockK, MaxBlock)
	}
	return nil
}

// Builder assembles a plan row by row. Call Add for the entries of row 0,
// then row 1, and so on, in visiting order; rows left out are empty.
type Builder struct {
	p   Plan
	row int // the row entries are currently being added to
	err error
}

// NewBuilder starts a plan with the given tiling.
func NewBuilder(l Tiling) (*Builder, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	b := &Builder{p: Plan{Tiling: l}}
	b.p.RowStart = make([]int, 1, b.p.Rows()+1)
	return b, nil
}

// Add appends KV block kb at the given level to row r. Rows must be added in
// non-decreasing order. Errors surface from Build.
func (b *Builder) Add(r int, kb int, level Level) {
	if b.err != nil {
		return
	}
	if b.p.BlockQ == 0 { // a zero Builder, not made by NewBuilder
		b.err = fmt.Errorf("%w: Builder not made by NewBuilder", ErrInvalid)
		return
	}
	if r < b.row || r >= b.p.Rows() {
		b.err = fmt.Errorf("%w: row %d added after row %d or out of range [0,%d)", ErrInvalid, r, b.row, b.p.Rows())
		return
	}
	if kb < 0 || kb > math.MaxInt32 {
		b.err = fmt.Errorf("%w: KV block %d out of range", ErrInvalid, kb)
		return
	}
	for b.row < r {
		b.p.RowStart = append(b.p.RowStart, len(b.p.KVBlock))
		b.row++
	}
	b.p.KVBlock = append(b.p.KVBlock, int32(kb))
	if level != Full && b.p.Level == nil {
		b.p.Level = make([]Level, len(b.p.KVBlock)-1, cap(b.p.KVBlock))
		for i := range b.p.Level {
			b.p.Level[i] = Full
		}
	}
	if b.p.Level != nil {
		b.p.Level = append(b.p.Level, level)
	}
}

// SetFilter attaches a λ filter to the plan being built.
func (b *Builder) SetFilter(f *Filter) { b.p.Filter = f }

// SetOrder attaches token orders to the plan being built. Causality is then
// checked per token by executors, not per block by Build.
func (b *Builder) SetOrder(o *TokenOrder) { b.p.Order = o }

// SetStop attaches an early-stop rule to the plan being built.
func (b *Builder) SetStop(s *StopRule) { b.p.Stop = s }

// SetInit attaches a first-pass plan whose per-query softmax states the
// plan being built resumes (see Plan.Init).
func (b *Builder) SetInit(init *Plan) { b.p.Init = init }

// Build closes the remaining rows, validates the plan and returns it.
func (b *Builder) Build() (*Plan, error) {
	if b.err != nil {
		return nil, b.err
	}
	for len(b.p.RowStart) < b.p.Rows()+1 {
		b.p.RowStart = append(b.p.RowStart, len(b.p.KVBlock))
	}
	p := b.p
	b.err = fmt.Errorf("%w: Builder reused after Build", ErrInvalid)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Dense returns the plan that visits every block with a causally visible
// pair, in key order: the dense causal-aware pass.
func Dense(l Tiling) (*Plan, error) {
	return FromMask(l, func(b, h, qb, kb int) bool { return true })
}

// FromMask returns the plan that visits, in key order, every block for
// which keep returns true and that has a causally visible pair. Blocks that
// are entirely in the future are never visited, whatever keep says. A nil
// keep keeps every block.
func FromMask(l Tiling, keep func(b, h, qb, kb int) bool) (*Plan, error) {
	if keep == nil {
		keep = func(b, h, qb, kb int) bool { return true }
	}
	bld, err := NewBuilder(l)
	if err != nil {
		return nil, err
	}
	p := &bld.p
	for b := range l.Geometry.B {
		for h := range l.Geometry.Hq {
			for qb := range p.QBlocks() {
				r := p.Row(b, h, qb)
				for kb := range p.KBlocks() {
					if visible, _ := p.BlockVisibility(qb, kb); visible && keep(b, h, qb, kb) {
						bld.Add(r, kb, Full)
					}
				}
			}
		}
	}
	return bld.Build()
}
