// The pooled K/V pyramid of PSA (PSA §3): level h averages groups of
// 2^(h-1) consecutive tokens inside each KV block, the last group of a
// short block holding what is left. Each level is pooled from the level-1
// rows directly, in the CPU executor's order (a float32 sum in token
// order, times 1/count), then rounded to the input type for the
// tensor-core kernel.

struct PyramidArgs {
	const u16* src; // 16-bit rows of head_dim elements
	long long sb, sh, sn;
	u16* dst; // [B·H·k_blocks·width] rows of head_dim elements
	int B, H, Nk, block_k, k_blocks, pool, width, head_dim, bf16;
};

__device__ __forceinline__ u16 round16(float x, int bf16) {
	u16 r;
	if (bf16) asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
	else asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
	return r;
}

// pyramid writes one level: a thread per (pooled row, 8-element chunk).
extern "C" __global__ void pyramid(const PyramidArgs a) {
	const int cpr = a.head_dim / 8;
	const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	const long long rows = (long long)a.B * a.H * a.k_blocks * a.width;
	if (i >= rows * cpr) return;
	const int c = (int)(i % cpr);
	const long long row = i / cpr;
	const int t = (int)(row % a.width);
	const long long bk = row / a.width;
	const int kb = (int)(bk % a.k_blocks);
	const int bh = (int)(bk / a.k_blocks);
	const int b = bh / a.H, h = bh % a.H;
	const int n = min(a.block_k, a.Nk - kb * a.block_k);
	const int lo = t * a.pool, hi = min(lo + a.pool, n);
	float s[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
	if (lo < hi) {
		const u16* p = a.src + b * a.sb + h * a.sh + (long long)(kb * a.block_k + lo) * a.sn + c * 8;
		for (int j = lo; j < hi; j++, p += a.sn) {
			const uint4 w = *reinterpret_cast<const uint4*>(p);
			const u32 u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const u16 x0 = (u16)(u[e] & 0xffff), x1 = (u16)(u[e] >> 16);
				s[2 * e] = __fadd_rn(s[2 * e], a.bf16 ? bf16_to_f32(x0) : f16_to_f32(x0));
				s[2 * e + 1] = __fadd_rn(s[2 * e + 1], a.bf16 ? bf16_to_f32(x1) : f16_to_f32(x1));
			}
		}
		const float inv = __fdiv_rn(1.f, (float)(hi - lo));
#pragma unroll
		for (int e = 0; e < 8; e++) s[e] = __fmul_rn(s[e], inv);
	}
	u32 o[4];
#pragma unroll
	for (int e = 0; e < 4; e++) o[e] = (u32)round16(s[2 * e], a.bf16) | ((u32)round16(s[2 * e + 1], a.bf16) << 16);
	uint4 w;
	w.x = o[0], w.y = o[1], w.z = o[2], w.w = o[3];
	*reinterpret_cast<uint4*>(a.dst + row * a.head_dim + c * 8) = w;
}
