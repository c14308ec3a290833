package metrics

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/tensor"
)

func randomTensor(r *rand.Rand, s tensor.Shape) *tensor.Tensor {
	data := make([]float32, s.Len())
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	t, _ := tensor.FromFloat32(tensor.BHND, s, data)
	return t
}

// TestCompareAgainstDirectSums checks every metric against a direct
// computation over the flat data, on shapes of one part and of several
// (more rows than compareChunk, a last part cut short), and a head dim
// past Tensor.ReadRow64's stack buffer.
func TestCompareAgainstDirectSums(t *testing.T) {
	r := testutil.Rand(t)
	for _, s := range []tensor.Shape{
		{B: 2, H: 3, N: 17, D: 9},
		{B: 1, H: 3, N: compareChunk + 301, D: 16},
		{B: 2, H: 1, N: 5, D: 300},
	} {
		t.Run(fmt.Sprint(s), func(t *testing.T) { compareDirect(t, randomTensor(r, s), randomTensor(r, s)) })
	}
}

// TestCompareDeterministic: the parts' sums are added in row order, so one
// CPU and many give the same bits.
func TestCompareDeterministic(t *testing.T) {
	r := testutil.Rand(t)
	s := tensor.Shape{B: 2, H: 4, N: 3*compareChunk + 77, D: 8}
	ref, got := randomTensor(r, s), randomTensor(r, s)
	prev := runtime.GOMAXPROCS(1)
	one, err := CompareTensors(ref, got)
	runtime.GOMAXPROCS(8)
	many, err2 := CompareTensors(ref, got)
	runtime.GOMAXPROCS(prev)
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	if one != many {
		t.Errorf("1 CPU %+v, 8 CPUs %+v", one, many)
	}
}

// compareDirect is TestCompareAgainstDirectSums on one pair.
func compareDirect(t *testing.T, ref, got *tensor.Tensor) {
	t.Helper()
	e, err := CompareTensors(ref, got)
	if err != nil {
		t.Fatal(err)
	}
	var l1, l1ref, l2, l2ref, l2got, dot, mx float64
	a, b := ref.Float32s(), got.Float32s()
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		l1 += math.Abs(d)
		l1ref += math.Abs(float64(a[i]))
		l2 += d * d
		l2ref += float64(a[i]) * float64(a[i])
		l2got += float64(b[i]) * float64(b[i])
		dot += float64(a[i]) * float64(b[i])
		mx = max(mx, math.Abs(d))
	}
	n := float64(len(a))
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"RelL1", e.RelL1, l1 / l1ref},
		{"RelL2", e.RelL2, math.Sqrt(l2 / l2ref)},
		{"MSE", e.MSE, l2 / n},
		{"MAE", e.MAE, l1 / n},
		{"Cosine", e.Cosine, dot / math.Sqrt(l2ref*l2got)},
		{"MaxAbs", e.MaxAbs, mx},
	} {
		if math.Abs(c.got-c.want) > 1e-12*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestCompareIdentities(t *testing.T) {
	r := testutil.Rand(t)
	s := tensor.Shape{B: 1, H: 2, N: 8, D: 4}
	ref := randomTensor(r, s)
	same, _ := CompareTensors(ref, ref)
	if same.RelL1 != 0 || same.MSE != 0 || same.MaxAbs != 0 || math.Abs(same.Cosine-1) > 1e-12 {
		t.Errorf("identical: %+v", same)
	}
	doubled, _ := ref.Convert(tensor.Float32, tensor.BHND)
	for i, x := range doubled.Float32s() {
		doubled.Float32s()[i] = 2 * x
	}
	e, _ := CompareTensors(ref, doubled)
	if math.Abs(e.RelL1-1) > 1e-12 || math.Abs(e.RelL2-1) > 1e-12 || math.Abs(e.Cosine-1) > 1e-12 {
		t.Errorf("O' = 2·O: %+v, want rel L1 = rel L2 = cosine = 1", e)
	}
	zero, _ := tensor.New(tensor.Float32, tensor.BHND, s)
	e, _ = CompareTensors(zero, zero)
	if e.RelL1 != 0 || e.Cosine != 1 {
		t.Errorf("zero vs zero: %+v", e)
	}
	e, _ = CompareTensors(zero, ref)
	if !math.IsInf(e.RelL1, 1) || e.Cosine != 0 {
		t.Errorf("zero reference: %+v", e)
	}
	other, _ := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: 8, D: 5})
	if _, err := CompareTensors(ref, other); !errors.Is(err, ErrMismatch) {
		t.Errorf("shape mismatch: %v", err)
	}
}

func TestDenseFLOPs(t *testing.T) {
	for _, tc := range []struct {
		g      tensor.Geometry
		causal bool
	}{
		{tensor.Geometry{B: 2, Hq: 4, Hkv: 1, Nq: 100, Nk: 100, D: 64, Dv: 64}, false},
		{tensor.Geometry{B: 1, Hq: 2, Hkv: 2, Nq: 100, Nk: 100, D: 64, Dv: 64}, true},
		{tensor.Geometry{B: 1, Hq: 2, Hkv: 2, Nq: 1, Nk: 500, D: 128, Dv: 128}, true},
		{tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 30, Nk: 10, D: 32, Dv: 16}, true},
	} {
		var pairs float64
		for i := range tc.g.Nq {
			for j := range tc.g.Nk {
				if !tc.causal || j <= i+tc.g.Nk-tc.g.Nq {
					pairs++
				}
			}
		}
		pairs *= float64(tc.g.B * tc.g.Hq)
		want := pairs * 2 * float64(tc.g.D+tc.g.Dv)
		if got := DenseFLOPs(tc.g, tc.causal); got != want {
			t.Errorf("%+v causal=%v: %v FLOPs, want %v", tc.g, tc.causal, got, want)
		}
		if got := TOPS(tc.g, tc.causal, 2); got != want/2/1e12 {
			t.Errorf("TOPS %v, want %v", got, want/2/1e12)
		}
	}
	// Square causal problems are half of 4·B·H·N²·D, to within 1/N.
	g := tensor.Geometry{B: 1, Hq: 1, Hkv: 1, Nq: 4096, Nk: 4096, D: 128, Dv: 128}
	if ratio := DenseFLOPs(g, true) / (4 * 4096 * 4096 * 128 / 2.0); math.Abs(ratio-1) > 1.0/4096+1e-12 {
		t.Errorf("causal/half ratio %v", ratio)
	}
}
