package tensorfile

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/tensor"
)

// elem returns element i of a as float32, the way tensor.At converts it.
func elem(a *Array, i int) float32 {
	switch a.DType {
	case tensor.Float16:
		return tensor.F16ToFloat32(a.U16[i])
	case tensor.BFloat16:
		return tensor.BF16ToFloat32(a.U16[i])
	}
	return a.F32[i]
}

func TestArrayTensor(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const B, H, N, D = 2, 3, 5, 4
	tests := []struct {
		shape  []int
		layout tensor.Layout
		want   tensor.Shape
		index  func(b, h, n, d int) int // position of [b,h,n,d] in the array
	}{
		{[]int{B, H, N, D}, tensor.BHND, tensor.Shape{B: B, H: H, N: N, D: D},
			func(b, h, n, d int) int { return ((b*H+h)*N+n)*D + d }},
		{[]int{B, N, H, D}, tensor.BNHD, tensor.Shape{B: B, H: H, N: N, D: D},
			func(b, h, n, d int) int { return ((b*N+n)*H+h)*D + d }},
		{[]int{H, N, D}, tensor.BHND, tensor.Shape{B: 1, H: H, N: N, D: D},
			func(_, h, n, d int) int { return (h*N+n)*D + d }},
		{[]int{N, H, D}, tensor.BNHD, tensor.Shape{B: 1, H: H, N: N, D: D},
			func(_, h, n, d int) int { return (n*H+h)*D + d }},
		{[]int{N, D}, tensor.BHND, tensor.Shape{B: 1, H: 1, N: N, D: D},
			func(_, _, n, d int) int { return n*D + d }},
		{[]int{N, D}, tensor.BNHD, tensor.Shape{B: 1, H: 1, N: N, D: D},
			func(_, _, n, d int) int { return n*D + d }},
	}
	for _, tc := range tests {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%v/%v/%v", tc.shape, tc.layout, dt), func(t *testing.T) {
				a := randomArray(rng, dt, tc.shape...)
				x, err := a.Tensor(tc.layout)
				if err != nil {
					t.Fatal(err)
				}
				if x.Shape() != tc.want || x.Layout() != tc.layout || x.DType() != dt {
					t.Fatalf("got %v %v %v, want %v %v %v", x.Shape(), x.Layout(), x.DType(), tc.want, tc.layout, dt)
				}
				s := x.Shape()
				for b := range s.B {
					for h := range s.H {
						for n := range s.N {
							for d := range s.D {
								got, want := x.At(b, h, n, d), elem(a, tc.index(b, h, n, d))
								if math.Float32bits(got) != math.Float32bits(want) {
									t.Fatalf("At(%d,%d,%d,%d) = %v, want %v", b, h, n, d, got, want)
								}
							}
						}
					}
				}
				// Memory is shared.
				x.Set(s.B-1, s.H-1, s.N-1, 1, 0.5)
				if elem(a, tc.index(s.B-1, s.H-1, s.N-1, 1)) != 0.5 {
					t.Fatal("Tensor copied the array instead of sharing it")
				}
				// FromTensor gives the array back in the tensor's memory order
				// (4-D, even for 3-D and 2-D inputs).
				back := FromTensor(x)
				if back.Len() != a.Len() || len(back.Shape) != 4 || back.DType != dt {
					t.Fatalf("FromTensor gave %v %v", back.DType, back.Shape)
				}
				if dt == tensor.Float32 && &back.F32[0] != &a.F32[0] || dt != tensor.Float32 && &back.U16[0] != &a.U16[0] {
					t.Fatal("FromTensor copied the data")
				}
			})
		}
	}
}

func TestArrayTensorRejects(t *testing.T) {
	for _, shape := range [][]int{{}, {8}, {1, 2, 3, 4, 5}, {0, 4}, {2, 0, 3, 4}} {
		a := (&Array{DType: tensor.Float32, Shape: shape}).fill()
		_, err := a.Tensor(tensor.BHND)
		if !errors.Is(err, tensor.ErrShape) {
			t.Errorf("shape %v: got %v, want tensor.ErrShape", shape, err)
		}
		if len(shape) < 2 || len(shape) > 4 {
			if !strings.Contains(fmt.Sprint(err), "[B,H,N,D], [H,N,D] or [N,D]") {
				t.Errorf("shape %v: error %q does not list the accepted shapes", shape, err)
			}
		}
	}
	a := &Array{DType: tensor.Float32, Shape: []int{2, 2}, F32: make([]float32, 3)}
	if _, err := a.Tensor(tensor.BHND); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("short data: got %v", err)
	}
	a = &Array{DType: 0, Shape: []int{2, 2}}
	if _, err := a.Tensor(tensor.BHND); !errors.Is(err, tensor.ErrDType) {
		t.Errorf("bad dtype: got %v", err)
	}
	a = (&Array{DType: tensor.Float32, Shape: []int{2, 2}}).fill()
	if _, err := a.Tensor(tensor.Layout(9)); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("bad layout: got %v", err)
	}
	if _, err := a.Tensor(tensor.BNHD); err != nil {
		t.Error(err)
	}
}

func TestFromTensorBNHD(t *testing.T) {
	x, err := tensor.New(tensor.Float16, tensor.BNHD, tensor.Shape{B: 2, H: 3, N: 4, D: 5})
	if err != nil {
		t.Fatal(err)
	}
	for b := range 2 {
		for h := range 3 {
			for n := range 4 {
				for d := range 5 {
					x.Set(b, h, n, d, float32(1000*b+100*h+10*n+d))
				}
			}
		}
	}
	a := FromTensor(x)
	if fmt.Sprint(a.Shape) != "[2 4 3 5]" {
		t.Fatalf("BNHD tensor gave shape %v, want [B N H D] = [2 4 3 5]", a.Shape)
	}
	// Element [b, n, h, d] of the array, in C order.
	if got := elem(a, ((1*4+3)*3+2)*5+4); got != 1234 {
		t.Fatalf("array[1,3,2,4] = %v, want 1234", got)
	}
	y, err := a.Tensor(tensor.BNHD)
	if err != nil {
		t.Fatal(err)
	}
	if y.Shape() != x.Shape() || y.At(1, 2, 3, 4) != 1234 {
		t.Fatalf("round trip gave %v with At = %v", y.Shape(), y.At(1, 2, 3, 4))
	}
}

func TestPick(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	arrays := map[string]*Array{
		"q":    randomArray(rng, tensor.Float16, 1, 7, 4, 8),
		"k":    randomArray(rng, tensor.Float16, 1, 7, 2, 8),
		"v":    randomArray(rng, tensor.Float32, 7, 2, 8),
		"bias": randomArray(rng, tensor.Float32, 8),
	}
	ts, err := Pick(arrays, tensor.BNHD, "q", "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	want := []tensor.Shape{{B: 1, H: 4, N: 7, D: 8}, {B: 1, H: 2, N: 7, D: 8}, {B: 1, H: 2, N: 7, D: 8}}
	for i, x := range ts {
		if x.Shape() != want[i] || x.Layout() != tensor.BNHD {
			t.Fatalf("tensor %d: %v %v, want %v BNHD", i, x.Shape(), x.Layout(), want[i])
		}
	}
	// q [B=0, N=6, H=3, D=7] in the file is At(0, 3, 6, 7).
	if got, want := ts[0].At(0, 3, 6, 7), elem(arrays["q"], ((0*7+6)*4+3)*8+7); math.Float32bits(got) != math.Float32bits(want) {
		t.Fatalf("q.At(0,3,6,7) = %v, want %v", got, want)
	}
	if _, err := tensor.Validate(ts[0], ts[1], ts[2]); err != nil {
		t.Fatal(err)
	}

	_, err = Pick(arrays, tensor.BHND, "q", "query")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing name: got %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), `"bias", "k", "q", "v"`) {
		t.Fatalf("error %q does not list the names present", err)
	}
	_, err = Pick(arrays, tensor.BHND, "bias")
	if !errors.Is(err, tensor.ErrShape) || !strings.Contains(err.Error(), `"bias"`) {
		t.Fatalf("1-D array: got %v, want tensor.ErrShape naming the array", err)
	}
	many := map[string]*Array{}
	for i := range 100 {
		many[fmt.Sprintf("t%03d", i)] = nil
	}
	if _, err := Pick(many, tensor.BHND, "q"); !strings.Contains(fmt.Sprint(err), "and 68 more") {
		t.Fatalf("long list not shortened: %v", err)
	}
}

func TestLen(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		want  int
	}{
		{nil, 1}, {[]int{3, 4}, 12}, {[]int{0, 5}, 0}, {[]int{-1}, -1},
		{[]int{1 << 21, 1 << 20}, -1}, {[]int{0, 1 << 30, 1 << 30}, -1}, {make([]int, MaxDims+1), -1},
	} {
		if got := (&Array{Shape: tc.shape}).Len(); got != tc.want {
			t.Errorf("Len(%v) = %d, want %d", tc.shape, got, tc.want)
		}
	}
}
