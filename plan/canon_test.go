package plan

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExp64 checks the canonical exp against math.Exp: within 2 ulp over
// the range the planners use, exact at 0, 0 below −708.
func TestExp64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		x := -708 * r.Float64()
		if i%2 == 0 {
			x = -30 * r.Float64()
		}
		got, want := Exp64(x), math.Exp(x)
		if math.Abs(got-want) > 2*(math.Nextafter(want, 1)-want) {
			t.Fatalf("Exp64(%v) = %v, want %v", x, got, want)
		}
	}
	if Exp64(0) != 1 || Exp64(-709) != 0 || Exp64(math.Inf(-1)) != 0 || !math.IsNaN(Exp64(math.NaN())) || !math.IsInf(Exp64(710), 1) {
		t.Fatal("Exp64 special values")
	}
}

// TestSum64 checks the canonical sum's order on values whose rounding
// depends on it, and its agreement with the exact sum of small integers.
func TestSum64(t *testing.T) {
	x := make([]float64, 100)
	var want float64
	for i := range x {
		x[i] = float64(i)
		want += x[i]
	}
	if got := Sum64(x); got != want {
		t.Fatalf("Sum64 = %v, want %v", got, want)
	}
	// Lane 0 holds 1e16 and lane 1 holds 1: the butterfly adds them once.
	y := []float64{1e16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	if got := Sum64(y); got != 1e16+2 {
		t.Fatalf("Sum64 = %v, want %v", got, 1e16+2)
	}
	if Sum64(nil) != 0 {
		t.Fatal("Sum64(nil) != 0")
	}
}

// TestAddBlockSoftmax compares the blockwise canonical softmax with a
// direct float64 one.
func TestAddBlockSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		n, per := 1+r.IntN(300), 1+r.IntN(20)
		l := make([]float64, n)
		for j := range l {
			l[j] = 10 * r.NormFloat64()
		}
		nb := (n + per - 1) / per
		got := make([]float64, nb)
		AddBlockSoftmax(got, l, per, make([]float64, nb), make([]float64, nb))
		m := math.Inf(-1)
		for _, v := range l {
			m = max(m, v)
		}
		var sum float64
		for _, v := range l {
			sum += math.Exp(v - m)
		}
		want := make([]float64, nb)
		for j, v := range l {
			want[j/per] += math.Exp(v-m) / sum
		}
		for kb := range nb {
			if math.Abs(got[kb]-want[kb]) > 1e-13 {
				t.Fatalf("n %d per %d block %d: %v, want %v", n, per, kb, got[kb], want[kb])
			}
		}
	}
}

// TestDot64x4 checks that Dot64x4 gives Dot64's bits.
func TestDot64x4(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		n := r.IntN(300)
		v := make([][]float32, 5)
		for i := range v {
			v[i] = make([]float32, n)
			for j := range v[i] {
				v[i][j] = float32(r.NormFloat64())
			}
		}
		s0, s1, s2, s3 := Dot64x4(v[0], v[1], v[2], v[3], v[4])
		if s0 != Dot64(v[0], v[1]) || s1 != Dot64(v[0], v[2]) || s2 != Dot64(v[0], v[3]) || s3 != Dot64(v[0], v[4]) {
			t.Fatal("Dot64x4 differs from Dot64")
		}
	}
}
