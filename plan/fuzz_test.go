package plan

import (
	"errors"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

// FuzzValidate fills every slice of a Plan and its TokenOrder with raw fuzz
// bytes, consistent or not. Validate must return nil or ErrInvalid, never
// panic, and a plan it accepts must satisfy the invariants executors index
// by.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{3, 5, 2, 2, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 1, 1, 1, 0, 0, 100, 2, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			x := int(data[0])
			data = data[1:]
			return x
		}
		g := tensor.Geometry{B: 1, Hq: 1 + next()%2, Hkv: 1}
		g.Nq, g.Nk, g.D, g.Dv = 1+next()%20, 1+next()%20, 4, 4
		p := &Plan{Tiling: Tiling{Geometry: g, Causal: next()%2 == 0, BlockQ: 1 + next()%8, BlockK: 1 + next()%8}}
		signed := func() int { return next() - 20 }
		for range next() % 12 {
			p.RowStart = append(p.RowStart, signed())
		}
		for range next() % 12 {
			p.KVBlock = append(p.KVBlock, int32(signed()))
		}
		if next()%2 == 0 {
			for range len(p.KVBlock) + next()%2 {
				p.Level = append(p.Level, Level(next()%10))
			}
		}
		if next()%2 == 0 {
			o := &TokenOrder{}
			for range next() % 8 {
				o.KV = append(o.KV, int32(signed()))
			}
			for range next() % 4 {
				o.KVStart = append(o.KVStart, signed())
			}
			for range next() % 6 {
				o.RowKV = append(o.RowKV, int32(next()%4-1))
			}
			if next()%3 == 0 {
				for range g.Hq * g.Nq {
					o.Query = append(o.Query, int32(next()%(g.Nq+1)))
				}
			}
			p.Order = o
		}
		err := p.Validate()
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate: %v is not ErrInvalid", err)
			}
			return
		}
		for r := range p.Rows() {
			blocks, levels := p.Entries(r)
			for i, kb := range blocks {
				if kb < 0 || int(kb) >= p.KBlocks() || (levels != nil && levels[i] > MaxLevel) {
					t.Fatalf("accepted plan has row %d entry %d = block %d", r, i, kb)
				}
			}
		}
	})
}
