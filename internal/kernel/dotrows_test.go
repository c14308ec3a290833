package kernel

import (
	"fmt"
	"math"
	"testing"
)

// TestDotRows compares DotRows with float64 dot products over row counts
// around the 4-row kernel, key counts around its 4-key groups, head dims
// that are and are not multiples of 16, and strides wider than the rows.
func TestDotRows(t *testing.T) {
	r := newRand(t)
	for _, im := range []struct {
		name string
		f    func(m, n, d int, q []float32, ldq int, k []float32, ldk int, s []float32, lds int)
	}{{"generic", dotRowsGeneric}, {"dispatch", DotRows}} {
		for _, m := range []int{1, 2, 3, 4, 5, 8, 9} {
			for _, n := range []int{1, 3, 4, 7, 64, 66} {
				for _, d := range []int{16, 48, 64, 128, 33, 200} {
					ldq, ldk, lds := d+3, d+16*(n%2), n+5
					q := make([]float32, m*ldq)
					k := make([]float32, n*ldk)
					s := make([]float32, m*lds)
					for i := range q {
						q[i] = float32(r.NormFloat64())
					}
					for i := range k {
						k[i] = float32(r.NormFloat64())
					}
					for i := range s {
						s[i] = float32(math.NaN()) // must be overwritten inside the window, left alone outside
					}
					im.f(m, n, d, q, ldq, k, ldk, s, lds)
					name := fmt.Sprintf("%s m=%d n=%d d=%d", im.name, m, n, d)
					for i := range m {
						for j := range lds {
							got := s[i*lds+j]
							if j >= n {
								if got == got {
									t.Fatalf("%s: wrote s[%d][%d] outside the window", name, i, j)
								}
								continue
							}
							var want, mag float64
							for x := range d {
								p := float64(q[i*ldq+x]) * float64(k[j*ldk+x])
								want += p
								mag += math.Abs(p)
							}
							if e := math.Abs(float64(got) - want); !(e <= float64(d+1)*u32*mag) {
								t.Fatalf("%s: s[%d][%d] = %v, want %v (error %.3g, bound %.3g)", name, i, j, got, want, e, float64(d+1)*u32*mag)
							}
						}
					}
				}
			}
		}
	}
}

// TestMulAddRows compares MulAddRows with float64 sums over row counts
// around the 4-, 2- and 1-row kernels, value widths of 64 and 128 (the
// AVX-512 kernels) and others (MatMul), and strides wider than the rows;
// elements outside the window must be left alone.
func TestMulAddRows(t *testing.T) {
	r := newRand(t)
	for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9} {
		for _, n := range []int{1, 3, 64, 66} {
			for _, dv := range []int{64, 128, 33, 96} {
				ldp, ldv, ldacc := n+3, dv+16*(n%2), dv+5
				p := make([]float32, m*ldp)
				v := make([]float32, n*ldv)
				acc := make([]float32, m*ldacc)
				for _, x := range [][]float32{p, v} {
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
				}
				for i := range acc {
					acc[i] = float32(math.NaN()) // outside the window: must stay NaN
				}
				old := make([]float32, len(acc))
				for i := range m {
					for c := range dv {
						acc[i*ldacc+c] = float32(r.NormFloat64())
					}
				}
				copy(old, acc)
				MulAddRows(m, n, dv, p, ldp, v, ldv, acc, ldacc)
				name := fmt.Sprintf("m=%d n=%d dv=%d", m, n, dv)
				for i := range m {
					for c := range ldacc {
						got := acc[i*ldacc+c]
						if c >= dv {
							if got == got {
								t.Fatalf("%s: wrote acc[%d][%d] outside the window", name, i, c)
							}
							continue
						}
						want, mag := float64(old[i*ldacc+c]), math.Abs(float64(old[i*ldacc+c]))
						for j := range n {
							x := float64(p[i*ldp+j]) * float64(v[j*ldv+c])
							want += x
							mag += math.Abs(x)
						}
						if e := math.Abs(float64(got) - want); !(e <= float64(n+1)*u32*mag) {
							t.Fatalf("%s: acc[%d][%d] = %v, want %v (error %.3g, bound %.3g)", name, i, c, got, want, e, float64(n+1)*u32*mag)
						}
					}
				}
			}
		}
	}
}
