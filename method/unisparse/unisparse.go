// Package unisparse plans UniSparse attention (§4 of "A Unified Sparse
// Attention via Multi-Granularity Compression"): queries and keys are
// compressed into composite tokens — each the average of c_q (or c_k)
// consecutive tokens, and optionally of c_h consecutive heads — attention is
// computed in that compressed space, its weights are summed per original
// block pair, and each query block keeps the fewest KV blocks whose share of
// the mass reaches Top-P. The result is a binary block mask for the
// ordinary block-sparse executor.
//
// Besides Top-P, each query block also keeps the heaviest KV block of its
// outlier query (outlier.go): this project's extension of the paper's
// block selection, which keeps a lone query–key pair (a needle) that the
// composites average away. Planner.NoOutlier turns it off, leaving the
// paper's rule alone.
package unisparse

import (
	"context"
	"fmt"
	"slices"

	"github.com/sparseattn/sparseattn/method/internal/heads"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// Pooling is how consecutive tokens are merged into a composite token.
type Pooling uint8

const (
	// Average takes their mean (UniSparse Eq. 2, the method's choice).
	Average Pooling = iota
	// Max takes their elementwise maximum (the paper's ablation, §6.4).
	Max
	// Stochastic picks one of them at random with probability proportional
	// to its L2 norm (the paper's ablation, §6.4); the draw is seeded.
	Stochastic
)

// String returns "average", "max" or "stochastic".
func (p Pooling) String() string {
	switch p {
	case Average:
		return "average"
	case Max:
		return "max"
	case Stochastic:
		return "stochastic"
	}
	return fmt.Sprintf("Pooling(%d)", p)
}

// Defaults chosen from this project's ablation (RESULTS.md, UniSparse):
// Top-P 0.95, the paper's more accurate setting, and c_q·c_k = 64 split
// 16×4. At equal sparsity the 16×4 split erred 10–27% less than the
// balanced 8×8 on the llm workload and tied with it on video, for the same
// arithmetic (the compressed score matrix has N²/64 entries either way);
// finer factors (4×4, 2×2) erred less still but planned 3–10× slower. The
// paper found balanced compression best on its models (§6.4, Table 6); set
// CQ = CK = 8 for that.
const (
	DefaultTopP = 0.95
	DefaultCQ   = 16
	DefaultCK   = 4
)

// Planner builds UniSparse plans. The zero value uses DefaultTopP,
// c_q = DefaultCQ, c_k = DefaultCK, no head compression and average pooling.
// A Planner is safe for concurrent use.
type Planner struct {
	// TopP is the share of each query block's compressed attention mass
	// its kept KV blocks must reach (Eq. 6), in (0, 1]; 1 keeps every
	// block. 0 means DefaultTopP.
	TopP float64
	// CQ and CK are the sequence compression factors c_q and c_k: tokens
	// per composite query and key. CQ must divide BlockQ and CK BlockK, so
	// composite tokens never straddle blocks. 0 means DefaultCQ or
	// DefaultCK (or their greatest common divisor with the block size).
	CQ, CK int
	// CH is the head compression factor c_h (Eq. 3): consecutive query
	// heads averaged into one, whose mask all of them share. It must divide
	// Hq. 0 or 1 means no head compression.
	CH int
	// Pooling merges tokens into composite tokens; Average is UniSparse.
	Pooling Pooling
	// Seed selects the Stochastic pooling draw.
	Seed uint64
	// NoOutlier turns off the outlier query, this project's extension of
	// UniSparse's block selection (§4.3; see outlier.go): by default each
	// query block also keeps the KV block that takes the most of the
	// softmax of its outlier query — the token farthest from its
	// composite's mean — over the individual keys the block sees, besides
	// its Top-P blocks. With NoOutlier the rows are Top-P's alone, the
	// paper's rule.
	NoOutlier bool
}

// Name returns "unisparse".
func (u Planner) Name() string { return "unisparse" }

type config struct {
	topP       float64
	cq, ck, ch int
	pooling    Pooling
	seed       uint64
	outlier    bool
}

// Config is a Planner's configuration resolved for one tiling: defaults
// filled in and every value checked. The device planner (package cuda)
// reads it.
type Config struct {
	TopP       float64
	CQ, CK, CH int
	Pooling    Pooling
	Seed       uint64
	// Outlier is !Planner.NoOutlier: each query block also keeps its
	// outlier query's heaviest KV block (outlier.go).
	Outlier bool
}

// Resolve returns u's configuration for tiling t, or an error wrapping
// plan.ErrInvalid.
func (u Planner) Resolve(t plan.Tiling) (Config, error) {
	c, err := u.config(t)
	return Config{TopP: c.topP, CQ: c.cq, CK: c.ck, CH: c.ch, Pooling: c.pooling, Seed: c.seed, Outlier: c.outlier}, err
}

func (u Planner) config(t plan.Tiling) (config, error) {
	c := config{topP: u.TopP, cq: u.CQ, ck: u.CK, ch: u.CH, pooling: u.Pooling, seed: u.Seed, outlier: !u.NoOutlier}
	if c.topP == 0 {
		c.topP = DefaultTopP
	}
	if !(c.topP > 0 && c.topP <= 1) {
		return c, fmt.Errorf("%w: unisparse TopP %v must be in (0, 1] (0 means %v)", plan.ErrInvalid, u.TopP, DefaultTopP)
	}
	if c.cq == 0 {
		c.cq = gcd(DefaultCQ, t.BlockQ)
	}
	if c.ck == 0 {
		c.ck = gcd(DefaultCK, t.BlockK)
	}
	if c.cq < 1 || t.BlockQ%c.cq != 0 {
		return c, fmt.Errorf("%w: unisparse CQ %d must be a positive divisor of BlockQ %d (0 means %d)", plan.ErrInvalid, u.CQ, t.BlockQ, DefaultCQ)
	}
	if c.ck < 1 || t.BlockK%c.ck != 0 {
		return c, fmt.Errorf("%w: unisparse CK %d must be a positive divisor of BlockK %d (0 means %d)", plan.ErrInvalid, u.CK, t.BlockK, DefaultCK)
	}
	if c.ch == 0 {
		c.ch = 1
	}
	if c.ch < 1 || t.Geometry.Hq%c.ch != 0 {
		return c, fmt.Errorf("%w: unisparse CH %d must be a positive divisor of the %d query heads (0 or 1: no head compression)", plan.ErrInvalid, u.CH, t.Geometry.Hq)
	}
	if c.pooling > Stochastic {
		return c, fmt.Errorf("%w: unisparse pooling %d must be Average, Max or Stochastic", plan.ErrInvalid, u.Pooling)
	}
	return c, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Plan compresses Q and K, scores block pairs in the compressed space and
// keeps each query block's Top-P KV blocks, and (unless NoOutlier) its
// outlier query's heaviest KV block.
func (u Planner) Plan(ctx context.Context, t plan.Tiling, q, k, v *tensor.Tensor) (*plan.Plan, error) {
	dense, err := plan.Dense(t) // causally visible blocks of each row
	if err != nil {
		return nil, err
	}
	c, err := u.config(t)
	if err != nil {
		return nil, err
	}
	if err := heads.CheckInputs(t, q, k, "unisparse"); err != nil {
		return nil, err
	}
	g := t.Geometry
	keep := make([]bool, len(dense.KVBlock)) // aligned with dense's entries
	groups := g.B * g.Hq / c.ch
	err = heads.ForEachWorker(ctx, groups, func() func(int) {
		s := newScorer(dense, c, q, k)
		return func(i int) {
			b, h0 := i/(g.Hq/c.ch), (i%(g.Hq/c.ch))*c.ch
			s.compress(b, h0)
			for qb := range dense.QBlocks() {
				r := dense.Row(b, h0, qb)
				blocks, _ := dense.Entries(r)
				mass := s.blockMass(qb, blocks)
				kept := keep[dense.RowStart[r]:dense.RowStart[r+1]]
				s.topP(mass, c.topP, kept)
				if c.outlier && s.extra[qb] >= 0 {
					if e, ok := slices.BinarySearch(blocks, s.extra[qb]); ok {
						kept[e] = true
					}
				}
				// UniSparse §4.2: the group's mask is broadcast to its heads.
				for h := h0 + 1; h < h0+c.ch; h++ {
					r2 := dense.Row(b, h, qb)
					copy(keep[dense.RowStart[r2]:dense.RowStart[r2+1]], kept)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	bld, err := plan.NewBuilder(t)
	if err != nil {
		return nil, err
	}
	for r := range dense.Rows() {
		for e := dense.RowStart[r]; e < dense.RowStart[r+1]; e++ {
			if keep[e] {
				bld.Add(r, int(dense.KVBlock[e]), plan.Full)
			}
		}
	}
	return bld.Build()
}
