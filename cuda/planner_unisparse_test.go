package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// uniDbound is uni_dbound in kernels/plan_unisparse.cu: float64 bounds of
// the float64 squared distance from f, its float32 counterpart.
func uniDbound(f float32, d int) (l, u float64, ok bool) {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return 0, 0, false
	}
	rel, ab := float64(d+16)*0x1p-21, float64(d+16)*0x1p-149
	return math.FMA(float64(f), 1-rel, -ab), math.FMA(float64(f), 1+rel, ab), true
}

// fma32 is a float32 fused multiply-add, up to a double rounding.
func fma32(a, b, c float32) float32 { return float32(float64(a)*float64(b) + float64(c)) }

// uniDist32 is uni_outlier's float32 distance of x from mu: lane hl of 16
// takes dims hl·8 + 128·k …, then the lanes add up by xor 8, 4, 2, 1.
func uniDist32(x, mu []float32) float32 {
	var s [16]float32
	for hl := range s {
		for d0 := hl * 8; d0 < len(x); d0 += 128 {
			for e := 0; e < 8 && d0+e < len(x); e++ {
				df := x[d0+e] - mu[d0+e]
				s[hl] = fma32(df, df, s[hl])
			}
		}
	}
	for o := 8; o > 0; o >>= 1 {
		var n [16]float32
		for i := range s {
			n[i] = s[i] + s[i^o]
		}
		s = n
	}
	return s[0]
}

// uniDist64 is the CPU's (and uni_outlier's) float64 distance.
func uniDist64(x, mu []float32) float64 {
	var r float64
	for d := range x {
		e := float64(x[d]) - float64(mu[d])
		r += float64(e * e)
	}
	return r
}

// TestOutlierDistanceBound checks that uni_dbound's interval holds the
// float64 distance for tokens at ordinary, tiny (subnormal squares) and
// huge scales, near their mean and far from it, at several head dims.
func TestOutlierDistanceBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{8, 64, 96, 128, 200, 256} {
		for _, scale := range []float64{1, 1e-20, 1e-40, 1e18, 1e-3} {
			for _, near := range []float64{1, 1e-3, 1e-6} {
				for range 200 {
					mu, x := make([]float32, d), make([]float32, d)
					for i := range mu {
						mu[i] = float32(r.NormFloat64() * scale)
						x[i] = float32(float64(mu[i]) + r.NormFloat64()*scale*near)
					}
					f := uniDist32(x, mu)
					l, u, ok := uniDbound(f, d)
					if !ok {
						continue // non-finite: the kernel takes the float64 distance
					}
					if e := uniDist64(x, mu); !(l <= e && e <= u) {
						t.Fatalf("D=%d scale %g near %g: float64 distance %g outside [%g, %g] (float32 %g)", d, scale, near, e, l, u, f)
					}
				}
			}
		}
	}
}

// TestOutlierPass checks uni_outlier's pass shape: a 128-token block of
// 16-token groups at D 128 in one staged pass, float32 and head-averaged
// inputs unstaged, and the dynamic shared memory within uniOutlierBytes.
func TestOutlierPass(t *testing.T) {
	bf16 := dtypeCode(tensor.BFloat16)
	for _, c := range []struct {
		d, bq, cq, ch int
		dtype         int32
		ptr           uint64
		gpp           int
		stage         bool
	}{
		{128, 128, 16, 1, bf16, 1 << 20, 8, true},
		{128, 128, 16, 2, bf16, 1 << 20, 8, false},
		{128, 128, 16, 1, dtypeCode(tensor.Float32), 1 << 20, 8, false},
		{128, 128, 16, 1, bf16, 1<<20 + 2, 8, false},
		{256, 256, 16, 1, bf16, 1 << 20, 4, true},
		{256, 4096, 128, 1, bf16, 1 << 20, 26, false},
	} {
		g := tensor.Geometry{B: 1, Hq: 4, Hkv: 2, Nq: 4096, Nk: 4096, D: c.d, Dv: c.d}
		in := &planInput{t: plan.Tiling{Geometry: g, Causal: true, BlockQ: c.bq, BlockK: 64},
			q: view{ptr: c.ptr, sb: int64(4 * 4096 * c.d), sh: int64(4096 * c.d), sn: int64(c.d), dtype: c.dtype}}
		cfg := unisparse.Config{CQ: c.cq, CK: 4, CH: c.ch}
		gpp, stage := uniOutlierPass(in, cfg)
		if gpp != c.gpp || stage != c.stage {
			t.Errorf("%+v: %d groups a pass, staged %v; want %d, %v", c, gpp, stage, c.gpp, c.stage)
		}
		per := (c.d + c.cq) * 4
		if stage {
			per += c.cq * c.d * 2
		}
		if gpp*per > uniOutlierBytes {
			t.Errorf("%+v: %d bytes of shared memory", c, gpp*per)
		}
	}
}

// TestQueryResident checks where bm_mass keeps its query rows resident:
// UniSparse's main pass (hi and lo halves of one-token rows) at D 128 and
// 64 on an sm_90 (227 KB a block), not at D 256, not outside split or
// with argmax, and not where two blocks would no longer share a
// multiprocessor (an sm_86's 99 KB).
func TestQueryResident(t *testing.T) {
	split := bmMass{split: true, q: bmOp{s: 1}}
	for _, c := range []struct {
		m        bmMass
		dp, bk   int
		nst, opt int
		want     bool
	}{
		{split, 128, 32, 2, 232448, true},
		{split, 64, 32, 2, 232448, true},
		{split, 80, 16, 4, 232448, true},
		{split, 256, 32, 2, 232448, false},
		{bmMass{split: true, argmax: true, q: bmOp{s: 1}}, 128, 32, 2, 232448, false},
		{bmMass{q: bmOp{s: 1}}, 128, 64, 2, 232448, false},
		{bmMass{split: true, q: bmOp{s: 2}}, 128, 32, 2, 232448, false},
		{split, 128, 32, 2, 101376, false},
	} {
		if got := bmQueryResident(c.m, c.dp, c.nst, bmRows*(c.bk+8)*2, c.opt); got != c.want {
			t.Errorf("split %v argmax %v S %d, D %d, %d×%d, opt-in %d: resident %v, want %v", c.m.split, c.m.argmax, c.m.q.s, c.dp, c.bk, c.nst, c.opt, got, c.want)
		}
	}
}
