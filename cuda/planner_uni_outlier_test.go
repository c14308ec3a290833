package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestUniOutlier16 checks when uni_outlier16 applies and its shared
// memory at the timed shape (bf16, D 128, 128-query blocks, 8 composites
// of 16: 38 KiB).
func TestUniOutlier16(t *testing.T) {
	bf16, f32 := dtypeCode(tensor.BFloat16), dtypeCode(tensor.Float32)
	ok := view{ptr: 1 << 20, sb: 32 * 128 * 1024, sh: 128 * 1024, sn: 128, dtype: bf16}
	for _, c := range []struct {
		d    int
		v    view
		want bool
	}{
		{128, ok, true},
		{96, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: 96, dtype: bf16}, true},
		{128, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: ok.sn, dtype: f32}, false},
		{100, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: 104, dtype: bf16}, false},
		{128, view{ptr: ok.ptr + 2, sb: ok.sb, sh: ok.sh, sn: ok.sn, dtype: bf16}, false},
		{128, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: 130, dtype: bf16}, false},
	} {
		if got := uniOutlier16(c.d, c.v); got != c.want {
			t.Errorf("d %d view %+v: %v, want %v", c.d, c.v, got, c.want)
		}
	}
	if got, want := uniOutlier16Smem(128, 128, 8), 128*68*4+8*128*4; got != want {
		t.Errorf("smem %d, want %d", got, want)
	}
}

// TestUniOutlierDevice runs uni_outlier and uni_outlier16 on the same
// queries and compares what they write, bit for bit: the outlier tokens
// (raw, and scaled as bf16 halves) and the composite queries, for bf16 and
// f16 inputs, D 64, 96 and 128, a ragged last block (and composite), one
// pass of composites a block and several. Needs a device.
func TestUniOutlierDevice(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	for _, c := range []struct {
		dt           tensor.DType
		d, n, bq, cq int
		gpp          int
		raw          bool
	}{
		{tensor.BFloat16, 128, 3*128 + 37, 128, 16, 8, true},
		{tensor.BFloat16, 128, 3*128 + 37, 128, 16, 3, false},
		{tensor.Float16, 64, 2*128 + 90, 128, 8, 16, true},
		{tensor.BFloat16, 96, 4*64 + 21, 64, 16, 4, false},
	} {
		t.Run(fmt.Sprintf("%v/d%d/n%d/bq%d/c%d/gpp%d/raw%v", c.dt, c.d, c.n, c.bq, c.cq, c.gpp, c.raw), func(t *testing.T) {
			const heads = 2
			r := rand.New(rand.NewPCG(uint64(c.d), uint64(c.n)))
			x, err := tensor.New(c.dt, tensor.BHND, tensor.Shape{B: 1, H: heads, N: c.n, D: c.d})
			if err != nil {
				t.Fatal(err)
			}
			row := make([]float32, c.d)
			for h := range heads {
				for j := range c.n {
					for i := range row {
						row[i] = float32(r.NormFloat64())
					}
					if j%23 == 7 {
						row[r.IntN(c.d)] += 12 // a far token
					}
					if j%19 == 4 && j > 0 {
						x.ReadRow(0, h, j-1, row) // a tie
					}
					x.WriteRow(0, h, j, row)
				}
			}
			dx, err := e.Upload(ctx, x)
			if err != nil {
				t.Fatal(err)
			}
			defer dx.Free()
			var outs [2][]uint16
			for i, fn := range []string{"uni_outlier", "uni_outlier16"} {
				if outs[i], err = runUniOutlier(ctx, e, dx, fn, c.bq, c.cq, c.gpp, c.raw); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(outs[0], outs[1]) {
				for i := range outs[0] {
					if outs[0][i] != outs[1][i] {
						t.Fatalf("uni_outlier16 differs from uni_outlier at element %d of %d: %#x, want %#x", i, len(outs[0]), outs[1][i], outs[0][i])
					}
				}
			}
		})
	}
}

// runUniOutlier launches fn (uni_outlier or uni_outlier16) on the queries
// x, one head a group, and returns what it wrote: the outlier tokens'
// halves, then the composite queries' halves (as bits).
func runUniOutlier(ctx context.Context, e *Engine, x *Tensor, fn string, bq, cq, gpp int, raw bool) ([]uint16, error) {
	g := x.Shape()
	qbs := (g.N + bq - 1) / bq
	nq := (g.N + cq - 1) / cq
	host, err := tensor.New(tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: 1, N: 2*g.H*qbs + 2*g.H*nq, D: g.D})
	if err != nil {
		return nil, err
	}
	bits := host.Bits16()
	for i := range bits {
		bits[i] = 0xdead
	}
	buf, err := e.Upload(ctx, host)
	if err != nil {
		return nil, err
	}
	defer buf.Free()
	part := func(i, rows int) uint64 { return uint64(buf.ptr) + uint64(i*rows*g.D*2) }
	oHi, oLo := part(0, g.H*qbs), part(1, g.H*qbs)
	cqHi := uint64(buf.ptr) + uint64(2*g.H*qbs*g.D*2)
	cqLo := cqHi + uint64(g.H*nq*g.D*2)
	pa := planArgs{qBlocks: int32(qbs), b: int32(g.B), hq: int32(g.H), hkv: int32(g.H), nq: int32(g.N), nk: int32(g.N), d: int32(g.D), bq: int32(bq), bk: int32(bq)}
	v := viewOf(x)
	cc, ch, scale, rw, gp, nqa := int32(cq), int32(1), float32(0.0883883), uniFlag(raw), int32(gpp), int32(nq)
	smem := gpp * g.D * 4
	if fn == "uni_outlier16" {
		smem = uniOutlier16Smem(g.D, bq, gpp)
	}
	err = e.dev.Do(ctx, func(c *driver.Ctx) error {
		c = c.OnStream(x.stream)
		f, err := e.auxFunction(c, "plan_unisparse.cu", fn, bmStubDefs...)
		if err != nil {
			return err
		}
		if err := e.raiseDynamicShared(c, f, smem); err != nil {
			return err
		}
		if err := c.Launch(f, driver.Dim3{X: uint32(g.H * qbs), Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, smem,
			driver.Arg(&pa), driver.Arg(&v), driver.Arg(&oHi), driver.Arg(&oLo), driver.Arg(&cc), driver.Arg(&ch), driver.Arg(&scale), driver.Arg(&rw), driver.Arg(&gp),
			driver.Arg(&cqHi), driver.Arg(&cqLo), driver.Arg(&nqa)); err != nil {
			return err
		}
		return c.SyncStream()
	})
	if err != nil {
		return nil, err
	}
	back, err := buf.Download(ctx)
	if err != nil {
		return nil, err
	}
	return back.Bits16(), nil
}
