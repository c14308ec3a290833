package tensor

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestBF16Conversion(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above tie
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // max float rounds to Inf
	} {
		if got := Float32ToBF16(tc.in); got != tc.want {
			t.Errorf("Float32ToBF16(%v) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
	if nan := Float32ToBF16(float32(math.NaN())); !math.IsNaN(float64(BF16ToFloat32(nan))) {
		t.Errorf("NaN became %#x", nan)
	}
	// Every bfloat16 value widens and narrows back to itself.
	for b := range 1 << 16 {
		x := BF16ToFloat32(uint16(b))
		if math.IsNaN(float64(x)) {
			continue
		}
		if got := Float32ToBF16(x); got != uint16(b) {
			t.Fatalf("bf16 %#x round-tripped to %#x", b, got)
		}
	}
}

func TestF16Conversion(t *testing.T) {
	for b := range 1 << 16 {
		x := F16ToFloat32(uint16(b))
		if math.IsNaN(float64(x)) {
			continue
		}
		if got := Float32ToF16(x); got != uint16(b) {
			t.Fatalf("f16 %#x round-tripped to %#x", b, got)
		}
	}
	if got := F16ToFloat32(Float32ToF16(1.0009766)); got != 1.0009766 { // 1 + 2^-10 is representable
		t.Errorf("1+2^-10 became %v", got)
	}
}

func TestLayoutsAndDTypes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := Shape{B: 2, H: 3, N: 5, D: 7}
	want := make([]float32, s.Len()) // logical BHND order
	for i := range want {
		want[i] = float32(r.NormFloat64())
	}
	src, err := FromFloat32(BHND, s, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []DType{Float32, Float16, BFloat16} {
		for _, l := range []Layout{BHND, BNHD} {
			c, err := src.Convert(dt, l)
			if err != nil {
				t.Fatal(err)
			}
			back, _ := c.Convert(Float32, BHND)
			row := make([]float32, s.D)
			for b := range s.B {
				for h := range s.H {
					for n := range s.N {
						c.ReadRow(b, h, n, row)
						for d := range s.D {
							x := want[((b*s.H+h)*s.N+n)*s.D+d]
							tol := map[DType]float64{Float32: 0, Float16: 1.0 / 2048, BFloat16: 1.0 / 256}[dt]
							if got := row[d]; math.Abs(float64(got-x)) > tol*math.Abs(float64(x))+1e-7 {
								t.Fatalf("%v %v [%d %d %d %d] = %v, want %v", dt, l, b, h, n, d, got, x)
							}
							if c.At(b, h, n, d) != row[d] || back.At(b, h, n, d) != row[d] {
								t.Fatalf("%v %v: At, ReadRow and Convert disagree", dt, l)
							}
						}
					}
				}
			}
		}
	}
	// BNHD memory order: token-major.
	c, _ := src.Convert(Float32, BNHD)
	if got, want := c.RowOffset(1, 2, 3), ((1*5+3)*3+2)*7; got != want {
		t.Errorf("BNHD offset %d, want %d", got, want)
	}
}

func TestConstructorsReject(t *testing.T) {
	good := Shape{B: 1, H: 2, N: 3, D: 4}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"zero-axis", func() error { _, err := New(Float32, BHND, Shape{B: 1, H: 0, N: 3, D: 4}); return err }(), ErrShape},
		{"huge", func() error { _, err := New(Float32, BHND, Shape{B: 1 << 20, H: 1 << 20, N: 2, D: 2}); return err }(), ErrShape},
		{"bad-dtype", func() error { _, err := New(DType(9), BHND, good); return err }(), ErrDType},
		{"bad-layout", func() error { _, err := New(Float32, Layout(5), good); return err }(), ErrShape},
		{"short-data", func() error { _, err := FromFloat32(BHND, good, make([]float32, 5)); return err }(), ErrShape},
		{"bits-f32", func() error { _, err := FromBits16(Float32, BHND, good, make([]uint16, 24)); return err }(), ErrDType},
		{"bits-short", func() error { _, err := FromBits16(BFloat16, BHND, good, make([]uint16, 2)); return err }(), ErrShape},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

func TestValidateGeometry(t *testing.T) {
	mk := func(b, h, n, d int) *Tensor {
		x, err := New(Float32, BHND, Shape{B: b, H: h, N: n, D: d})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	g, err := Validate(mk(2, 8, 1, 64), mk(2, 2, 100, 64), mk(2, 2, 100, 32))
	if err != nil {
		t.Fatal(err)
	}
	if g.Group() != 4 || g.KVHead(5) != 1 || g.QueryOffset() != 99 || g.Dv != 32 {
		t.Errorf("geometry %+v: group %d, kv head of 5 = %d, offset %d", g, g.Group(), g.KVHead(5), g.QueryOffset())
	}
	for _, tc := range []struct {
		name    string
		q, k, v *Tensor
	}{
		{"batch", mk(1, 2, 4, 8), mk(2, 2, 4, 8), mk(2, 2, 4, 8)},
		{"dim", mk(1, 2, 4, 8), mk(1, 2, 4, 16), mk(1, 2, 4, 8)},
		{"kv-heads", mk(1, 2, 4, 8), mk(1, 2, 4, 8), mk(1, 1, 4, 8)},
		{"kv-tokens", mk(1, 2, 4, 8), mk(1, 2, 4, 8), mk(1, 2, 5, 8)},
		{"gqa", mk(1, 3, 4, 8), mk(1, 2, 4, 8), mk(1, 2, 4, 8)},
		{"head-dim", mk(1, 1, 1, MaxHeadDim+1), mk(1, 1, 1, MaxHeadDim+1), mk(1, 1, 1, 8)},
		{"nil", nil, mk(1, 2, 4, 8), mk(1, 2, 4, 8)},
	} {
		if _, err := Validate(tc.q, tc.k, tc.v); !errors.Is(err, ErrShape) {
			t.Errorf("%s: %v, want ErrShape", tc.name, err)
		}
	}
	if _, err := Validate(&Tensor{}, mk(1, 2, 4, 8), mk(1, 2, 4, 8)); !errors.Is(err, ErrDType) {
		t.Errorf("zero-value tensor: %v, want ErrDType", err)
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]DType{"f32": Float32, "float16": Float16, "bf16": BFloat16} {
		if got, err := ParseDType(s); err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseDType("int8"); !errors.Is(err, ErrDType) {
		t.Errorf("int8: %v", err)
	}
	if l, err := ParseLayout("Bnhd"); err != nil || l != BNHD {
		t.Errorf("nhd: %v %v", l, err)
	}
	if _, err := ParseLayout("x"); !errors.Is(err, ErrShape) {
		t.Errorf("x: %v", err)
	}
}
