// The block-mass machinery shared by the UniSparse and XAttention device
// planners (plan_unisparse.cu, plan_xattn.cu): query rows against key
// columns on the tensor cores, the row softmax of those logits summed per
// KV block and per query block, and the selection of each plan row's
// blocks by a cumulative share. One pass of QKᵀ, no recomputation.
//
// A row (or column) is S consecutive tokens of D values read as one vector
// of S·D (XAttention §2.1's reshaping: rev = 1 reads query tokens
// rS+S−1, …, rS; UniSparse's composites have S = 1). Its dot products run
// as mma.sync m16n8k16 with float32 accumulation; the 16-bit operands are
// the inputs themselves (bf16 or f16), or, for float32 values (BM_SPLIT),
// their bf16 high and low halves, three products summed (the low·low
// term, about 2⁻¹⁸ relative, is dropped).
//
// A work item is up to BM_SPI segments — (query head, query block) pairs
// that read the same key set — whose rows are stacked into one 128-row
// tile. Eight warps compute 128×128 logit tiles (each warp 32 rows × 64
// columns) from key tiles staged by cp.async in BM_NST stages. Each warp
// keeps its rows' running softmax maximum and sum and writes, per chunk of
// BM_CS = gcd(per, 64) columns, the sum of exp(logit − running max) to
// global scratch, with the running max of every 64 columns. At the end the
// chunks are rescaled to the rows' final maximum and sum, summed per KV
// block and per segment into the block masses (in float64), and the
// selection runs per segment.
//
// Compile-time: BM_F16 (1: f16 operands, 0: bf16), BM_SPLIT (1: hi and lo
// operands), BM_DP (the head dim rounded up to 16), BM_BK (the k chunk, a
// divisor of BM_DP), BM_NST (pipeline stages), BM_CS (columns per chunk, a
// divisor of 64), BM_VEC (1: both operands move by cp.async, every
// 8-element piece 16-byte aligned), BM_ARGMAX (1: no selection; each row's
// heaviest KV block, the first of ties: UniSparse's outlier queries,
// method/unisparse's outlier.go), BM_QRES (1, with BM_SPLIT and query rows
// of one token: a work item's query rows stay in shared memory, every
// head dim of both halves staged with the first logit tile's chunks, so
// that the later tiles stage key columns alone), BM_WG (1, on sm_90a with
// 16-bit operands and BM_BK 64: each warpgroup's 64 rows × 128 columns by
// warpgroup MMA (wgmma) from stages in the 128-byte-swizzled layout, for
// the 32×64 warp tiles of mma.sync and their ldmatrix traffic).
//
// With BM_ARGMAX the columns of a work item are cut into m.slices slices of
// m.slicew columns (a multiple of BM_C and of m.per, so that every KV block
// lies in one slice), and CTAs take (work item, slice) units from the
// counter m.next (zero before the launch) in the order kset, slice, item:
// the units running at once read the same keys. A unit keeps its rows'
// running softmax within its slice alone; per row its heaviest block kb,
// of mass w relative to the slice's row maximum M (log2 units), goes into
// m.xkey[row] by atomicMax as bm_okey(M + log2 w, kb), an order-preserving
// u64, so that after the launch each row holds its heaviest block over all
// slices, the first of ties (and 0 for a row that sees no key; the caller
// zeroes m.xkey). bm_okey_block decodes it.

#ifndef BM_CS
#define BM_CS 1
#endif
#ifndef BM_VEC
#define BM_VEC 0
#endif
#ifndef BM_ARGMAX
#define BM_ARGMAX 0
#endif
#ifndef BM_QRES
#define BM_QRES 0
#endif
#ifndef BM_WG
#define BM_WG 0
#endif
#if BM_QRES && !BM_SPLIT
#error "BM_QRES keeps hi and lo query halves: it needs BM_SPLIT"
#endif
#if BM_WG && (BM_SPLIT || BM_BK != 64)
#error "BM_WG stages rows of 64 16-bit elements: it needs BM_BK 64 and no BM_SPLIT"
#endif
#if BM_WG
#if BM_F16
#define WG_T "f16"
#else
#define WG_T "bf16"
#endif
#include "wgmma.cuh"
#endif

#define BM_T 256  // threads
#define BM_R 128  // rows of a work item
#define BM_C 128  // columns of a logit tile
#define BM_SPI 16 // most segments per work item
#define BM_KP (BM_BK + 8) // staged row pitch in 16-bit elements: ldmatrix rows hit distinct banks
#define BM_NEG_INF __int_as_float(0xff800000)
#define BM_LOG2E 1.4426950408889634f

// bm_ex2 is 2^x for the softmax terms, x ≤ 0 (or −∞, giving 0): exp2f's
// value wherever that is a normal float; below 2⁻¹²⁶ of a row's maximum a
// term is 0 instead of subnormal.
__device__ __forceinline__ float bm_ex2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

// BmOp is one operand: 16-bit rows of S tokens (see above), strides in
// elements; vec when every 8-element piece is 16-byte aligned (BM_VEC is
// set when both are).
struct BmOp {
	const u16* hi;
	const u16* lo; // BM_SPLIT only
	long long sb, sh, sn;
	int N, S, rev, vec;
};

// BmArgs mirrors cuda.bmArgs on the Go side.
struct BmArgs {
	BmOp q, k;
	float* ework;         // per CTA: e[chunks][BM_R], then the running maxima [subs][BM_R] (of the unit's columns)
	double* mass;         // per CTA: [BM_SPI][KB]
	int* extra;           // [B][hk·hpi][rows]: Top-P keeps block extra[…] besides its own (−1: none; null: no extras)
	int chunks, subs;     // per-CTA capacity of the two scratch arrays
	int nrows, ncols;     // query rows per query set, key columns per key set
	int cq, ck, vis_last; // causal: column j is visible when j·ck ≤ the row's last (vis_last) or first token, rows of cq tokens
	int per, cs;          // columns per KV block; columns per chunk (BM_CS)
	int hk, hpi;          // key sets per batch; query sets per key set
	int ksets, ch, spi;   // key sets in all; plan heads per query set; segments per work item
	int rule;             // 0: XAttention's threshold (causal: first and diagonal block forced), 1: Top-P
	float lscale;         // logit = dot · lscale, in log2 units
	double thresh;        // the threshold or Top-P
	u64* xkey;            // BM_ARGMAX: [B][hk·hpi][rows] bm_okey of each row's heaviest block (zeroed by the caller)
	int* next;            // BM_ARGMAX: the next unit to take (zeroed by the caller)
	int slices, slicew;   // BM_ARGMAX: column slices per work item, columns per slice
};

// BM_XBITS low bits of a bm_okey hold the block index (complemented, so
// that of equal values the first block is the largest key).
#define BM_XBITS 16

// bm_okey orders (v, kb) pairs as u64s: larger v first, then smaller kb
// (kb < 2^BM_XBITS). v's float64 bits are made order-preserving (negative
// values complemented, the sign bit set on the others) and their low
// BM_XBITS bits, 2^−36 of v, dropped: so v ≥ v' gives a key ≥ the key of
// (v', kb') for any kb' > kb. No key is 0.
__device__ __forceinline__ u64 bm_okey(double v, int kb) {
	u64 x = (u64)__double_as_longlong(v);
	x = (x >> 63) ? ~x : x | (1ull << 63);
	return (x & ~((1ull << BM_XBITS) - 1ull)) | (u64)((1u << BM_XBITS) - 1u - (u32)kb);
}

// bm_okey_block is the block of key k, or −1 for k = 0 (no block).
__device__ __forceinline__ int bm_okey_block(u64 k) { return k ? (int)((1u << BM_XBITS) - 1u - (u32)(k & ((1ull << BM_XBITS) - 1ull))) : -1; }

__device__ __forceinline__ u32 bm_smem(const void* p) {
	u32 r;
	asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
	return r;
}
__device__ __forceinline__ void bm_cp16(u32 dst, const void* src, int bytes) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void bm_st16(u32 dst, u32 a, u32 b, u32 c, u32 d) {
	asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst), "r"(a), "r"(b), "r"(c), "r"(d));
}
__device__ __forceinline__ void bm_ldsm4(u32 (&r)[4], u32 addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void bm_mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
	// Not volatile: a register-only operation the compiler may schedule.
#if BM_F16
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#else
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#endif
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// bm_split writes x (any input type) as bf16 high and low halves, [B][H][N][D]
// contiguous: hi = bf16(x), lo = bf16(x − hi).
extern "C" __global__ void bm_split(View x, u16* hi, u16* lo) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	const long long n = (long long)x.B * x.H * x.N * x.D;
	if (i >= n) return;
	int d = (int)(i % x.D);
	long long r = i / x.D;
	int t = (int)(r % x.N), bh = (int)(r / x.N);
	float v = load(x, bh / x.H, bh % x.H, t, d);
	u32 h;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(h) : "f"(0.0f), "f"(v));
	float rest = v - __uint_as_float(h << 16);
	u32 l;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(l) : "f"(0.0f), "f"(rest));
	hi[i] = (u16)h;
	lo[i] = (u16)l;
}

#define BM_PPR (BM_BK / 8)              // 16-byte pieces per staged row
#define BM_PPT (BM_R * BM_PPR / BM_T)    // pieces per thread per operand
#define BM_RSTEP (BM_T / BM_PPR)         // rows between a thread's pieces

// bm_piece stages one 16-byte piece: 8 elements of o from element offset
// at (valid when ok; zeros otherwise, and past D from dim d) into shared
// memory at dhi (and dlo).
__device__ __forceinline__ void bm_piece(const BmOp& o, u32 dhi, u32 dlo, long long at, bool ok, int d, int D) {
#if BM_VEC
	bm_cp16(dhi, ok ? (const void*)(o.hi + at) : (const void*)o.hi, ok ? 16 : 0);
#if BM_SPLIT
	bm_cp16(dlo, ok ? (const void*)(o.lo + at) : (const void*)o.lo, ok ? 16 : 0);
#endif
#else
	u32 w[4];
#pragma unroll
	for (int e = 0; e < 4; e++) {
		u32 x0 = ok && d + 2 * e < D ? o.hi[at + 2 * e] : 0, x1 = ok && d + 2 * e + 1 < D ? o.hi[at + 2 * e + 1] : 0;
		w[e] = x0 | (x1 << 16);
	}
	bm_st16(dhi, w[0], w[1], w[2], w[3]);
#if BM_SPLIT
#pragma unroll
	for (int e = 0; e < 4; e++) {
		u32 x0 = ok && d + 2 * e < D ? o.lo[at + 2 * e] : 0, x1 = ok && d + 2 * e + 1 < D ? o.lo[at + 2 * e + 1] : 0;
		w[e] = x0 | (x1 << 16);
	}
	bm_st16(dlo, w[0], w[1], w[2], w[3]);
#endif
#endif
}

// bm_put adds a logit tile's softmax terms p0 and p1, of columns col and
// col + 1 (col = 8j + 2t from the tile's first, a thread's pair of group
// j in the MMA accumulator layout), of row row to E's chunk sums: one
// chunk of BM_CS columns each (in groups of eight columns, cacc carrying
// the thread's share of a chunk wider than eight columns).
__device__ __forceinline__ void bm_put(float* E, int row, int col, int j, int t, float p0, float p1, float& cacc) {
#if BM_CS == 1
	E[(long long)col * BM_R + row] = p0;
	E[(long long)(col + 1) * BM_R + row] = p1;
#elif BM_CS == 2
	E[(long long)(col / 2) * BM_R + row] = p0 + p1;
#elif BM_CS == 4
	float s = p0 + p1;
	s += __shfl_xor_sync(0xffffffffu, s, 1);
	if (!(t & 1)) E[(long long)(col / 4) * BM_R + row] = s;
#else
	// A chunk is BM_CS / 8 consecutive groups of eight columns.
	cacc += p0 + p1;
	if ((j + 1) % (BM_CS / 8) == 0) {
		float s = cacc;
		s += __shfl_xor_sync(0xffffffffu, s, 1);
		s += __shfl_xor_sync(0xffffffffu, s, 2);
		if (t == 0) E[(long long)((col - 2 * t) / BM_CS) * BM_R + row] = s;
		cacc = 0.0f;
	}
#endif
}

#include "block_select.cuh"

extern "C" __global__ void __launch_bounds__(BM_T, 2) bm_mass(PlanArgs a, BmArgs m) {
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ long long roff[BM_R];
	__shared__ int rvis[BM_R], rlim[BM_R];
	__shared__ float rM[2][BM_R], rL[2][BM_R];
	__shared__ int sqb[BM_SPI], sqs[BM_SPI], snvis[BM_SPI];
	__shared__ int smax;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wr = warp & 3, wc = warp >> 2, g = lane >> 2, t = lane & 3;
	const int KB = a.stride, D = a.D;
	const int na = a.bq / m.cq;             // rows per query block
	const int nseg = a.q_blocks * m.hpi;    // segments per key set
	const int ipk = (nseg + m.spi - 1) / m.spi;
	const int work = m.ksets * ipk;
	const int off = a.Nk - a.Nq;
	constexpr int NCH = BM_DP / BM_BK;      // k chunks per token
	const int kch = m.q.S * NCH;            // k chunks per logit tile
#if BM_WG
	constexpr u32 OPB = BM_R * 128;         // bytes of one staged operand: rows of 128 bytes, swizzled
#else
	constexpr u32 OPB = BM_R * BM_KP * 2;   // bytes of one staged operand
#endif
#if BM_QRES
	// The resident query halves, [BM_R][QKP] each, then the stages of key
	// halves (hi, lo).
	constexpr int QKP = BM_DP + 8;          // resident row pitch: ldmatrix rows hit distinct banks
	constexpr u32 QOPB = BM_R * QKP * 2;    // bytes of one resident query half
	constexpr u32 STB = OPB * 2;
	constexpr u32 KOFF = 2 * QOPB;          // the first stage
#else
	constexpr u32 STB = OPB * (BM_SPLIT ? 4 : 2);
	constexpr u32 KOFF = 0;
#endif
#if BM_WG
	const u32 sbase = (bm_smem(smem) + 1023u) & ~1023u; // swizzle atoms on 1024-byte boundaries
#else
	const u32 sbase = bm_smem(smem);
#endif
	float* E = m.ework + (long long)blockIdx.x * (m.chunks + m.subs) * BM_R;
	float* MT = E + (long long)m.chunks * BM_R;
	double* mass = m.mass + (long long)blockIdx.x * BM_SPI * KB;
#if BM_ARGMAX
	// Units (work item, column slice jbase…) from the counter: kset-major,
	// then slice, then item, so that the units in flight share keys.
	__shared__ int sunit;
	const int upk = ipk * m.slices; // units per key set
	for (;;) {
		if (tid == 0) sunit = atomicAdd(m.next, 1);
		__syncthreads(); // every thread read the last unit before the item's first barrier
		const int u = sunit;
		if (u >= m.ksets * upk) break;
		const int kset = u / upk, jbase = (u % upk) / ipk * m.slicew, it = u % ipk;
#else
	constexpr int jbase = 0; // the first column
	// Work items come heaviest first; rounds alternate direction over the
	// CTAs, so that a CTA with a heavy item in one round gets a light one
	// in the next.
	for (int round = 0; round * (int)gridDim.x < work; round++) {
		const int w = round * gridDim.x + ((round & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
		if (w >= work) continue;
		const int kset = w % m.ksets, it = w / m.ksets;
#endif
		const int s0 = it * m.spi, ns = min(m.spi, nseg - s0);
		const int b = kset / m.hk, kh = kset % m.hk;
		__syncthreads(); // the previous item is done with every table
		if (tid < ns) {
			int s = s0 + tid;
			sqb[tid] = a.q_blocks - 1 - s / m.hpi; // heaviest first
			sqs[tid] = kh * m.hpi + s % m.hpi;
			snvis[tid] = visible_blocks(a, sqb[tid]);
		}
		if (tid == 0) smax = 0;
		__syncthreads();
		if (tid < BM_R) {
			int k = tid / na, v = 0;
			long long o = -1;
			if (k < ns) {
				int i = sqb[k] * na + tid % na;
				if (i < m.nrows) {
					int cap = min(m.ncols, snvis[k] * m.per);
					v = cap;
					if (a.causal) {
						int first = i * m.cq, last = min(first + m.cq, a.Nq) - 1;
						int pos = (m.vis_last ? last : first) + off;
						v = pos < 0 ? 0 : min(cap, pos / m.ck + 1);
					}
					o = (long long)b * m.q.sb + (long long)sqs[k] * m.q.sh + (long long)i * m.q.S * m.q.sn;
				}
			}
			roff[tid] = o;
			rvis[tid] = v;
			// The row's tokens u < rlim exist (every u < S but in the last row).
			rlim[tid] = o >= 0 ? m.q.N - (sqb[k] * na + tid % na) * m.q.S : 0;
			if (v > 0) atomicMax(&smax, v);
		}
		__syncthreads();
		const int maxvis = smax;
#if BM_ARGMAX
		if (jbase >= maxvis) continue; // no row sees the slice
		const int jend = min(maxvis, jbase + m.slicew);
#else
		const int jend = maxvis;
#endif
		// Tiles of columns jbase + tile·BM_C …, up to jend.
		const int ntiles = (jend - jbase + BM_C - 1) / BM_C, total = ntiles * kch;
		const long long kbase = (long long)b * m.k.sb + (long long)kh * m.k.sh;
		// Each thread stages the same pieces of every chunk: rows pr0 +
		// i·BM_RSTEP (of the query rows and of the tile's key columns), dims
		// pd…pd+7 of the chunk. A query row's offset is roff (its tokens
		// u < rlim exist); key column j reads tokens j·S + uk, at element
		// offset kbase + (j·S + uk)·sn + d, kthr of it fixed per thread.
		const int pr0 = tid / BM_PPR, pd = (tid % BM_PPR) * 8;
		const long long kthr = kbase + (long long)pr0 * m.k.S * m.k.sn + pd;
		const long long kstep = (long long)BM_RSTEP * m.k.S * m.k.sn;
		// The next chunk to stage: tile lt (of the unit's), chunk lc of the tile.
		int lt = 0, lc = 0, lcount = 0;
		auto stage_next = [&]() {
			const int u = lc / NCH, d0 = (lc % NCH) * BM_BK;
			const u32 st = sbase + KOFF + (u32)(lcount % BM_NST) * STB;
			const int uq = m.q.rev ? m.q.S - 1 - u : u, uk = m.k.rev ? m.k.S - 1 - u : u;
			const int d = d0 + pd, j0 = jbase + lt * BM_C;
			const bool dok = d < D;
			const long long qadd = (long long)uq * m.q.sn + d;
			const long long kadd = kthr + ((long long)j0 * m.k.S + uk) * m.k.sn + d0;
			// Key column j0 + r exists when r < jlim, its token when r·S < tlim.
			const int jlim = m.ncols - j0, tlim = m.k.N - uk - j0 * m.k.S;
#pragma unroll
			for (int i = 0; i < BM_PPT; i++) {
				const int r = pr0 + i * BM_RSTEP;
#if BM_WG
				// 16-byte chunk pd / 8 of row r at chunk (pd / 8) ^ (r & 7).
				const u32 so = (u32)r * 128u + ((((u32)pd >> 3) ^ ((u32)r & 7u)) << 4);
#else
				const u32 so = (u32)(r * BM_KP + pd) * 2;
#endif
#if BM_QRES
				// Query rows with the first tile only (rows of one token:
				// chunk lc is dims d0 …).
				if (lt == 0) {
					const u32 qo = (u32)(r * QKP + d0 + pd) * 2;
					bm_piece(m.q, sbase + qo, sbase + QOPB + qo, roff[r] + qadd, dok && uq < rlim[r], d, D);
				}
				bm_piece(m.k, st + so, st + OPB + so, kadd + i * kstep, dok && r < jlim && r * m.k.S < tlim, d, D);
#else
				bm_piece(m.q, st + so, st + 2 * OPB + so, roff[r] + qadd, dok && uq < rlim[r], d, D);
				bm_piece(m.k, st + OPB + so, st + 3 * OPB + so, kadd + i * kstep, dok && r < jlim && r * m.k.S < tlim, d, D);
#endif
			}
			lcount++;
			if (++lc == kch) lc = 0, lt++;
		};
		float mrun[4], lrun[4];
#pragma unroll
		for (int i = 0; i < 4; i++) mrun[i] = BM_NEG_INF, lrun[i] = 0.0f;
#if BM_WG
		// Warpgroup wc's rows wc·64 + wr·16 + g (+ 8) against the tile's
		// 128 columns, 8j + 2t (+ 1) in group j.
		float acc[16][4];
#pragma unroll
		for (int j = 0; j < 16; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#else
		float acc[2][8][4];
#pragma unroll
		for (int x = 0; x < 2; x++)
#pragma unroll
			for (int j = 0; j < 8; j++) acc[x][j][0] = acc[x][j][1] = acc[x][j][2] = acc[x][j][3] = 0.0f;
#endif
#pragma unroll
		for (int s = 0; s < BM_NST - 1; s++) {
			if (s < total) stage_next();
			asm volatile("cp.async.commit_group;\n" ::);
		}
		int cchunk = 0, ctile = 0; // the chunk computed: chunk cchunk of tile ctile
		for (int iter = 0; iter < total; iter++) {
			asm volatile("cp.async.wait_group %0;\n" ::"n"(BM_NST - 2));
#if BM_WG
			fence_proxy_async(); // the stage's copies and stores, to the wgmma's reads
#endif
			__syncthreads(); // stage iter is in; every warp is done with stage iter − 1
			if (iter + BM_NST - 1 < total) stage_next();
			asm volatile("cp.async.commit_group;\n" ::);
			const u32 st = sbase + KOFF + (u32)(iter % BM_NST) * STB;
#if BM_WG
			// Four k-steps of 16 over the chunk's 64 head dims; the tile's
			// first overwrites the accumulators. Retired before the next
			// iteration's barrier, after which the stage is refilled.
			wg_fence();
#pragma unroll
			for (int kk = 0; kk < 4; kk++)
				wgmma_ss_n128(acc, wg_desc(st + (u32)wc * (64 * 128) + kk * 32, 16, 1024), wg_desc(st + OPB + kk * 32, 16, 1024), cchunk | kk);
			wg_commit();
			wg_wait0();
			reg_fence(acc);
#else
#pragma unroll
			for (int kk = 0; kk < BM_BK / 16; kk++) {
				u32 af[2][4];
#if BM_SPLIT
				u32 al[2][4];
#endif
#pragma unroll
				for (int x = 0; x < 2; x++) {
#if BM_QRES
					const u32 ad = (u32)((wr * 32 + x * 16 + (lane & 15)) * QKP + cchunk * BM_BK + kk * 16 + (lane >> 4) * 8) * 2;
					bm_ldsm4(af[x], sbase + ad);
					bm_ldsm4(al[x], sbase + QOPB + ad);
#else
					u32 ad = (u32)((wr * 32 + x * 16 + (lane & 15)) * BM_KP + kk * 16 + (lane >> 4) * 8) * 2;
					bm_ldsm4(af[x], st + ad);
#if BM_SPLIT
					bm_ldsm4(al[x], st + 2 * OPB + ad);
#endif
#endif
				}
#pragma unroll
				for (int np = 0; np < 4; np++) {
					u32 bd = (u32)((wc * 64 + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * BM_KP + kk * 16 + ((lane >> 3) & 1) * 8) * 2;
					u32 bf[4];
#if BM_QRES
					bm_ldsm4(bf, st + bd);
					u32 bl[4];
					bm_ldsm4(bl, st + OPB + bd);
#else
					bm_ldsm4(bf, st + OPB + bd);
#if BM_SPLIT
					u32 bl[4];
					bm_ldsm4(bl, st + 3 * OPB + bd);
#endif
#endif
#pragma unroll
					for (int x = 0; x < 2; x++) {
						bm_mma(acc[x][2 * np], af[x], bf[0], bf[1]);
						bm_mma(acc[x][2 * np + 1], af[x], bf[2], bf[3]);
#if BM_SPLIT
						bm_mma(acc[x][2 * np], af[x], bl[0], bl[1]);
						bm_mma(acc[x][2 * np + 1], af[x], bl[2], bl[3]);
						bm_mma(acc[x][2 * np], al[x], bf[0], bf[1]);
						bm_mma(acc[x][2 * np + 1], al[x], bf[2], bf[3]);
#endif
					}
				}
			}
#endif
			if (++cchunk < kch) continue;
			cchunk = 0;
			// A logit tile is complete: the running softmax of its rows and
			// the chunk sums. Logits are acc · lscale (log2 units); as the
			// scale is positive, the scaled maximum is the maximum scaled.
			// cb and sub count from jbase (the scratch holds the unit's
			// columns); vis, from 0.
#if BM_WG
			// A thread's two rows see all the tile's 128 columns: both
			// 64-column maxima are the row's running maximum after it.
			const int tile = ctile++, cb = tile * BM_C;
#pragma unroll
			for (int hf = 0; hf < 2; hf++) {
				const int row = wc * 64 + wr * 16 + g + 8 * hf, vis = rvis[row];
				if (jbase + cb + BM_C > vis) { // columns past the row's last visible one
#pragma unroll
					for (int j = 0; j < 16; j++)
#pragma unroll
						for (int e = 0; e < 2; e++)
							if (jbase + cb + 8 * j + 2 * t + e >= vis) acc[j][2 * hf + e] = BM_NEG_INF;
				}
				float tm = BM_NEG_INF;
#pragma unroll
				for (int j = 0; j < 16; j++) tm = fmaxf(tm, fmaxf(acc[j][2 * hf], acc[j][2 * hf + 1]));
				tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 1));
				tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 2));
				const float mn = fmaxf(mrun[hf], tm * m.lscale);
				const float base = mn == BM_NEG_INF ? 0.0f : mn; // masked terms give 2^−∞ = 0
				float ls = lrun[hf] * bm_ex2(mrun[hf] - base);
				float cacc = 0.0f;
#pragma unroll
				for (int j = 0; j < 16; j++) {
					const float p0 = bm_ex2(fmaf(acc[j][2 * hf], m.lscale, -base));
					const float p1 = bm_ex2(fmaf(acc[j][2 * hf + 1], m.lscale, -base));
					ls += p0 + p1;
					bm_put(E, row, cb + 8 * j + 2 * t, j, t, p0, p1, cacc);
				}
				mrun[hf] = mn;
				lrun[hf] = ls;
				if (t == 0) MT[(long long)(2 * tile) * BM_R + row] = MT[(long long)(2 * tile + 1) * BM_R + row] = mn;
			}
#else
			const int tile = ctile++, cb = tile * BM_C + wc * 64, sub = tile * 2 + wc;
#pragma unroll
			for (int x = 0; x < 2; x++) {
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					const int row = wr * 32 + x * 16 + g + 8 * hf, vis = rvis[row], ri = 2 * x + hf;
					if (jbase + cb + 64 > vis) { // columns past the row's last visible one
#pragma unroll
						for (int j = 0; j < 8; j++)
#pragma unroll
							for (int e = 0; e < 2; e++)
								if (jbase + cb + 8 * j + 2 * t + e >= vis) acc[x][j][2 * hf + e] = BM_NEG_INF;
					}
					float tm = BM_NEG_INF;
#pragma unroll
					for (int j = 0; j < 8; j++) tm = fmaxf(tm, fmaxf(acc[x][j][2 * hf], acc[x][j][2 * hf + 1]));
					tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 1));
					tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 2));
					const float mn = fmaxf(mrun[ri], tm * m.lscale);
					const float base = mn == BM_NEG_INF ? 0.0f : mn; // masked terms give 2^−∞ = 0
					float ls = lrun[ri] * bm_ex2(mrun[ri] - base);
					float cacc = 0.0f;
#pragma unroll
					for (int j = 0; j < 8; j++) {
						const float p0 = bm_ex2(fmaf(acc[x][j][2 * hf], m.lscale, -base));
						const float p1 = bm_ex2(fmaf(acc[x][j][2 * hf + 1], m.lscale, -base));
						ls += p0 + p1;
						bm_put(E, row, cb + 8 * j + 2 * t, j, t, p0, p1, cacc);
					}
					mrun[ri] = mn;
					lrun[ri] = ls;
					if (t == 0) MT[(long long)sub * BM_R + row] = mn;
				}
			}
#pragma unroll
			for (int x = 0; x < 2; x++)
#pragma unroll
				for (int j = 0; j < 8; j++) acc[x][j][0] = acc[x][j][1] = acc[x][j][2] = acc[x][j][3] = 0.0f;
#endif
		}
		asm volatile("cp.async.wait_group 0;\n" ::);
		// Each row's maximum and sum over both column halves.
#if BM_WG
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			float l = lrun[hf];
			l += __shfl_xor_sync(0xffffffffu, l, 1);
			l += __shfl_xor_sync(0xffffffffu, l, 2);
			const int row = wc * 64 + wr * 16 + g + 8 * hf;
			if (t == 0) {
				rM[0][row] = mrun[hf];
				rL[0][row] = l;
				rM[1][row] = BM_NEG_INF; // one warp holds the whole row
				rL[1][row] = 0.0f;
			}
		}
#else
#pragma unroll
		for (int ri = 0; ri < 4; ri++) {
			float l = lrun[ri];
			l += __shfl_xor_sync(0xffffffffu, l, 1);
			l += __shfl_xor_sync(0xffffffffu, l, 2);
			const int row = wr * 32 + (ri >> 1) * 16 + g + 8 * (ri & 1);
			if (t == 0) {
				rM[wc][row] = mrun[ri];
				rL[wc][row] = l;
			}
		}
#endif
		__syncthreads();
		if (tid < BM_R) {
			float m0 = rM[0][tid], m1 = rM[1][tid], mx = fmaxf(m0, m1);
			float l = (m0 == BM_NEG_INF ? 0.0f : rL[0][tid] * exp2f(m0 - mx)) + (m1 == BM_NEG_INF ? 0.0f : rL[1][tid] * exp2f(m1 - mx));
			rM[0][tid] = mx;
			rL[0][tid] = l > 0.0f ? 1.0f / l : 0.0f;
		}
		__syncthreads();
		// Block masses: warp by warp over the KV blocks (the unit's slice's
		// with BM_ARGMAX), each lane four rows, then each segment's rows
		// summed in order (float64).
#if BM_ARGMAX
		// Each lane's rows' heaviest block of the slice so far: its mass
		// relative to the slice's row maximum (≥ 0, so its bits order as it
		// does) above ~kb, so that the largest key is the heaviest block
		// and, of equal ones, the first.
		u64 best[BM_R / 32];
#pragma unroll
		for (int i = 0; i < BM_R / 32; i++) best[i] = 0ull;
		const int kb1 = min(snvis[0], (jbase + m.slicew) / m.per); // the slice's blocks from jbase / per
		for (int kb = jbase / m.per + warp; kb < kb1; kb += BM_T / 32) {
#else
		float* wbuf = (float*)smem + warp * BM_R;
		for (int kb = warp; kb < snvis[0]; kb += BM_T / 32) {
#endif
			const int c0 = kb * m.per; // E and MT hold columns from jbase
			// The first chunk of the block for all four rows at once, then
			// the rest (blocks wider than 64 columns).
			float ev[BM_R / 32], mv[BM_R / 32];
#pragma unroll
			for (int i = 0; i < BM_R / 32; i++) {
				const int r = lane + 32 * i;
				const bool on = c0 < rvis[r];
				ev[i] = on ? E[(long long)((c0 - jbase) / BM_CS) * BM_R + r] : 0.0f;
				mv[i] = on ? MT[(long long)((c0 - jbase) >> 6) * BM_R + r] : 0.0f;
			}
#pragma unroll
			for (int i = 0; i < BM_R / 32; i++) {
				const int r = lane + 32 * i, c1 = min(c0 + m.per, rvis[r]);
				const float mr = rM[0][r];
				float wv = c0 < c1 ? ev[i] * bm_ex2(mv[i] - mr) : 0.0f;
				for (int c = c0 + BM_CS; c < c1; c += BM_CS)
					wv += E[(long long)((c - jbase) / BM_CS) * BM_R + r] * bm_ex2(MT[(long long)((c - jbase) >> 6) * BM_R + r] - mr);
#if BM_ARGMAX
				if (c0 < c1) {
					const u64 key = ((u64)__float_as_uint(wv) << 32) | (u64)(0xffffffffu - (u32)kb);
					if (key > best[i]) best[i] = key;
				}
#else
				wbuf[r] = wv * rL[0][r];
#endif
			}
#if BM_ARGMAX
		}
		__syncthreads(); // every warp is done with the unit's shared tables
		{
			// The rows' heaviest blocks of the slice over the warps; their
			// masses in absolute terms, log2 w + M (2^M the slice's row
			// maximum), to m.xkey by atomicMax.
			u64* wb = (u64*)smem; // [warp][row]
#pragma unroll
			for (int i = 0; i < BM_R / 32; i++) wb[warp * BM_R + lane + 32 * i] = best[i];
			__syncthreads();
			if (tid < BM_R) {
				u64 bk = 0ull;
				for (int x = 0; x < BM_T / 32; x++) {
					const u64 v = wb[x * BM_R + tid];
					if (v > bk) bk = v;
				}
				const int k = tid / na;
				if (bk != 0ull && k < ns) { // a row that sees none of the slice has no key
					const int i = sqb[k] * na + tid % na;
					if (i < m.nrows) {
						const int kb = (int)(0xffffffffu - (u32)bk);
						const double v = (double)rM[0][tid] + log2((double)__uint_as_float((u32)(bk >> 32)));
						atomicMax(m.xkey + ((long long)b * m.hk * m.hpi + sqs[k]) * m.nrows + i, bm_okey(v, kb));
					}
				}
			}
		}
		continue;
#else
			__syncwarp();
			for (int k = lane; k < ns; k += 32) {
				if (kb >= snvis[k]) continue;
				double s = 0.0;
				for (int i = 0; i < na; i++) s += (double)wbuf[k * na + i];
				mass[k * KB + kb] = s;
			}
			__syncwarp();
		}
		__syncthreads();
		for (int k = 0; k < ns; k++) {
			const int nvis = snvis[k];
			const int ex = m.extra ? m.extra[((long long)b * m.hk * m.hpi + sqs[k]) * a.q_blocks + sqb[k]] : -1;
			bm_select(a, m, mass + k * KB, nvis, ex, smem);
			int n2 = 1;
			while (n2 < nvis) n2 <<= 1;
			const unsigned char* flag = smem + n2 * 12;
			write_rows(a, flag, nvis, ((long long)b * a.Hq + (long long)sqs[k] * m.ch) * a.q_blocks + sqb[k], a.q_blocks, m.ch);
			__syncthreads();
		}
#endif
	}
}
