// The UniSparse planner on the device (package method/unisparse; UniSparse
// §4, "A Unified Sparse Attention via Multi-Granularity Compression").
// The composite tokens are computed in the CPU planner's canonical order,
// operation for operation (see method/unisparse's scorer), so they are the
// CPU's; the logits are float32 tensor-core sums of their bf16 halves, so
// block masses differ from the CPU's float64 ones by rounding and a block
// at the Top-P boundary may be decided differently:
//
//   uni_norms, uni_draw  stochastic pooling only: token norms, then one
//                        thread per PCG stream walking math/rand/v2's PCG
//                        exactly as the CPU draws (Float64, or IntN when
//                        every token of a composite is zero);
//   uni_pool             composite queries (scaled) and keys in float32
//                        (UniSparse Eq. 2–3), written as bf16 high and
//                        low halves;
//   uni_outlier          with the outlier query (method/unisparse's
//                        outlier.go, our extension): each query block's
//                        token farthest from its composite's mean, in the
//                        CPU's float64 operations and order, scaled and
//                        written as bf16 halves; uni_pool with c = 1 writes
//                        the individual keys likewise;
//   bm_mass, BM_ARGMAX   (block_mass.cuh) the outlier queries against
//                        every key their block sees on the tensor cores,
//                        each one's heaviest KV block to a table;
//   bm_mass              (block_mass.cuh) the composite queries against
//                        the visible composite keys on the tensor cores,
//                        the softmax summed per KV block and query block
//                        (Eq. 4–5), and Top-P (Eq. 6) with the outlier
//                        query's block besides, writing the rows of every
//                        head of the group.

// set_heads gives the batch and first query head of head group g.
__device__ __forceinline__ void set_heads(const PlanArgs& a, int ch, int g, int* b, int* h0) {
	int gpb = a.Hq / ch;
	*b = g / gpb;
	*h0 = (g % gpb) * ch;
}

// tok returns element d of token t of a head group (or of KV head kvh when
// kvh ≥ 0): the token averaged over the group's c_h heads, (1/c_h)·x added
// head by head, each product rounded, as the CPU's gather.
__device__ __forceinline__ float tok(const PlanArgs& a, const View& x, int b, int h0, int ch, int keys, int kvh, int t, int d) {
	if (kvh >= 0) return load(x, b, kvh, t, d);
	int grp = a.Hq / a.Hkv;
	if (ch == 1) return load(x, b, keys ? h0 / grp : h0, t, d);
	float inv = __fdiv_rn(1.0f, (float)ch);
	float s = 0.0f;
	for (int h = h0; h < h0 + ch; h++) s = __fadd_rn(s, __fmul_rn(inv, load(x, b, keys ? h / grp : h, t, d)));
	return s;
}

// ld8 loads elements d … d+7 of token t of head h (zeros past D), with one
// 16-byte load when vec.
__device__ __forceinline__ void ld8(const View& x, int b, int h, int t, int d, int D, bool vec, float (&v)[8]) {
	if (vec) {
		const long long i = (long long)b * x.sb + (long long)h * x.sh + (long long)t * x.sn + d;
		const uint4 w = *(const uint4*)((const u16*)x.ptr + i);
		const u32 ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const u16 lo = (u16)(ws[e] & 0xffffu), hi = (u16)(ws[e] >> 16);
			v[2 * e] = x.dtype == DT_F16 ? f16_to_f32(lo) : bf16_to_f32(lo);
			v[2 * e + 1] = x.dtype == DT_F16 ? f16_to_f32(hi) : bf16_to_f32(hi);
		}
		return;
	}
#pragma unroll
	for (int e = 0; e < 8; e++) v[e] = d + e < D ? load(x, b, h, t, d + e) : 0.0f;
}

// tok8 is tok for elements d … d+7, each computed as tok computes it.
__device__ __forceinline__ void tok8(const PlanArgs& a, const View& x, int b, int h0, int ch, int keys, int kvh, int t, int d, bool vec, float (&v)[8]) {
	if (kvh >= 0) {
		ld8(x, b, kvh, t, d, a.D, vec, v);
		return;
	}
	int grp = a.Hq / a.Hkv;
	if (ch == 1) {
		ld8(x, b, keys ? h0 / grp : h0, t, d, a.D, vec, v);
		return;
	}
	float inv = __fdiv_rn(1.0f, (float)ch), y[8];
#pragma unroll
	for (int e = 0; e < 8; e++) v[e] = 0.0f;
	for (int h = h0; h < h0 + ch; h++) {
		ld8(x, b, keys ? h / grp : h, t, d, a.D, vec, y);
#pragma unroll
		for (int e = 0; e < 8; e++) v[e] = __fadd_rn(v[e], __fmul_rn(inv, y[e]));
	}
}

// uni_pool writes composite c of each set, eight elements per thread, as
// bf16 high and low halves (out_hi, out_lo): sets are head groups, or
// (b, KV head) pairs when per_kv. pooling: 0 average, 1 max, 2 stochastic
// (the token pick[set·ncomp + c]). Queries (scale ≠ 0) are multiplied by
// the softmax scale, in float32 as the CPU does, before the split. Each
// element takes the CPU's float32 operations in the CPU's order, so the
// composites are the CPU's bit for bit.
extern "C" __global__ void uni_pool(PlanArgs a, View x, u16* out_hi, u16* out_lo, int sets, int ntok, int ncomp, int c, int ch, int keys,
                                    int per_kv, int pooling, const int* pick, float scale) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	const int D = a.D, nd = (D + 7) / 8;
	if (i >= (long long)sets * ncomp * nd) return;
	const int d = (int)(i % nd) * 8;
	const long long sc = i / nd;
	const bool vec = x.dtype != DT_F32 && ((unsigned long long)x.ptr & 15) == 0 && ((x.sb | x.sh | x.sn) & 7) == 0 && D % 8 == 0;
	int comp = (int)(sc % ncomp), set = (int)(sc / ncomp);
	int b, h0, kvh = -1;
	if (per_kv) {
		b = set / a.Hkv;
		kvh = set % a.Hkv;
		h0 = 0;
	} else {
		set_heads(a, ch, set, &b, &h0);
	}
	int lo = comp * c, hi = min(lo + c, ntok);
	float v[8], y[8];
	if (pooling == 2) {
		tok8(a, x, b, h0, ch, keys, kvh, pick[sc], d, vec, v);
	} else if (pooling == 1) {
		tok8(a, x, b, h0, ch, keys, kvh, lo, d, vec, v);
		for (int t = lo + 1; t < hi; t++) {
			tok8(a, x, b, h0, ch, keys, kvh, t, d, vec, y);
#pragma unroll
			for (int e = 0; e < 8; e++)
				if (y[e] > v[e]) v[e] = y[e];
		}
	} else { // UniSparse Eq. 2: q̃ = (1/c)·Σ q
#pragma unroll
		for (int e = 0; e < 8; e++) v[e] = 0.0f;
#pragma unroll 4
		for (int t = lo; t < hi; t++) {
			tok8(a, x, b, h0, ch, keys, kvh, t, d, vec, y);
#pragma unroll
			for (int e = 0; e < 8; e++) v[e] = __fadd_rn(v[e], y[e]);
		}
		const float inv = __fdiv_rn(1.0f, (float)(hi - lo));
#pragma unroll
		for (int e = 0; e < 8; e++) v[e] = __fmul_rn(v[e], inv);
	}
	u32 hs[8], ls[8];
#pragma unroll
	for (int e = 0; e < 8; e++) {
		float w = scale != 0.0f ? __fmul_rn(v[e], scale) : v[e];
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hs[e]) : "f"(0.0f), "f"(w));
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(ls[e]) : "f"(0.0f), "f"(w - __uint_as_float(hs[e] << 16)));
	}
	const long long o = sc * D + d;
	if (D % 8 == 0) {
		const uint4 wh = {hs[0] | hs[1] << 16, hs[2] | hs[3] << 16, hs[4] | hs[5] << 16, hs[6] | hs[7] << 16};
		*(uint4*)(out_hi + o) = wh;
		const uint4 wl = {ls[0] | ls[1] << 16, ls[2] | ls[3] << 16, ls[4] | ls[5] << 16, ls[6] | ls[7] << 16};
		*(uint4*)(out_lo + o) = wl;
	} else {
		for (int e = 0; e < 8 && d + e < D; e++) {
			out_hi[o + e] = (u16)hs[e];
			out_lo[o + e] = (u16)ls[e];
		}
	}
}

// uni_pool_avg is uni_pool for average pooling over one head per set
// (per_kv sets, or head groups of one head), with fewer registers so that
// more loads are in flight: the same sums in the same order, so the same
// bits.
extern "C" __global__ void __launch_bounds__(256, 4) uni_pool_avg(PlanArgs a, View x, u16* out_hi, u16* out_lo, int sets, int ntok, int ncomp, int c, int keys,
                                                                  int per_kv, float scale) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	const int D = a.D, nd = (D + 7) / 8;
	if (i >= (long long)sets * ncomp * nd) return;
	const int d = (int)(i % nd) * 8;
	const long long sc = i / nd;
	const bool vec = x.dtype != DT_F32 && ((unsigned long long)x.ptr & 15) == 0 && ((x.sb | x.sh | x.sn) & 7) == 0 && D % 8 == 0;
	const int comp = (int)(sc % ncomp), set = (int)(sc / ncomp);
	int b, h;
	if (per_kv) {
		b = set / a.Hkv;
		h = set % a.Hkv;
	} else {
		set_heads(a, 1, set, &b, &h);
		if (keys) h /= a.Hq / a.Hkv;
	}
	const int lo = comp * c, hi = min(lo + c, ntok);
	float v[8], y[8];
#pragma unroll
	for (int e = 0; e < 8; e++) v[e] = 0.0f;
#pragma unroll 4
	for (int t = lo; t < hi; t++) {
		ld8(x, b, h, t, d, D, vec, y);
#pragma unroll
		for (int e = 0; e < 8; e++) v[e] = __fadd_rn(v[e], y[e]);
	}
	const float inv = __fdiv_rn(1.0f, (float)(hi - lo));
	u32 hs[8], ls[8];
#pragma unroll
	for (int e = 0; e < 8; e++) {
		float w = __fmul_rn(v[e], inv);
		if (scale != 0.0f) w = __fmul_rn(w, scale);
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hs[e]) : "f"(0.0f), "f"(w));
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(ls[e]) : "f"(0.0f), "f"(w - __uint_as_float(hs[e] << 16)));
	}
	const long long o = sc * D + d;
	if (D % 8 == 0) {
		const uint4 wh = {hs[0] | hs[1] << 16, hs[2] | hs[3] << 16, hs[4] | hs[5] << 16, hs[6] | hs[7] << 16};
		*(uint4*)(out_hi + o) = wh;
		const uint4 wl = {ls[0] | ls[1] << 16, ls[2] | ls[3] << 16, ls[4] | ls[5] << 16, ls[6] | ls[7] << 16};
		*(uint4*)(out_lo + o) = wl;
	} else {
		for (int e = 0; e < 8 && d + e < D; e++) {
			out_hi[o + e] = (u16)hs[e];
			out_lo[o + e] = (u16)ls[e];
		}
	}
}

// uni_norms writes the L2 norm of each head-averaged token of each head
// group, as pickByNorm computes it: squares added in float64 in increasing
// d, then the square root.
extern "C" __global__ void uni_norms(PlanArgs a, View x, double* norms, int sets, int ntok, int ch, int keys) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (long long)sets * ntok) return;
	int t = (int)(i % ntok), set = (int)(i / ntok);
	int b, h0;
	set_heads(a, ch, set, &b, &h0);
	double s = 0.0;
	for (int d = 0; d < a.D; d++) {
		double y = (double)tok(a, x, b, h0, ch, keys, -1, t, d);
		s = add64(s, mul64(y, y));
	}
	norms[i] = __dsqrt_rn(s);
}

// Pcg is math/rand/v2's PCG: a 128-bit LCG with DXSM output.
struct Pcg {
	u64 hi, lo;
	__device__ u64 next() {
		const u64 mulHi = 2549297995355413924ull, mulLo = 4865540595714422341ull;
		const u64 incHi = 6364136223846793005ull, incLo = 1442695040888963407ull;
		u64 h = __umul64hi(lo, mulLo), l = lo * mulLo;
		h += hi * mulLo + lo * mulHi;
		u64 l2 = l + incLo;
		h += incHi + (l2 < l ? 1ull : 0ull);
		lo = l2;
		hi = h;
		u64 x = h;
		x ^= x >> 32;
		x *= 0xda942042e4dd58b5ull;
		x ^= x >> 48;
		x *= (l2 | 1ull);
		return x;
	}
	// float64 is Rand.Float64.
	__device__ double float64() { return (double)(next() << 11 >> 11) / 9007199254740992.0; }
	// intn is Rand.IntN on 64-bit systems.
	__device__ int intn(u64 n) {
		if ((n & (n - 1)) == 0) return (int)(next() & (n - 1));
		u64 x = next();
		u64 hi = __umul64hi(x, n), lo = x * n;
		if (lo < n) {
			u64 thresh = (0ull - n) % n;
			while (lo < thresh) {
				x = next();
				hi = __umul64hi(x, n);
				lo = x * n;
			}
		}
		return (int)hi;
	}
};

// uni_draw walks the PCG stream of each head group (one thread each) as
// the CPU's pooler does: seeded (seed, b<<33 ^ h0<<1 ^ stream), one draw
// per composite in increasing order, and writes the picked token.
extern "C" __global__ void uni_draw(PlanArgs a, const double* norms, int* pick, int sets, int ntok, int ncomp, int c, int ch,
                                    u64 seed, int stream) {
	int set = blockIdx.x * blockDim.x + threadIdx.x;
	if (set >= sets) return;
	int b, h0;
	set_heads(a, ch, set, &b, &h0);
	Pcg r{seed, ((u64)b << 33) ^ ((u64)h0 << 1) ^ (u64)stream};
	const double* nm = norms + (long long)set * ntok;
	for (int comp = 0; comp < ncomp; comp++) {
		int lo = comp * c, hi = min(lo + c, ntok), n = hi - lo;
		double total = 0.0;
		for (int t = lo; t < hi; t++) total = add64(total, nm[t]);
		int got;
		if (total == 0.0) {
			got = r.intn((u64)n);
		} else {
			double u = mul64(r.float64(), total);
			got = n - 1;
			for (int t = 0; t < n; t++) {
				double w = nm[lo + t];
				if (u < w) {
					got = t;
					break;
				}
				u = __dsub_rn(u, w);
			}
		}
		pick[(long long)set * ncomp + comp] = lo + got;
	}
}

// uni_outlier finds the outlier query of query block qb of head group set
// (one CTA each, blockIdx.x = set·q_blocks + qb, blockDim.x = 128,
// dynamic shared memory D floats), as method/unisparse's scorer does: for
// each composite group of c tokens, its average-pooled mean (float32 adds
// in token order, then one multiply by 1/n, whatever the pooling), each
// token's squared distance from it in float64 (differences of the float32
// values, squares added in increasing d, nothing fused), and the first
// token of the largest distance. It writes that token, head-averaged and
// multiplied by the softmax scale in float32, as bf16 high and low halves
// at out_hi/out_lo[(set·q_blocks + qb)·D …].
extern "C" __global__ void __launch_bounds__(128) uni_outlier(PlanArgs a, View x, u16* out_hi, u16* out_lo, int c, int ch, float scale) {
	extern __shared__ float mean[];
	__shared__ double sr[128];
	__shared__ int st[128];
	const int tid = threadIdx.x, set = blockIdx.x / a.q_blocks, qb = blockIdx.x % a.q_blocks;
	int b, h0;
	set_heads(a, ch, set, &b, &h0);
	const int lo = qb * a.bq, hi = min(lo + a.bq, a.Nq);
	double best = -1.0; // squared distances are ≥ 0: any token beats it
	int bt = lo;
	for (int c0 = lo; c0 < hi; c0 += c) {
		const int c1 = min(c0 + c, a.Nq);
		__syncthreads(); // the previous group's mean is used up
		for (int d = tid; d < a.D; d += blockDim.x) {
			float v = 0.0f;
			for (int t = c0; t < c1; t++) v = __fadd_rn(v, tok(a, x, b, h0, ch, 0, -1, t, d));
			mean[d] = __fmul_rn(v, __fdiv_rn(1.0f, (float)(c1 - c0)));
		}
		__syncthreads();
		for (int t = c0 + tid; t < c1; t += blockDim.x) {
			double r = 0.0;
			for (int d = 0; d < a.D; d++) {
				const double e = __dsub_rn((double)tok(a, x, b, h0, ch, 0, -1, t, d), (double)mean[d]);
				r = __dadd_rn(r, __dmul_rn(e, e));
			}
			if (r > best) { // a thread's tokens come in increasing order
				best = r;
				bt = t;
			}
		}
	}
	// The largest distance over the threads, the first token of ties.
	sr[tid] = best;
	st[tid] = bt;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (tid < s && (sr[tid + s] > sr[tid] || (sr[tid + s] == sr[tid] && st[tid + s] < st[tid]))) {
			sr[tid] = sr[tid + s];
			st[tid] = st[tid + s];
		}
		__syncthreads();
	}
	const int o = st[0];
	const long long at = (long long)blockIdx.x * a.D;
	for (int d = tid; d < a.D; d += blockDim.x) {
		const float w = __fmul_rn(tok(a, x, b, h0, ch, 0, -1, o, d), scale);
		u32 h, l;
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(h) : "f"(0.0f), "f"(w));
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(l) : "f"(0.0f), "f"(w - __uint_as_float(h << 16)));
		out_hi[at + d] = (u16)h;
		out_lo[at + d] = (u16)l;
	}
}

#include "block_mass.cuh"
