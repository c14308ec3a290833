package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestPsaOutlier16 checks when psa_outliers16 applies and its shared
// memory at the timed shape (bf16, D 128, 128-query blocks: 37 KiB, six
// CTAs a multiprocessor).
func TestPsaOutlier16(t *testing.T) {
	bf16, f16, f32 := dtypeCode(tensor.BFloat16), dtypeCode(tensor.Float16), dtypeCode(tensor.Float32)
	ok := view{ptr: 1 << 20, sb: 8 * 128 * 1024, sh: 128 * 1024, sn: 128, dtype: bf16}
	for _, c := range []struct {
		d    int
		v    view
		want bool
	}{
		{128, ok, true},
		{64, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: 64, dtype: f16}, true},
		{256, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: 2048, dtype: bf16}, true}, // BNHD: rows 8 heads apart
		{128, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: ok.sn, dtype: f32}, false},
		{96, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: 96, dtype: bf16}, false},
		{320, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: 320, dtype: bf16}, false},
		{128, view{ptr: ok.ptr + 8, sb: ok.sb, sh: ok.sh, sn: ok.sn, dtype: bf16}, false},
		{128, view{ptr: ok.ptr, sb: ok.sb, sh: ok.sh, sn: 132, dtype: bf16}, false},
		{128, view{ptr: ok.ptr, sb: ok.sb, sh: 4, sn: ok.sn, dtype: bf16}, false},
	} {
		if got := psaOutlier16(c.d, c.v); got != c.want {
			t.Errorf("d %d view %+v: %v, want %v", c.d, c.v, got, c.want)
		}
	}
	for _, c := range []struct{ d, pitch int }{{64, 36}, {128, 68}, {192, 100}, {256, 132}} {
		if got := psaOutlier16Pitch(c.d); got != c.pitch {
			t.Errorf("d %d: pitch %d, want %d", c.d, got, c.pitch)
		}
	}
	if got, want := psaOutlier16Smem(128, 128), 128*68*4+(2*128+128)*4; got != want {
		t.Errorf("smem %d, want %d", got, want)
	}
	if n := psaOutlier16Smem(128, 128) + 1024; 6*n > 228<<10 {
		t.Errorf("%d bytes a CTA: fewer than six a multiprocessor", n)
	}
}

// TestPsaOutliersDevice runs every path of psa_outliers (psa_outliers16,
// psa_outliers staged and reading its input) on blocks with equal rows
// (tied scores), far rows and a ragged last block, and one that Sampling
// takes whole, and compares each block's offsets with the CPU's
// (psa.OutlierOffsets): bf16, f16 and f32 inputs, D 64, 96, 128 and 256,
// blocks of 128 and 64 tokens, m ≤ 32 (one warp's arg-max) and m > 32
// (rank counts). Needs a device.
func TestPsaOutliersDevice(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	for _, c := range []struct {
		dt             tensor.DType
		d, n, bs, m, s int
	}{
		{tensor.BFloat16, 128, 3*128 + 37, 128, 8, 32},
		{tensor.BFloat16, 128, 4*64 + 13, 64, 4, 16},
		{tensor.BFloat16, 128, 2*128 + 20, 128, 40, 48}, // m > 32; last block (20) taken whole
		{tensor.Float16, 128, 3*128 + 99, 128, 8, 32},
		{tensor.Float16, 64, 3*128 + 64, 128, 13, 13},
		{tensor.BFloat16, 256, 2*128 + 77, 128, 32, 40},
		{tensor.BFloat16, 96, 2*128 + 50, 128, 8, 32}, // psa_outliers alone
		{tensor.Float32, 128, 2*128 + 60, 128, 8, 32},
		{tensor.Float32, 64, 3*64 + 31, 64, 5, 9},
	} {
		t.Run(fmt.Sprintf("%v/d%d/n%d/bs%d/m%d", c.dt, c.d, c.n, c.bs, c.m), func(t *testing.T) {
			const heads = 3
			r := rand.New(rand.NewPCG(uint64(c.d), uint64(c.n)))
			x, err := tensor.New(c.dt, tensor.BHND, tensor.Shape{B: 1, H: heads, N: c.n, D: c.d})
			if err != nil {
				t.Fatal(err)
			}
			row := make([]float32, c.d)
			for h := range heads {
				for j := range c.n {
					switch {
					case j%11 == 3 && j > 0: // a copy of the row before: tied scores
						x.ReadRow(0, h, j-1, row)
					case j%37 == 5: // far out in a few dimensions
						for i := range row {
							row[i] = float32(r.NormFloat64())
						}
						row[r.IntN(c.d)] += 40
					default:
						for i := range row {
							row[i] = float32(r.NormFloat64()) + float32(i%7)
						}
					}
					x.WriteRow(0, h, j, row)
				}
			}
			dx, err := e.Upload(ctx, x)
			if err != nil {
				t.Fatal(err)
			}
			defer dx.Free()
			nb := (c.n + c.bs - 1) / c.bs
			blocks := heads * nb
			want := make([][]int, blocks)
			rows := make([]float32, c.bs*c.d)
			for i := range want {
				h, lo := i/nb, i%nb*c.bs
				n := min(lo+c.bs, c.n) - lo
				if n <= c.s {
					continue // taken whole: left alone
				}
				for j := range n {
					x.ReadRow(0, h, lo+j, rows[j*c.d:(j+1)*c.d])
				}
				if want[i], err = psa.OutlierOffsets(rows[:n*c.d], n, c.d, c.m); err != nil {
					t.Fatal(err)
				}
			}
			paths := []psaOutlierPath{psaOutlierStaged, psaOutlierUnstaged}
			if psaOutlier16(c.d, viewOf(dx)) {
				paths = append(paths, psaOutlierAuto)
			}
			for _, path := range paths {
				got, err := runPsaOutliers(ctx, e, dx, c.bs, c.m, c.s, blocks, path)
				if err != nil {
					t.Fatal(err)
				}
				for i, w := range want {
					g := got[i*c.m : (i+1)*c.m]
					if w == nil {
						w = slices.Repeat([]int{-1}, c.m)
					}
					if !slices.Equal(g, w) {
						t.Errorf("path %d block %d (head %d, tokens from %d): offsets %v, want %v", path, i, i/nb, i%nb*c.bs, g, w)
					}
				}
			}
		})
	}
}

// runPsaOutliers launches the query side of psa_outliers on x (blocks of
// bs tokens, m outliers of s draws) by path and returns the offsets,
// m a block, −1 where the kernel wrote none.
func runPsaOutliers(ctx context.Context, e *Engine, x *Tensor, bs, m, s, blocks int, path psaOutlierPath) ([]int, error) {
	g := x.Shape()
	host, err := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: blocks, D: m})
	if err != nil {
		return nil, err
	}
	fill := host.Float32s()
	for i := range fill {
		fill[i] = math.Float32frombits(0xffffffff) // int32 −1
	}
	out, err := e.Upload(ctx, host)
	if err != nil {
		return nil, err
	}
	defer out.Free()
	pa := planArgs{b: int32(g.B), hq: int32(g.H), hkv: int32(g.H), nq: int32(g.N), nk: int32(g.N), d: int32(g.D), bq: int32(bs), bk: int32(bs)}
	a := psaArgs{sq: int32(s), sk: int32(s), oq: int32(m), ok: int32(m), qout: uint64(out.ptr), kout: uint64(out.ptr)}
	err = e.dev.Do(ctx, func(c *driver.Ctx) error {
		c = c.OnStream(x.stream)
		old, err := e.auxFunction(c, "plan_psa.cu", "psa_outliers")
		if err != nil {
			return err
		}
		if err := e.launchPsaOutliers(c, old, &pa, &a, viewOf(x), 0, blocks, bs, g.D, path); err != nil {
			return err
		}
		return c.SyncStream()
	})
	if err != nil {
		return nil, err
	}
	back, err := out.Download(ctx)
	if err != nil {
		return nil, err
	}
	offs := make([]int, blocks*m)
	for i, f := range back.Float32s() {
		offs[i] = int(int32(math.Float32bits(f)))
	}
	return offs, nil
}
