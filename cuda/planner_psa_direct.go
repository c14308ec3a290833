package cuda

import (
	"math"

	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/tensor"
)

// psaDirect reports whether psa_score reads the estimator rows of sh
// straight from q and k (PSA_DIRECT), so that psa_gather need not run:
// Sampling's rows are then byte copies of input rows, which holds for
// bf16 inputs (no split) whose rows fill the padded width (D a multiple
// of 64, W = Wp: no zero padding to write), and it takes 16-byte aligned
// rows for cp.async (psaDirectRows). Antidiagonal (rows of Stride tokens,
// which psa_partial reads from s.kh), split inputs and other layouts keep
// the gathered rows.
func psaDirect(sh psaShape, q, k view) bool {
	return sh.s.Estimator == psa.Sampling && !sh.split && sh.w == sh.wp && psaDirectRows(q) && psaDirectRows(k)
}

// psaDirectRows reports whether every row of v is a bf16 row psa_score can
// copy 16 bytes at a time: the pointer 16-byte aligned, every stride a
// multiple of 8 elements, a token's stride in bytes within an int32, and
// the last token's offset in bytes, (n − 1)·2·sn, within a uint32
// (psa_score multiplies a key token by the stride in 32 bits).
func psaDirectRows(v view) bool {
	aligned := func(s int64) bool { return s%8 == 0 }
	return v.dtype == dtypeCode(tensor.BFloat16) && v.ptr != 0 && v.ptr%16 == 0 && aligned(v.sb) && aligned(v.sh) && aligned(v.sn) &&
		v.sb >= 0 && v.sh >= 0 && v.sn >= 0 && 2*v.sn <= math.MaxInt32 && int64(max(v.n, 1)-1)*2*v.sn <= math.MaxUint32
}
