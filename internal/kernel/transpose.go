package kernel

// Transpose writes the transpose of the rows×cols matrix src (row-major,
// row stride lds) to dst, a cols×rows matrix with row stride ldd:
// dst[c·ldd + r] = src[r·lds + c]. Only that window of dst is written. The
// copy is exact. src and dst must not overlap.
//
// The executor packs keys with it for the GEMM path (Kᵀ blocks). On
// AVX-512 it moves 16×16 tiles through registers, a 64-byte load per
// source line and a 64-byte store per destination line, where scalar code
// makes 16 loads and 16 stores of each.
//
// It panics only on programmer error: negative dimensions, lds < cols,
// ldd < rows, or slices too short for the strides.
func Transpose(rows, cols int, src []float32, lds int, dst []float32, ldd int) {
	if rows < 0 || cols < 0 || lds < cols || ldd < rows {
		panic("kernel: Transpose: bad sizes")
	}
	if rows == 0 || cols == 0 {
		return
	}
	if !fits(rows, cols, src, lds) || !fits(cols, rows, dst, ldd) {
		panic("kernel: Transpose: slice too short")
	}
	transpose(rows, cols, src, lds, dst, ldd)
}

// transposeGeneric is Transpose in portable Go, on the window
// [r0, rows)×[c0, cols) of src only when called for the edges of a tiled
// transpose, eight source rows at a time.
func transposeGeneric(r0, rows, c0, cols int, src []float32, lds int, dst []float32, ldd int) {
	r := r0
	for ; r+8 <= rows; r += 8 {
		s0, s1, s2, s3 := src[r*lds:][:cols], src[(r+1)*lds:][:cols], src[(r+2)*lds:][:cols], src[(r+3)*lds:][:cols]
		s4, s5, s6, s7 := src[(r+4)*lds:][:cols], src[(r+5)*lds:][:cols], src[(r+6)*lds:][:cols], src[(r+7)*lds:][:cols]
		for c := c0; c < cols; c++ {
			o := dst[c*ldd+r : c*ldd+r+8]
			o[0], o[1], o[2], o[3] = s0[c], s1[c], s2[c], s3[c]
			o[4], o[5], o[6], o[7] = s4[c], s5[c], s6[c], s7[c]
		}
	}
	for ; r < rows; r++ {
		for c, x := range src[r*lds+c0 : r*lds+cols] {
			dst[(c0+c)*ldd+r] = x
		}
	}
}
