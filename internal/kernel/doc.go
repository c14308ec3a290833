// Package kernel holds the vectorized float32 inner loops of the
// FlashAttention-style CPU kernel: a small dense matrix multiply for the
// Q·Kᵀ and P·V tiles, a fused exp(x-shift)-and-sum for the online softmax,
// and a few BLAS-1 helpers (Max, Scale, Dot, Axpy).
//
// # Design
//
// Every exported function has two implementations:
//
//   - a portable pure-Go version (the unexported *Generic functions in
//     generic.go), used on every architecture other than amd64 and on amd64
//     CPUs without AVX2 and FMA;
//   - an amd64 assembly version (kernel_amd64.s) that uses 256-bit AVX2
//     registers and fused multiply-add.
//
// The choice is made once, at package initialization, from
// golang.org/x/sys/cpu and stored in an unexported read-only value; the
// exported functions test it and call one implementation or the other.
// Accelerated reports which one is in use. No function keeps state between
// calls, so all of them are safe for concurrent use, and none allocates.
//
// MatMul is organized around register-blocked micro-kernels. C is cut into
// strips of 16 columns (then one strip of 8 and a masked strip of 1 to 7
// columns for the ragged edge), and each strip into panels of at most 6
// rows. A micro-kernel keeps its whole 6×16 block of C in 12 YMM
// accumulators while it walks the shared dimension: per step it loads two
// 8-wide vectors of a B row, broadcasts one element of each of the 6 A
// rows and issues 12 FMAs. The column strip is the outer loop, so the
// k×16 slice of B that all row panels of a strip read stays in L1.
// Panels of fewer than 6 rows and narrower strips run the same loop with
// fewer accumulators; where that would leave too few independent FMA chains
// to hide the FMA latency, the k loop is split over two accumulator sets
// (even and odd k) that are added at the end. No operand is packed or
// copied: the kernels read A, B and C in place through their strides,
// which suits the attention tiles (at most a few hundred rows and columns
// that already sit in L1 or L2).
//
// ExpShift evaluates exp with the classic range reduction
// x = n·ln2 + r, n = floor(x·log2 e), 0 ≤ r < ln2, a degree-6 polynomial
// for e^r whose coefficients were fitted for minimal relative error on
// [0, ln2], and 2^n built directly in the exponent field. Using floor
// instead of round-to-nearest keeps n in [-126, 127] for every normal
// result, so 2^n never has to be split in two; clamping x to [-88, 89]
// makes n = -127 (exponent field 0, i.e. 2^n = +0) for results below the
// normal range and n = 128 (+Inf) for overflow, so no compare-and-blend is
// needed for -Inf, underflow or overflow.
//
// Setting GODEBUG=cpu.avx2=off (read by golang.org/x/sys/cpu) forces the
// portable code on amd64, for testing.
package kernel
