package kernel

// BlockMaxShift takes l in consecutive blocks of per values (len(l) a
// multiple of per, per ≥ 1): mb[kb] receives the largest value of block kb
// and x[j] = l[j] − mb[j/per], each difference rounded to float64 as a
// scalar subtraction is. It serves plan.AddBlockSoftmax's canonical
// softmax (package method/internal/blocksoftmax): for blocks without NaN
// the maximum is the one value a comparison loop finds, save the sign of
// a zero maximum; on a block holding NaN, mb and x are unspecified but
// NaN reaches x (callers detect it there and take the scalar path).
// Blocks of a multiple of 8 values run in AVX-512 where the CPU has it.
//
// It panics only on programmer error: per < 1, len(l) not a multiple of
// per, x or mb too short.
func BlockMaxShift(x, l []float64, per int, mb []float64) {
	if per < 1 || len(l)%per != 0 || len(x) < len(l) || len(mb) < len(l)/per {
		panic("kernel: BlockMaxShift: bad sizes")
	}
	if len(l) == 0 {
		return
	}
	blockMaxShift(x[:len(l)], l, per, mb[:len(l)/per])
}

// blockMaxShiftGeneric is BlockMaxShift in Go; max propagates NaN.
func blockMaxShiftGeneric(x, l []float64, per int, mb []float64) {
	for kb := range mb {
		blk := l[kb*per : (kb+1)*per]
		bm := blk[0]
		for _, v := range blk[1:] {
			bm = max(bm, v)
		}
		mb[kb] = bm
		xb := x[kb*per : (kb+1)*per]
		for j, v := range blk {
			xb[j] = v - bm
		}
	}
}
