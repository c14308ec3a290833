// The pooled K/V pyramid of PSA (PSA §3): level h averages groups of
// 2^(h-1) consecutive tokens inside each KV block, the last group of a
// short block holding what is left. Each level is pooled from the level-1
// rows directly, in the CPU executor's order (a float32 sum in token
// order, times 1/count), then rounded to the input type for the
// tensor-core kernel.
//
// One launch builds every level of K and of V (blockIdx.y picks the
// tensor), reading each input row once: a thread takes a group of
// 2^(top-1) tokens of one block (the coarsest level's group; the finer
// levels' groups nest in it) and one 8-element chunk of their columns,
// keeps a running sum per level, and writes each level's row as its group
// ends. Reading the inputs once per level instead cost 3× the input reads
// at four levels.

#define PYR_MAX_LEVEL 8 // plan.MaxLevel
#define PYR_BATCH 8     // rows loaded ahead

// PyramidArgs mirrors cuda.pyramidArgs on the Go side, field for field.
// Index 0 is K, 1 is V. Level h's row t of block kb of head (b, h') is
// dst[i] + (lvl_row[h] + ((b·H + h')·k_blocks + kb)·lvl_width[h] + t)·head_dim.
struct PyramidArgs {
	const u16* src[2]; // 16-bit rows of head_dim elements
	long long sb[2], sh[2], sn[2];
	u16* dst[2];
	long long lvl_row[PYR_MAX_LEVEL + 1];
	int lvl_width[PYR_MAX_LEVEL + 1];
	int B, H, Nk, block_k, k_blocks, top, head_dim, bf16;
};

__device__ __forceinline__ u16 round16(float x, int bf16) {
	u16 r;
	if (bf16) asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
	else asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
	return r;
}

// pyr_store writes 8 pooled values (or zeros), rounded, at column chunk c
// of row t of level lv of block blk in dst.
__device__ __forceinline__ void pyr_store(const PyramidArgs& a, u16* dst, int lv, long long blk, int t, int c, const float (&s)[8]) {
	u32 o[4];
#pragma unroll
	for (int e = 0; e < 4; e++) o[e] = (u32)round16(s[2 * e], a.bf16) | ((u32)round16(s[2 * e + 1], a.bf16) << 16);
	uint4 w;
	w.x = o[0], w.y = o[1], w.z = o[2], w.w = o[3];
	const long long row = a.lvl_row[lv] + blk * a.lvl_width[lv] + t;
	*reinterpret_cast<uint4*>(dst + row * a.head_dim + c * 8) = w;
}

// pyramid writes levels 2..top of K (blockIdx.y 0) and V (1): a thread
// per (head, block, group of 2^(top-1) tokens, 8-element chunk).
extern "C" __global__ void pyramid(const PyramidArgs a) {
	const int which = blockIdx.y;
	const int cpr = a.head_dim / 8;
	const int G = 1 << (a.top - 1);
	const int ng = (a.block_k + G - 1) / G; // groups a block
	const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (long long)a.B * a.H * a.k_blocks * ng * cpr) return;
	const int c = (int)(i % cpr);
	long long r = i / cpr;
	const int tg = (int)(r % ng);
	const long long blk = r / ng; // (b·H + h)·k_blocks + kb
	const int kb = (int)(blk % a.k_blocks);
	const int bh = (int)(blk / a.k_blocks);
	const int b = bh / a.H, h = bh % a.H;
	const int n = min(a.block_k, a.Nk - kb * a.block_k);
	const int lo = tg * G, hi = min(lo + G, n); // block-relative tokens; none when hi ≤ lo
	float s[PYR_MAX_LEVEL - 1][8];
#pragma unroll
	for (int L = 0; L < PYR_MAX_LEVEL - 1; L++)
#pragma unroll
		for (int e = 0; e < 8; e++) s[L][e] = 0.f;
	// The tensor's fields, selected rather than indexed (a dynamic index
	// into the parameters would copy them to local memory).
	const long long sn = which ? a.sn[1] : a.sn[0];
	u16* const dst = which ? a.dst[1] : a.dst[0];
	const u16* p = (which ? a.src[1] : a.src[0]) + b * (which ? a.sb[1] : a.sb[0]) + h * (which ? a.sh[1] : a.sh[0]) + (long long)(kb * a.block_k) * sn + c * 8;
	for (int j0 = lo; j0 < hi; j0 += PYR_BATCH) {
		uint4 w[PYR_BATCH];
#pragma unroll
		for (int u = 0; u < PYR_BATCH; u++)
			if (j0 + u < hi) w[u] = *reinterpret_cast<const uint4*>(p + (long long)(j0 + u) * sn);
#pragma unroll
		for (int u = 0; u < PYR_BATCH; u++) {
			const int j = j0 + u;
			if (j >= hi) break;
			float x[8];
			const u32 uw[4] = {w[u].x, w[u].y, w[u].z, w[u].w};
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const u16 x0 = (u16)(uw[e] & 0xffff), x1 = (u16)(uw[e] >> 16);
				x[2 * e] = a.bf16 ? bf16_to_f32(x0) : f16_to_f32(x0);
				x[2 * e + 1] = a.bf16 ? bf16_to_f32(x1) : f16_to_f32(x1);
			}
#pragma unroll
			for (int L = 0; L < PYR_MAX_LEVEL - 1; L++) {
				const int lv = L + 2, pool = 1 << (L + 1);
				if (lv > a.top) break;
#pragma unroll
				for (int e = 0; e < 8; e++) s[L][e] = __fadd_rn(s[L][e], x[e]);
				// The group of level lv ends at a multiple of its pool or at
				// the block's last token (hi = n then, as lo + G is a
				// multiple of pool).
				if (((j + 1) & (pool - 1)) == 0 || j + 1 == hi) {
					const int t = j / pool;
					const float inv = __fdiv_rn(1.f, (float)(j + 1 - t * pool));
#pragma unroll
					for (int e = 0; e < 8; e++) s[L][e] = __fmul_rn(s[L][e], inv);
					pyr_store(a, dst, lv, blk, t, c, s[L]);
#pragma unroll
					for (int e = 0; e < 8; e++) s[L][e] = 0.f;
				}
			}
		}
	}
	// Rows of groups past the block's end (a short last block): zeros,
	// never read by the kernels but written, as every row is.
	const float z[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
	for (int lv = 2; lv <= PYR_MAX_LEVEL; lv++) {
		if (lv > a.top) break;
		const int pool = 1 << (lv - 1);
		const int t0 = (max(hi, lo) + pool - 1) / pool, t1 = min((lo + G) / pool, a.lvl_width[lv]);
		for (int t = t0; t < t1; t++) pyr_store(a, dst, lv, blk, t, c, z);
	}
}
