package cuda

import (
	"github.com/sparseattn/sparseattn/cuda/driver"
)

// wsMaps are the tensor maps of Q, K and V for the warp-specialized
// kernel, and per map 1 when the token dimension is its dimension 1 (BHND
// storage), 0 when the head dimension is (BNHD); then the output's map
// and 1 when the kernel stores the output through it.
type wsMaps struct {
	q, k, v driver.TensorMap
	tok1    [3]int32
	o       driver.TensorMap
	tmaOut  int32
}

// wsParams mirrors struct WSParams in kernels/attention_ws.cu: the four
// tensor maps (128 bytes each, at 64-byte-aligned offsets 0 to 384), the
// common parameters, the token-dimension flags and the output-map flag.
// The C struct is padded to a multiple of 64 bytes; the tail here covers
// it, so the driver never reads past this value.
type wsParams struct {
	q, k, v, o driver.TensorMap
	p          kernelParams
	tok1       [3]int32
	tmaOut     int32
	_          [24]byte
}

func (wp *wsParams) set(m *wsMaps, p *kernelParams) {
	wp.q, wp.k, wp.v, wp.o, wp.tok1, wp.tmaOut, wp.p = m.q, m.k, m.v, m.o, m.tok1, m.tmaOut, *p
}

// rowsAlike reports whether every row of a plan with these row starts
// lists the same number of KV blocks.
func rowsAlike(rowStart []int) bool {
	for i := 2; i < len(rowStart); i++ {
		if rowStart[i]-rowStart[i-1] != rowStart[1]-rowStart[0] {
			return false
		}
	}
	return true
}

// encodeMaps encodes the tensor maps of the job's staged Q, K and V, which
// upload has placed on the device: boxes of 64 columns by 128 query rows
// (Q) or one tile of keys (K, V), in the 128-byte swizzle the kernel's
// wgmma descriptors read. Rows past the tensor's end read as zeros.
func encodeMaps(c *driver.Ctx, j *job) (*wsMaps, error) {
	g := j.p.Geometry
	m := &wsMaps{}
	for i, t := range []struct {
		s    *staged
		addr uint64
		n, h int
		box  int
		dst  *driver.TensorMap
	}{
		{&j.q, j.params.q, g.Nq, g.Hq, 128, &m.q},
		{&j.k, j.params.k, g.Nk, g.Hkv, j.v.kt, &m.k},
		{&j.vv, j.params.v, g.Nk, g.Hkv, j.v.kt, &m.v},
	} {
		tm := driver.TiledMap{Addr: driver.Ptr(t.addr)}
		cols, b := uint64(j.v.headDim), uint64(g.B)
		if t.s.sn <= t.s.sh {
			// Tokens vary faster than heads (BHND).
			tm.Dims = []uint64{cols, uint64(t.n), uint64(t.h), b}
			tm.Strides = []uint64{uint64(t.s.sn) * 2, uint64(t.s.sh) * 2, uint64(t.s.sb) * 2}
			tm.Box = []uint32{64, uint32(t.box), 1, 1}
			m.tok1[i] = 1
		} else {
			tm.Dims = []uint64{cols, uint64(t.h), uint64(t.n), b}
			tm.Strides = []uint64{uint64(t.s.sh) * 2, uint64(t.s.sn) * 2, uint64(t.s.sb) * 2}
			tm.Box = []uint32{64, 1, uint32(t.box), 1}
		}
		var err error
		if *t.dst, err = c.EncodeTiled(tm); err != nil {
			return nil, err
		}
	}
	// The output, [B, Hq, Nq, Dv] at the parameters' strides, is stored
	// through a map in boxes of 128 bytes by 64 query rows (one consumer
	// warpgroup's), where its address and strides are whole 16-byte
	// units; otherwise the kernel stores it from registers.
	eb := j.v.outBytes()
	pr := j.params
	aligned := pr.o%16 == 0 && int64(g.Dv)*eb%16 == 0
	for _, s := range []int64{pr.osn, pr.osh, pr.osb} {
		aligned = aligned && s*eb%16 == 0
	}
	if j.v.tmaOut && aligned {
		tm := driver.TiledMap{
			Addr: driver.Ptr(pr.o), ElemBytes: int(eb),
			Dims:    []uint64{uint64(g.Dv), uint64(g.Nq), uint64(g.Hq), uint64(g.B)},
			Strides: []uint64{uint64(pr.osn * eb), uint64(pr.osh * eb), uint64(pr.osb * eb)},
			Box:     []uint32{uint32(128 / eb), 64, 1, 1},
		}
		var err error
		if m.o, err = c.EncodeTiled(tm); err != nil {
			return nil, err
		}
		m.tmaOut = 1
	}
	return m, nil
}
