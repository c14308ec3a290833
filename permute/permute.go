// Package permute reorders the visual tokens of image and video attention
// so that tokens close in space and time sit in the same block: SpargeAttn
// §3.7 flattens the T×H×W grid along a Hilbert curve, which makes query and
// key blocks more self-similar and the attention map more block-sparse.
//
// Non-causal attention is invariant to a permutation applied to Q, K and V
// together, up to the same permutation of the output rows; Order.Apply
// reorders the inputs and Order.Restore puts the output back (SpargeAttn
// Appendix A.1). Text tokens of a joint text-visual sequence stay where
// they are.
//
// The orders are those of SpargeAttn Table 8: Hilbert (a generalized
// Hilbert curve for any T×H×W), row-major, column-major, time-major and a
// seeded random shuffle. BlockSimilarity measures what an order buys: the
// mean cosine similarity of tokens within a block (Sim-q, Sim-k in Tables 4
// and 9).
package permute

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/sparseattn/sparseattn/tensor"
)

// ErrSpec reports an invalid order specification or a tensor that does not
// match it.
var ErrSpec = errors.New("permute: bad order")

// Kind names a token order.
type Kind string

// The token orders of SpargeAttn Table 8. The input is taken to be in
// row-major order (w fastest, then h, then t), as workload.Grid and most
// video transformers lay tokens out, so RowMajor, like None, leaves it as
// it is.
const (
	None        Kind = "none"    // keep the input order
	Hilbert     Kind = "hilbert" // generalized Hilbert curve through T×H×W
	RowMajor    Kind = "row"     // w fastest, then h, then t
	ColumnMajor Kind = "column"  // h fastest, then w, then t
	TimeMajor   Kind = "time"    // t fastest, then w, then h
	Random      Kind = "random"  // seeded uniform shuffle of the visual tokens
)

// Kinds returns every order, in a fixed order. The slice is fresh.
func Kinds() []Kind { return []Kind{None, Hilbert, RowMajor, ColumnMajor, TimeMajor, Random} }

// ParseKind maps a name (any case, surrounding spaces ignored; "" means
// none) to a Kind. The error wraps ErrSpec.
func ParseKind(s string) (Kind, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return None, nil
	}
	for _, k := range Kinds() {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, 0, 6)
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("%w: unknown order %q (have %s)", ErrSpec, s, strings.Join(names, ", "))
}

// Spec describes a sequence of T·H·W visual tokens in row-major order plus
// Text text tokens, and the order to put the visual tokens in. The zero
// value is the identity on any sequence.
type Spec struct {
	Kind Kind // "" means None
	// T, H and W are the visual grid: visual token (t, h, w) is at
	// position (t·H + h)·W + w of the visual run. Ignored for None.
	T, H, W int
	// Text is the number of text tokens, which keep their positions.
	Text int
	// TextFirst puts the text tokens before the visual ones (as in
	// CogVideoX); by default they follow them (as workload.Generate does).
	TextFirst bool
	// Seed selects the Random shuffle; any value is valid.
	Seed uint64
}

// Identity reports whether the kind leaves every token where it is by
// definition (None and RowMajor). Other kinds can still be the identity on
// degenerate grids; Order.IsIdentity says so exactly.
func (s Spec) Identity() bool {
	return s.Kind == "" || s.Kind == None || s.Kind == RowMajor
}

// Len is the sequence length the spec covers, T·H·W + Text (0 for None).
func (s Spec) Len() int {
	if s.Kind == "" || s.Kind == None {
		return 0
	}
	return s.T*s.H*s.W + s.Text
}

// maxTokens bounds T·H·W + Text so index arithmetic cannot overflow.
const maxTokens = 1 << 30

// Validate checks the kind, the grid and the text count.
func (s Spec) Validate() error {
	if _, err := ParseKind(string(s.Kind)); err != nil {
		return err
	}
	if s.Kind == "" || s.Kind == None {
		return nil
	}
	if s.T < 1 || s.H < 1 || s.W < 1 {
		return fmt.Errorf("%w: grid %d×%d×%d must have every side ≥ 1", ErrSpec, s.T, s.H, s.W)
	}
	if s.Text < 0 {
		return fmt.Errorf("%w: text tokens %d must be ≥ 0", ErrSpec, s.Text)
	}
	if s.T > maxTokens/s.H || s.T*s.H > maxTokens/s.W || s.T*s.H*s.W > maxTokens-s.Text {
		return fmt.Errorf("%w: grid %d×%d×%d plus %d text tokens exceeds %d tokens", ErrSpec, s.T, s.H, s.W, s.Text, maxTokens)
	}
	return nil
}

// Order returns the permutation the spec selects on a sequence of n
// tokens. For None, n may be anything; otherwise it must equal s.Len().
func (s Spec) Order(n int) (*Order, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: sequence length %d must be ≥ 0", ErrSpec, n)
	}
	if s.Kind == "" || s.Kind == None {
		return identity(n), nil
	}
	if n != s.Len() {
		return nil, fmt.Errorf("%w: %s order over a %d×%d×%d grid plus %d text tokens needs %d tokens, got %d",
			ErrSpec, s.Kind, s.T, s.H, s.W, s.Text, s.Len(), n)
	}
	var cells []Cell
	switch s.Kind {
	case Hilbert:
		cells = HilbertCurve(s.T, s.H, s.W)
	case RowMajor:
		cells = rowMajor(s.T, s.H, s.W)
	case ColumnMajor:
		cells = columnMajor(s.T, s.H, s.W)
	case TimeMajor:
		cells = timeMajor(s.T, s.H, s.W)
	case Random:
		cells = rowMajor(s.T, s.H, s.W)
		r := rand.New(rand.NewPCG(s.Seed, 0x9e3779b97f4a7c15))
		r.Shuffle(len(cells), func(i, j int) { cells[i], cells[j] = cells[j], cells[i] })
	}
	visualStart := 0
	if s.TextFirst {
		visualStart = s.Text
	}
	o := identity(n)
	for i, c := range cells {
		o.src[visualStart+i] = visualStart + (c.T*s.H+c.H)*s.W + c.W
	}
	for i, j := range o.src {
		o.dst[j] = i
	}
	return o, nil
}

// Order is a permutation of the token positions 0..n-1: the i-th token of
// the reordered sequence is token Source(i) of the original. It is
// immutable and safe for concurrent use.
type Order struct {
	src []int // src[i]: original position of reordered token i
	dst []int // dst[j]: reordered position of original token j
}

func identity(n int) *Order {
	o := &Order{src: make([]int, n), dst: make([]int, n)}
	for i := range n {
		o.src[i], o.dst[i] = i, i
	}
	return o
}

// Len is the number of tokens the order permutes.
func (o *Order) Len() int { return len(o.src) }

// Source is the original position of the i-th reordered token.
func (o *Order) Source(i int) int { return o.src[i] }

// Position is the reordered position of original token j.
func (o *Order) Position(j int) int { return o.dst[j] }

// IsIdentity reports whether every token keeps its position.
func (o *Order) IsIdentity() bool {
	for i, j := range o.src {
		if i != j {
			return false
		}
	}
	return true
}

// Inverse returns the order that undoes o.
func (o *Order) Inverse() *Order {
	return &Order{src: append([]int(nil), o.dst...), dst: append([]int(nil), o.src...)}
}

// Apply returns a copy of x, [B, H, N, D] with N = o.Len(), whose token i
// is token Source(i) of x, in x's storage type and layout (the copy is
// exact). It checks ctx between heads.
func (o *Order) Apply(ctx context.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
	return o.gather(ctx, x, o.src)
}

// Restore undoes Apply: token Source(i) of the result is token i of y.
// Apply to Q, K and V, attend, then Restore the output.
func (o *Order) Restore(ctx context.Context, y *tensor.Tensor) (*tensor.Tensor, error) {
	return o.gather(ctx, y, o.dst)
}

func (o *Order) gather(ctx context.Context, x *tensor.Tensor, from []int) (*tensor.Tensor, error) {
	if x == nil {
		return nil, fmt.Errorf("%w: nil tensor", ErrSpec)
	}
	s := x.Shape()
	if s.N != len(from) {
		return nil, fmt.Errorf("%w: order over %d tokens applied to a tensor of %d tokens (shape %v)", ErrSpec, len(from), s.N, s)
	}
	out, err := tensor.New(x.DType(), x.Layout(), s)
	if err != nil {
		return nil, err
	}
	row := make([]float32, s.D)
	for b := range s.B {
		for h := range s.H {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for i, j := range from {
				x.ReadRow(b, h, j, row)
				out.WriteRow(b, h, i, row)
			}
		}
	}
	return out, nil
}
