// Quantization of Q, K and V for the quantized attention kernel
// (attention_q8.cu), after SageAttention (Zhang et al. 2024, §3-4) as
// SpargeAttn §3.5 uses it, with V and P̃ in FP8 as in SageAttention2:
//   - K is smoothed by its mean over the sequence (per batch, KV head and
//     channel), then Q and K go to INT8, symmetric, one scale
//     δ = max|x|/127 per 16 query rows (one consumer warp's rows) and per
//     64 keys;
//   - V goes to FP8 e4m3 with one scale per channel, δ_v = max|v|/448,
//     written transposed (keys contiguous), since an 8-bit wgmma takes
//     both operands K-major, and with the keys of each group of 16 in the
//     order the P̃ fragments come out of the S accumulators
//     (attention_q8.cu, pack_p8).
//
// Every output is written in the byte layout the kernel's shared memory
// takes, so that one bulk copy moves a tile: Q and K rows of 128 bytes
// (head dims zero-padded to 128) in the 128-byte swizzle (16-byte chunk c
// of row r at c ^ (r & 7)); V in 64-key chunks of 128 channel rows of 64
// bytes in the 64-byte swizzle (chunk c of row r at c ^ ((r >> 1) & 3)).
// Token counts are padded to multiples of 128 with zero codes.
//
// Per-head statistics come first (kv_stats): the sums of K's channels and
// the maxima of |V|'s, gathered with atomics into zeroed buffers.

#define QD 128 // padded head dim: bytes per Q/K row, channel rows of V

// kv_stats adds the channel sums of K to ksum and raises vmax to the
// channel maxima of |V|, [B·Hkv, 128] each (float bits, both zeroed
// first). Block (b·Hkv + h, chunk): 8 warps, one token each per step,
// four channels a lane.
extern "C" __global__ void kv_stats(View k, View v, float* ksum, float* vmax) {
	__shared__ float sk[8][QD], sv[8][QD];
	const int bh = blockIdx.x, b = bh / k.H, h = bh % k.H;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int per = (k.N + gridDim.y - 1) / gridDim.y;
	const int lo = blockIdx.y * per, hi = min(k.N, lo + per);
	float s[4] = {0, 0, 0, 0}, m[4] = {0, 0, 0, 0};
	for (int n = lo + w; n < hi; n += 8) {
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const int d = 4 * lane + e;
			if (d < k.D) s[e] += load(k, b, h, n, d);
			if (d < v.D) m[e] = fmaxf(m[e], fabsf(load(v, b, h, n, d)));
		}
	}
#pragma unroll
	for (int e = 0; e < 4; e++) sk[w][4 * lane + e] = s[e], sv[w][4 * lane + e] = m[e];
	__syncthreads();
	if (threadIdx.x < QD) {
		const int d = threadIdx.x;
		float a = 0, x = 0;
#pragma unroll
		for (int i = 0; i < 8; i++) a += sk[i][d], x = fmaxf(x, sv[i][d]);
		atomicAdd(ksum + bh * QD + d, a);
		// Non-negative floats order as their bits do.
		atomicMax(reinterpret_cast<int*>(vmax) + bh * QD + d, __float_as_int(x));
	}
}

// swz128 is the byte offset of byte col of row r in the 128-byte swizzle.
__device__ __forceinline__ int swz128(int r, int col) { return r * 128 + ((((col >> 4) ^ (r & 7))) << 4) + (col & 15); }

__device__ __forceinline__ int code8(float x, float inv) {
	return max(-127, min(127, __float2int_rn(x * inv)));
}

// quant8 quantizes 64 rows of x (tokens [64·g, +64) of batch b, head h,
// block (b·H + h)·(npad/64) + g) to INT8 rows of out ([B, H, npad, 128],
// swizzled) with one scale per GROUP rows in scales ([B, H, npad/GROUP]).
// With ksum, the rows are first smoothed by the mean ksum/N (K). Warp w
// takes rows 8w..8w+7, four channels a lane; rows past x.N are zeros.
template <int GROUP>
__device__ __forceinline__ void quant8(const View& x, const float* ksum, int npad, signed char* out, float* scales) {
	__shared__ float wmax[8];
	const int blocks = npad / 64;
	const int bh = blockIdx.x / blocks, g = blockIdx.x % blocks;
	const int b = bh / x.H, h = bh % x.H;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float mean[4] = {0, 0, 0, 0};
	if (ksum) {
#pragma unroll
		for (int e = 0; e < 4; e++) mean[e] = ksum[bh * QD + 4 * lane + e] / (float)x.N;
	}
	float r[8][4];
	float amax = 0;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int n = g * 64 + 8 * w + i;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const int d = 4 * lane + e;
			r[i][e] = (n < x.N && d < x.D) ? load(x, b, h, n, d) - mean[e] : 0.f;
			amax = fmaxf(amax, fabsf(r[i][e]));
		}
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
	if (lane == 0) wmax[w] = amax;
	__syncthreads();
	// The group's warps: 2 for 16 rows, all 8 for 64.
	constexpr int GW = GROUP / 8;
	const int w0 = (w / GW) * GW;
	amax = 0;
#pragma unroll
	for (int i = 0; i < GW; i++) amax = fmaxf(amax, wmax[w0 + i]);
	// SageAttention / SpargeAttn §3.5: δ = max|x|/127 per block.
	const float scale = amax / 127.f;
	const float inv = amax > 0 ? 127.f / amax : 0.f;
	if (lane == 0 && w == w0) scales[(long long)bh * (npad / GROUP) + (g * 64 + 8 * w) / GROUP] = scale;
	signed char* dst = out + ((long long)bh * npad + g * 64) * QD;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int rr = 8 * w + i; // row in the 64, whose swizzle phase is its token's
		u32 word = 0;
#pragma unroll
		for (int e = 0; e < 4; e++) word |= (u32)(code8(r[i][e], inv) & 0xff) << (8 * e);
		*reinterpret_cast<u32*>(dst + swz128(rr, 4 * lane)) = word;
	}
}

// quant_q quantizes Q: grid B·Hq·npad/64 blocks of 256 threads.
extern "C" __global__ void quant_q(View q, int npad, signed char* out, float* scales) {
	quant8<16>(q, nullptr, npad, out, scales);
}

// quant_k smooths K by its channel means (ksum/Nk) and quantizes it:
// grid B·Hkv·npad/64 blocks of 256 threads.
extern "C" __global__ void quant_k(View k, const float* ksum, int npad, signed char* out, float* scales) {
	quant8<64>(k, ksum, npad, out, scales);
}

// e4m3x2 converts (lo, hi) to two FP8 e4m3 codes, lo in the low byte,
// rounding to nearest and saturating at ±448.
__device__ __forceinline__ u32 e4m3x2(float lo, float hi) {
	unsigned short r;
	asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
	return r;
}

// quant_v writes V as FP8 e4m3 codes of v·448/vmax[channel], transposed
// into 64-key chunks ([B, Hkv, npad/64, 128 channels, 64 keys], 64-byte
// swizzle), key n of each 16 at position 4·((n & 7) >> 1) + (n & 1) +
// 2·(n >> 3), where the P̃ fragments hold it. Block (b·Hkv + h)·(npad/64)
// + chunk, 256 threads: warp w loads keys 8w..8w+7, four channels a lane.
extern "C" __global__ void quant_v(View v, const float* vmax, int npad, unsigned char* out) {
	__shared__ unsigned char t[QD][64 + 4];
	const int chunks = npad / 64;
	const int bh = blockIdx.x / chunks, c = blockIdx.x % chunks;
	const int b = bh / v.H, h = bh % v.H;
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float mul[4];
#pragma unroll
	for (int e = 0; e < 4; e++) {
		const float m = vmax[bh * QD + 4 * lane + e];
		mul[e] = m > 0 ? 448.f / m : 0.f;
	}
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int key = 8 * w + i, n = c * 64 + key;
		const int pos = (key & ~15) + 4 * ((key & 7) >> 1) + (key & 1) + 2 * ((key >> 3) & 1);
		float x[4];
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const int d = 4 * lane + e;
			x[e] = (n < v.N && d < v.D) ? load(v, b, h, n, d) * mul[e] : 0.f;
		}
		const u32 lo = e4m3x2(x[0], x[1]), hi = e4m3x2(x[2], x[3]);
		t[4 * lane + 0][pos] = lo & 0xff;
		t[4 * lane + 1][pos] = lo >> 8;
		t[4 * lane + 2][pos] = hi & 0xff;
		t[4 * lane + 3][pos] = hi >> 8;
	}
	__syncthreads();
	unsigned char* dst = out + (long long)blockIdx.x * (QD * 64);
	for (int u = threadIdx.x; u < QD * 4; u += blockDim.x) {
		const int row = u >> 2, cc = u & 3;
		u32 word[4];
#pragma unroll
		for (int q = 0; q < 4; q++)
			word[q] = (u32)t[row][16 * cc + 4 * q] | (u32)t[row][16 * cc + 4 * q + 1] << 8 | (u32)t[row][16 * cc + 4 * q + 2] << 16 |
			          (u32)t[row][16 * cc + 4 * q + 3] << 24;
		asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst + row * 64 + ((cc ^ ((row >> 1) & 3)) << 4)), "r"(word[0]), "r"(word[1]),
		             "r"(word[2]), "r"(word[3])
		             : "memory");
	}
}

// cvt16x2 rounds (lo, hi) to bfloat16, or float16 when f16, lo in the low
// half.
__device__ __forceinline__ u32 cvt16x2(float lo, float hi, int f16) {
	u32 r;
	if (f16)
		asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	else
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

// quant_v16 writes V in the kernel's 16-bit type (not quantized: the
// 16-bit P̃V path) in 64-key chunks, [B, Hkv, npad/64, 2 column blocks,
// 64 keys, 64 channels], 128-byte swizzle: the shared-memory layout of the
// 16-bit kernels' V tiles. Block (b·Hkv + h)·(npad/64) + chunk, 256
// threads, 16 bytes (8 channels of one key) each per step.
extern "C" __global__ void quant_v16(View v, int npad, int f16, unsigned char* out) {
	const int chunks = npad / 64;
	const int bh = blockIdx.x / chunks, c = blockIdx.x % chunks;
	const int b = bh / v.H, h = bh % v.H;
	unsigned char* dst = out + (long long)blockIdx.x * (QD * 128);
	for (int u = threadIdx.x; u < 2 * 64 * 8; u += blockDim.x) {
		const int unit = u & 7, key = (u >> 3) & 63, cb = u >> 9;
		const int n = c * 64 + key, d0 = cb * 64 + unit * 8;
		float x[8];
#pragma unroll
		for (int e = 0; e < 8; e++) x[e] = (n < v.N && d0 + e < v.D) ? load(v, b, h, n, d0 + e) : 0.f;
		const u32 w0 = cvt16x2(x[0], x[1], f16), w1 = cvt16x2(x[2], x[3], f16), w2 = cvt16x2(x[4], x[5], f16), w3 = cvt16x2(x[6], x[7], f16);
		asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst + cb * (64 * 128) + swz128(key, unit * 16)), "r"(w0), "r"(w1), "r"(w2),
		             "r"(w3)
		             : "memory");
	}
}
