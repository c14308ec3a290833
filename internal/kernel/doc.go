// Package kernel holds the vectorized float32 inner loops of the
// FlashAttention-style CPU kernel: a small dense matrix multiply for the
// Q·Kᵀ and P·V tiles, a fused exp(x-shift)-and-sum for the online softmax,
// and a few BLAS-1 helpers (Max, Scale, Dot, Axpy).
//
// # Design
//
// Every exported function has up to three implementations:
//
//   - a portable pure-Go version (the unexported *Generic functions in
//     generic.go), used on every architecture other than amd64 and on amd64
//     CPUs without AVX2 and FMA;
//   - an amd64 assembly version (kernel_amd64.s) that uses 256-bit AVX2
//     registers and fused multiply-add;
//   - an amd64 assembly version (kernel_avx512_amd64.s) that uses 512-bit
//     AVX-512F registers and opmask registers, for CPUs that also have
//     AVX2 and FMA. It needs AVX512F only (no DQ, BW or VL instructions).
//
// The choice is made once, at package initialization, from
// golang.org/x/sys/cpu and stored in unexported read-only values; the
// exported functions test them and call one implementation directly (the
// *AVX512, *AVX2 and *Generic functions, which the tests also call side
// by side). Accelerated reports which one is in use. No function keeps
// state between calls, so all of them are safe for concurrent use, and
// none allocates.
//
// MatMul is organized around register-blocked micro-kernels. No operand is
// packed or copied: the kernels read A, B and C in place through their
// strides, which suits the attention tiles (at most a few hundred rows and
// columns that already sit in L1 or L2).
//
// The AVX2 code cuts C into strips of 16 columns (then one strip of 8 and
// a masked strip of 1 to 7 columns for the ragged edge), and each strip
// into panels of at most 6 rows. A micro-kernel keeps its whole 6×16 block
// of C in 12 YMM accumulators while it walks the shared dimension: per step
// it loads two 8-wide vectors of a B row, broadcasts one element of each of
// the 6 A rows and issues 12 FMAs. The column strip is the outer loop, so
// the k×16 slice of B that all row panels of a strip read stays in L1.
//
// The AVX-512 code uses 8×32 micro-kernels: 16 ZMM accumulators, two
// 16-wide B vectors and 8 broadcasts per step, 16 FMAs against 10 loads,
// which keeps both FMA units of a core busy. The ragged edge goes to 8×16
// kernels whose loads and stores of B and C are masked by an opmask
// register. B is cut into column blocks that fit in L1 (k·nb·4 ≤ 32 KiB,
// the whole of B for the usual tiles); for each block the row panels are
// the outer loop and the 32-column strips the inner one, so that both the
// B block and the current 8×k panel of A are read from L1.
//
// In both, panels of fewer rows and narrower strips run the same loop with
// fewer accumulators; where that would leave too few independent FMA chains
// to hide the FMA latency, the k loop is split over two accumulator sets
// (even and odd k) that are added at the end.
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
// The AVX-512 ExpShift performs the same operations as the AVX2 one on 16
// lanes instead of 8, so the two give bit-identical results (the tests
// check every float32 argument when KERNEL_EXHAUSTIVE is set).
//
// OnlineSoftmax takes a tile's online-softmax step in one call: for each
// row the new maximum, α, the exp and sum of the row (ExpShift's results
// bit for bit; the AVX-512 code scales by VSCALEFPS under a zero mask and
// runs four 16-lane streams), the normalizer and the rescaling of the
// output row, instead of three Go-level calls per row. Prefetch issues
// PREFETCHT1 over a matrix window, for the next KV block.
//
// DotRows and MulAddRows serve decode, where a tile has a few query rows
// and each key and value row is read from memory once: DotRows takes four
// keys at a time, one after the other in ascending addresses, against one
// or four query rows, and reduces the four keys' accumulators together;
// MulAddRows streams the value rows in order into one or two rows of
// output held in registers. FirstNonFinite32 and FirstNonFinite16 test the
// exponent bits of 128 bytes per step with AVX2 (AVX-512 machines run it
// too: it is memory-bound).
//
// Transpose packs keys for the GEMM path (Kᵀ blocks): 16×16 tiles through
// four shuffle stages in registers with AVX-512, eight rows at a time in Go
// elsewhere (AVX2 machines included).
//
// GODEBUG settings read by golang.org/x/sys/cpu select the code on amd64,
// for testing: cpu.avx2=off (or cpu.fma=off) forces the portable code,
// whatever the AVX-512 support, and cpu.avx512f=off the AVX2 code.
package kernel
