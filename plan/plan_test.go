package plan

import (
	"errors"
	"math"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

func tiling(nq, nk, bq, bk int, causal bool) Tiling {
	return Tiling{Geometry: tensor.Geometry{B: 2, Hq: 4, Hkv: 2, Nq: nq, Nk: nk, D: 32, Dv: 32}, Causal: causal, BlockQ: bq, BlockK: bk}
}

// TestDenseBlocksCountsVisibleBlocks checks the dense count against a
// token-by-token scan of the visibility rule.
func TestDenseBlocksCountsVisibleBlocks(t *testing.T) {
	for _, tc := range []struct {
		nq, nk, bq, bk int
		causal         bool
	}{
		{128, 128, 64, 64, true}, {100, 100, 32, 16, true}, {1, 300, 64, 64, true},
		{60, 20, 16, 16, true}, {77, 77, 16, 32, false}, {5, 5, 64, 64, true}, {50, 200, 32, 48, true},
	} {
		tl := tiling(tc.nq, tc.nk, tc.bq, tc.bk, tc.causal)
		p, err := Dense(tl)
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		for qb := range p.QBlocks() {
			for kb := range p.KBlocks() {
				qlo, qhi := p.QueryRange(qb)
				klo, khi := p.KeyRange(kb)
				anyVis, allVis := false, true
				for i := qlo; i < qhi; i++ {
					for j := klo; j < khi; j++ {
						vis := !tc.causal || j <= i+tc.nk-tc.nq
						anyVis = anyVis || vis
						allVis = allVis && vis
					}
				}
				gotAny, gotPartial := p.BlockVisibility(qb, kb)
				if gotAny != anyVis || gotPartial != (anyVis && !allVis) {
					t.Errorf("%+v block (%d,%d): visibility (%v,%v), want (%v,%v)", tc, qb, kb, gotAny, gotPartial, anyVis, anyVis && !allVis)
				}
				if anyVis {
					want++
				}
			}
		}
		want *= int64(tl.Geometry.B * tl.Geometry.Hq)
		if got := p.DenseBlocks(); got != want {
			t.Errorf("%+v: DenseBlocks %d, want %d", tc, got, want)
		}
		if int64(len(p.KVBlock)) != want {
			t.Errorf("%+v: dense plan has %d entries, want %d", tc, len(p.KVBlock), want)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	tl := tiling(128, 128, 32, 32, true)
	for _, tc := range []struct {
		name    string
		corrupt func(p *Plan)
	}{
		{"block-out-of-range", func(p *Plan) { p.KVBlock[0] = 4 }},
		{"negative-block", func(p *Plan) { p.KVBlock[0] = -1 }},
		{"duplicate-block", func(p *Plan) { p.KVBlock[2] = p.KVBlock[1] }},
		{"future-block", func(p *Plan) { p.KVBlock[0] = 3 }}, // row 0 is query block 0, which sees only block 0
		{"bad-rowstart", func(p *Plan) { p.RowStart = p.RowStart[:3] }},
		{"rowstart-decreasing", func(p *Plan) { p.RowStart[1], p.RowStart[2] = p.RowStart[2], p.RowStart[1] }},
		{"level-length", func(p *Plan) { p.Level = []Level{1} }},
		{"level-too-high", func(p *Plan) { p.Level = make([]Level, len(p.KVBlock)); p.Level[0] = MaxLevel + 1 }},
		{"pooled-diagonal", func(p *Plan) { p.Level = make([]Level, len(p.KVBlock)); p.Level[0] = 2 }},
		{"lambda-positive", func(p *Plan) { p.Filter = &Filter{Lambda: 1, RowGroup: 16} }},
		{"rowgroup", func(p *Plan) { p.Filter = &Filter{Lambda: -3, RowGroup: 5} }},
		{"head-lambda-length", func(p *Plan) { p.Filter = &Filter{RowGroup: 16, HeadLambda: []float32{-3}} }},
		{"head-lambda-positive", func(p *Plan) { p.Filter = &Filter{RowGroup: 16, HeadLambda: []float32{-3, -3, 0.5, -3}} }},
		{"head-lambda-nan", func(p *Plan) {
			p.Filter = &Filter{RowGroup: 16, HeadLambda: []float32{float32(math.NaN()), -1, -1, -1}}
		}},
		{"tau", func(p *Plan) { p.Stop = &StopRule{Tau: 1.5} }},
		{"init-tiling", func(p *Plan) { in := *p; in.BlockK = 16; p.Init = &in }},
		{"init-nested", func(p *Plan) { in, in2 := *p, *p; in.Init = &in2; p.Init = &in }},
		{"init-invalid", func(p *Plan) { in := *p; in.KVBlock = []int32{9}; p.Init = &in }},
		{"row-after-length", func(p *Plan) { p.Stop = &StopRule{Tau: 0.1, RowAfter: []int32{1}} }},
		{"row-after-negative", func(p *Plan) {
			p.Stop = &StopRule{Tau: 0.1, RowAfter: make([]int32, p.Rows())}
			p.Stop.RowAfter[2] = -1
		}},
		{"query-order-not-permutation", func(p *Plan) {
			p.Order = &TokenOrder{Query: make([]int32, 2*4*128)}
		}},
		{"kv-order-repeats", func(p *Plan) {
			p.Order = &TokenOrder{KV: []int32{1, 1}, KVStart: []int{0, 2}}
		}},
		{"row-kv-range", func(p *Plan) {
			p.Order = &TokenOrder{KV: []int32{0}, KVStart: []int{0, 1}, RowKV: make([]int32, p.Rows())}
			p.Order.RowKV[3] = 1
		}},
		{"block-size", func(p *Plan) { p.BlockQ = 0 }},
		{"pooled-with-order", func(p *Plan) {
			p.Level = make([]Level, len(p.KVBlock))
			for i := range p.Level {
				p.Level[i] = Full
			}
			p.Level[len(p.Level)-1] = 2
			p.Order = &TokenOrder{KV: []int32{0, 1}, KVStart: []int{0, 2}, RowKV: make([]int32, p.Rows())}
		}},
		{"negative-scale", func(p *Plan) { p.Scale = -0.1 }},
		{"rowstart-overshoots", func(p *Plan) { p.RowStart[1] = len(p.KVBlock) + 100 }},
		{"kvstart-overshoots", func(p *Plan) {
			p.Order = &TokenOrder{KV: []int32{0, 1, 2}, KVStart: []int{0, 100, 3}}
		}},
		{"block-beyond-key-order", func(p *Plan) {
			// Row 5 (query block 1) lists blocks 0 and 1, but its order has one block.
			p.Order = &TokenOrder{KV: []int32{0, 1}, KVStart: []int{0, 2}, RowKV: make([]int32, p.Rows())}
			for i := range p.Order.RowKV {
				p.Order.RowKV[i] = -1
			}
			p.Order.RowKV[1] = 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Dense(tl)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("dense plan invalid: %v", err)
			}
			tc.corrupt(p)
			if err := p.Validate(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestBuilder(t *testing.T) {
	tl := tiling(64, 64, 32, 32, false)
	b, err := NewBuilder(tl)
	if err != nil {
		t.Fatal(err)
	}
	b.Add(0, 1, Full)
	b.Add(0, 0, 3)
	b.Add(5, 1, Full)
	p, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	blocks, levels := p.Entries(0)
	if len(blocks) != 2 || blocks[0] != 1 || blocks[1] != 0 || levels[0] != Full || levels[1] != 3 {
		t.Errorf("row 0 = %v %v, want [1 0] [1 3]", blocks, levels)
	}
	for r := 1; r < p.Rows(); r++ {
		blocks, _ := p.Entries(r)
		if want := map[bool]int{true: 1, false: 0}[r == 5]; len(blocks) != want {
			t.Errorf("row %d has %d entries, want %d", r, len(blocks), want)
		}
	}
	b3, _ := NewBuilder(tl)
	b3.Add(0, 1<<40, Full)
	if _, err := b3.Build(); !errors.Is(err, ErrInvalid) {
		t.Errorf("block 2^40: %v, want ErrInvalid", err)
	}
	var zero Builder
	zero.Add(0, 0, Full)
	if _, err := zero.Build(); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero Builder: %v, want ErrInvalid", err)
	}
	var zp Plan
	if zp.QBlocks() != 0 || zp.Rows() != 0 || zp.DenseBlocks() != 0 || !errors.Is(zp.Validate(), ErrInvalid) {
		t.Error("zero Plan must report no blocks and fail validation")
	}
	b2, _ := NewBuilder(tl)
	b2.Add(3, 0, Full)
	b2.Add(2, 0, Full)
	if _, err := b2.Build(); !errors.Is(err, ErrInvalid) {
		t.Errorf("rows out of order: %v, want ErrInvalid", err)
	}
	if _, err := NewBuilder(tiling(64, 64, 0, 32, false)); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero block: %v, want ErrInvalid", err)
	}
}

func TestLevelPool(t *testing.T) {
	for l, want := range map[Level]int{Skip: 0, Full: 1, 2: 2, 4: 8, MaxLevel: 128} {
		if got := l.Pool(); got != want {
			t.Errorf("level %d pools %d, want %d", l, got, want)
		}
	}
}

func TestStatsSparsity(t *testing.T) {
	s := Stats{DenseBlocks: 10, QKBlocks: 4, PVBlocks: 2}
	if s.QKSkipped() != 6 || s.PVSkipped() != 8 {
		t.Errorf("skipped QK %v PV %v, want 6 and 8", s.QKSkipped(), s.PVSkipped())
	}
	if got := s.Sparsity(); got != 0.7 {
		t.Errorf("sparsity %v, want 0.7", got)
	}
	s.Add(Stats{DenseBlocks: 10, QKBlocks: 10, PVBlocks: 10, Stopped: 1})
	if s.Sparsity() != 1-26.0/40 || s.Stopped != 1 {
		t.Errorf("after Add: %+v", s)
	}
	if (Stats{}).Sparsity() != 0 {
		t.Error("empty stats should report sparsity 0")
	}
}

// TestHeadLambda: a per-head λ slice overrides Lambda, −Inf is accepted as
// "off for this head", and Lambda itself is then not required.
func TestHeadLambda(t *testing.T) {
	p, err := Dense(tiling(128, 128, 32, 32, true))
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(-1))
	p.Filter = &Filter{RowGroup: 16, HeadLambda: []float32{-3, inf, -0.5, -7}}
	if err := p.Validate(); err != nil {
		t.Fatalf("valid per-head λ rejected: %v", err)
	}
	for h, want := range []float32{-3, inf, -0.5, -7} {
		if got := p.Filter.LambdaFor(h); got != want {
			t.Errorf("LambdaFor(%d) = %v, want %v", h, got, want)
		}
	}
	p.Filter = &Filter{RowGroup: 16, Lambda: -2}
	if got := p.Filter.LambdaFor(3); got != -2 {
		t.Errorf("LambdaFor without HeadLambda = %v, want Lambda -2", got)
	}
}
