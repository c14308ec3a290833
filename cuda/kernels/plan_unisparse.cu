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
//                        low halves (with the outlier query and average
//                        pooling uni_outlier writes the queries instead);
//   uni_outlier          (uni_outlier16, uni_outlier.cuh, for one head
//                        per group and 16-byte rows of 16-bit elements)
//                        with the outlier query (method/unisparse's
//                        outlier.go, our extension): each query block's
//                        token farthest from its composite's mean, in the
//                        CPU's float32 operations and order (its means,
//                        with average pooling, are the composite queries
//                        and written as such), written as
//                        it is (one head per group, 16-bit inputs: the
//                        keys are then read in place) or scaled as bf16
//                        halves, with uni_pool (c = 1) writing the
//                        individual keys likewise;
//   bm_mass, BM_ARGMAX   (block_mass.cuh) the outlier queries against
//                        every key their block sees on the tensor cores,
//                        in column slices, each one's heaviest KV block as
//                        an ordered key; uni_extra turns the keys into the
//                        table of extra blocks;
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

// uni_put8 writes min(8, n) elements v·scale (v when scale = 0) at
// hi/lo[o …] as bf16 high and low halves, with 16-byte stores when o is a
// multiple of 8 and n ≥ 8.
__device__ __forceinline__ void uni_put8(u16* out_hi, u16* out_lo, long long o, int n, const float (&v)[8], float scale) {
	u32 hs[8], ls[8];
#pragma unroll
	for (int e = 0; e < 8; e++) {
		const float w = scale != 0.0f ? __fmul_rn(v[e], scale) : v[e];
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hs[e]) : "f"(0.0f), "f"(w));
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(ls[e]) : "f"(0.0f), "f"(w - __uint_as_float(hs[e] << 16)));
	}
	if (n >= 8 && (o & 7) == 0) {
		const uint4 wh = {hs[0] | hs[1] << 16, hs[2] | hs[3] << 16, hs[4] | hs[5] << 16, hs[6] | hs[7] << 16};
		*(uint4*)(out_hi + o) = wh;
		const uint4 wl = {ls[0] | ls[1] << 16, ls[2] | ls[3] << 16, ls[4] | ls[5] << 16, ls[6] | ls[7] << 16};
		*(uint4*)(out_lo + o) = wl;
		return;
	}
	for (int e = 0; e < 8 && e < n; e++) {
		out_hi[o + e] = (u16)hs[e];
		out_lo[o + e] = (u16)ls[e];
	}
}

// uni_outlier finds the outlier query of query block qb of head group set
// (one CTA each, blockIdx.x = set·q_blocks + qb, blockDim.x = 128,
// dynamic shared memory gpp·D floats), as method/unisparse's scorer does:
// for each composite group of c tokens, its average-pooled mean (float32
// adds in token order, then one multiply by 1/n, whatever the pooling),
// each token's squared distance from it in float32 (differences of the
// float32 values, squares added in increasing d, each operation rounded
// on its own, nothing fused), and the first token of the largest
// distance. The block's tokens go in passes of gpp groups: the passes'
// means first (eight elements a thread), then one thread per token. With raw (one head per group, 16-bit input) it writes
// that token's own bits at out_hi[(set·q_blocks + qb)·D …]; otherwise the
// token, head-averaged and multiplied by the softmax scale in float32, as
// bf16 high and low halves at out_hi/out_lo. With cq_hi (average pooling)
// the means are the composite queries too: it writes them as uni_pool
// does, scaled, bf16 halves at cq_hi/cq_lo[(set·nq + composite)·D …], the
// same operations in the same order, so the same bits.
extern "C" __global__ void __launch_bounds__(128) uni_outlier(PlanArgs a, View x, u16* out_hi, u16* out_lo, int c, int ch, float scale, int raw, int gpp,
                                                              u16* cq_hi, u16* cq_lo, int nq) {
	extern __shared__ float mean[]; // [gpp][D]
	__shared__ float sr[128];
	__shared__ int st[128];
	const int tid = threadIdx.x, set = blockIdx.x / a.q_blocks, qb = blockIdx.x % a.q_blocks, D = a.D;
	int b, h0;
	set_heads(a, ch, set, &b, &h0);
	const bool vec = x.dtype != DT_F32 && ((unsigned long long)x.ptr & 15) == 0 && ((x.sb | x.sh | x.sn) & 7) == 0 && D % 8 == 0;
	const int lo = qb * a.bq, hi = min(lo + a.bq, a.Nq), span = gpp * c;
	float best = -1.0f; // squared distances are ≥ 0: any token beats it
	int bt = lo;
	for (int p0 = lo; p0 < hi; p0 += span) { // c divides a.bq: groups start at lo + k·c
		const int p1 = min(p0 + span, hi), ng = (p1 - p0 + c - 1) / c;
		__syncthreads(); // the previous pass's means are used up
		const int nd = (D + 7) / 8;
		for (int i = tid; i < ng * nd; i += blockDim.x) {
			const int gi = i / nd, d = (i % nd) * 8, c0 = p0 + gi * c, c1 = min(c0 + c, hi);
			float v[8], y[8];
#pragma unroll
			for (int e = 0; e < 8; e++) v[e] = 0.0f;
#pragma unroll 4
			for (int t = c0; t < c1; t++) {
				tok8(a, x, b, h0, ch, 0, -1, t, d, vec, y);
#pragma unroll
				for (int e = 0; e < 8; e++) v[e] = __fadd_rn(v[e], y[e]);
			}
			const float inv = __fdiv_rn(1.0f, (float)(c1 - c0));
#pragma unroll
			for (int e = 0; e < 8; e++) {
				v[e] = __fmul_rn(v[e], inv);
				if (d + e < D) mean[gi * D + d + e] = v[e];
			}
			if (cq_hi) uni_put8(cq_hi, cq_lo, ((long long)set * nq + c0 / c) * D + d, D - d, v, scale);
		}
		__syncthreads();
		for (int t = p0 + tid; t < p1; t += blockDim.x) {
			const float* mu = mean + (t - p0) / c * D;
			float r = 0.0f;
			for (int d0 = 0; d0 < D; d0 += 8) {
				float v[8];
				tok8(a, x, b, h0, ch, 0, -1, t, d0, vec, v);
#pragma unroll
				for (int e = 0; e < 8; e++) {
					if (d0 + e >= D) break;
					const float df = __fsub_rn(v[e], mu[d0 + e]);
					r = __fadd_rn(r, __fmul_rn(df, df)); // never fused, as the CPU's
				}
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
	const long long at = (long long)blockIdx.x * D;
	if (raw) {
		const u16* src = (const u16*)x.ptr + (long long)b * x.sb + (long long)h0 * x.sh + (long long)o * x.sn;
		for (int d = tid; d < D; d += blockDim.x) out_hi[at + d] = src[d];
		return;
	}
	for (int d = tid; d < D; d += blockDim.x) {
		const float w = __fmul_rn(tok(a, x, b, h0, ch, 0, -1, o, d), scale);
		u32 h, l;
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(h) : "f"(0.0f), "f"(w));
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(l) : "f"(0.0f), "f"(w - __uint_as_float(h << 16)));
		out_hi[at + d] = (u16)h;
		out_lo[at + d] = (u16)l;
	}
}

#include "uni_outlier.cuh"

#include "block_mass.cuh"

// uni_extra turns the n keys of bm_mass with BM_ARGMAX (bm_okey) into the
// outlier query's table of extra blocks, −1 where a row sees no key.
extern "C" __global__ void uni_extra(const u64* keys, int* extra, int n) {
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) extra[i] = bm_okey_block(keys[i]);
}
