package cuda

import (
	"errors"
	"math"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/plan"
)

// kernelParams mirrors struct Params in kernels/attention.cu.
type kernelParams struct {
	q, k, v, o, rowStart, kvBlock, counters         uint64
	qsb, qsh, qsn, ksb, ksh, ksn, vsb, vsh, vsn     int64
	osb, osh, osn                                   int64
	b, hq, hkv, nq, nk, dv, qBlocks, blockK, causal int32
	filter, rowGroup                                int32
	lambdaLog2, scaleLog2                           float32
	split                                           int32
	order                                           uint64
	headLambda                                      uint64 // float32 λ·log2(e) per query head, or 0
}

// buffers are the device allocations reused across calls; each grows to
// the largest size asked so far.
type buffers struct {
	q, k, v, o, rows, kv, counters, order deviceBuf
	lambda                                deviceBuf // per-head λ·log2(e) of the plan's filter
	flush                                 deviceBuf // Benchmark's L2 scratch
	gen                                   genBufs   // the gathering kernel's
	q8                                    q8Bufs    // RunQuantized's operands
}

type deviceBuf struct {
	ptr  driver.Ptr
	size int64
}

func (b *deviceBuf) ensure(c *driver.Ctx, n int64) error {
	if n <= b.size {
		return nil
	}
	if err := c.Free(b.ptr); err != nil {
		return err
	}
	b.ptr, b.size = 0, 0
	p, err := c.Alloc(n)
	if err != nil {
		return err
	}
	b.ptr, b.size = p, n
	return nil
}

func (bs *buffers) free(c *driver.Ctx) error {
	var errs []error
	for _, b := range []*deviceBuf{&bs.q, &bs.k, &bs.v, &bs.o, &bs.rows, &bs.kv, &bs.counters, &bs.order, &bs.lambda, &bs.flush} {
		errs = append(errs, c.Free(b.ptr))
		*b = deviceBuf{}
	}
	errs = append(errs, bs.gen.free(c), bs.q8.free(c))
	return errors.Join(errs...)
}

// upload copies the inputs and the plan to the device and points the
// kernel's parameters at them.
func (e *Engine) upload(c *driver.Ctx, j *job) error {
	g := j.p.Geometry
	bs := &e.bufs
	for _, u := range []struct {
		buf *deviceBuf
		s   *staged
		dst *uint64
	}{{&bs.q, &j.q, &j.params.q}, {&bs.k, &j.k, &j.params.k}, {&bs.v, &j.vv, &j.params.v}} {
		if err := u.buf.ensure(c, int64(len(u.s.bits))*2); err != nil {
			return err
		}
		if err := driver.CopyIn(c, u.buf.ptr, u.s.bits); err != nil {
			return err
		}
		*u.dst = uint64(u.buf.ptr)
	}
	if err := bs.o.ensure(c, int64(g.B*g.Hq*g.Nq*g.Dv)*j.v.outBytes()); err != nil {
		return err
	}
	if err := bs.counters.ensure(c, counterBytes); err != nil {
		return err
	}
	j.params.o, j.params.counters = uint64(bs.o.ptr), uint64(bs.counters.ptr)
	if j.v.ws {
		m, err := encodeMaps(c, j)
		if err != nil {
			return err
		}
		j.maps = m
	}
	return e.uploadPlan(c, j)
}

func (e *Engine) uploadPlan(c *driver.Ctx, j *job) error {
	bs := &e.bufs
	if err := bs.rows.ensure(c, int64(len(j.rows))*4); err != nil {
		return err
	}
	if err := bs.kv.ensure(c, int64(max(len(j.p.KVBlock), 1))*4); err != nil {
		return err
	}
	if err := driver.CopyIn(c, bs.rows.ptr, j.rows); err != nil {
		return err
	}
	if err := driver.CopyIn(c, bs.kv.ptr, j.p.KVBlock); err != nil {
		return err
	}
	j.params.rowStart, j.params.kvBlock = uint64(bs.rows.ptr), uint64(bs.kv.ptr)
	j.params.order = 0
	if j.order != nil {
		if err := bs.order.ensure(c, int64(len(j.order))*4); err != nil {
			return err
		}
		if err := driver.CopyIn(c, bs.order.ptr, j.order); err != nil {
			return err
		}
		j.params.order = uint64(bs.order.ptr)
	}
	j.params.headLambda = 0
	if f := j.p.Filter; f != nil && f.HeadLambda != nil {
		ptr, err := uploadHeadLambda(c, &bs.lambda, f)
		if err != nil {
			return err
		}
		j.params.headLambda = uint64(ptr)
	}
	return nil
}

// uploadHeadLambda copies f's per-head λ, times log2(e) as the kernel
// compares it, into buf.
func uploadHeadLambda(c *driver.Ctx, buf *deviceBuf, f *plan.Filter) (driver.Ptr, error) {
	l := make([]float32, len(f.HeadLambda))
	for h, x := range f.HeadLambda {
		l[h] = x * math.Log2E
	}
	if err := buf.ensure(c, int64(len(l))*4); err != nil {
		return 0, err
	}
	return buf.ptr, driver.CopyIn(c, buf.ptr, l)
}
