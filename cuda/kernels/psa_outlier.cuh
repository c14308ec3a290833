// psa_outliers' helpers (plan_psa.cu and plan_psa_outlier.cu include this
// after psa.cuh): staging a block, the canonical float32 mean, spread and
// outlier scores (method/psa, outlierScores), and the selection of the m
// largest (by rank counts or, for m ≤ 32 of at most 128 tokens, one warp's
// repeated arg-max).

// psa_outlier_pitch is the 32-bit word pitch of a row of psa_outliers'
// staged block: the row's words (D floats, or D 16-bit elements in pairs)
// rounded up to an odd count, so that the 32 rows that a warp's threads
// read at one word lie in 32 distinct banks (cuda.psaOutlierPitch).
__device__ __forceinline__ int psa_outlier_pitch(int D, int dtype) { return (dtype == DT_F32 ? D : (D + 1) / 2) | 1; }

// psa_stage copies the n rows of D elements from token lo of head h of
// batch b of x to xs (a row every pw words, as they are: 16-bit elements
// in pairs), in 16-byte pieces where the rows allow it, else 4- or 2-byte
// ones; the read-only loads go ahead of the shared stores.
__device__ __forceinline__ void psa_stage(const View& x, u32* xs, int pw, int b, int h, int lo, int n, int D) {
	const int es = x.dtype == DT_F32 ? 4 : 2;
	const char* base = (const char*)x.ptr + ((long long)b * x.sb + (long long)h * x.sh + (long long)lo * x.sn) * es;
	const long long rs = x.sn * es;
	const int rb = D * es;
	const unsigned long long al = (unsigned long long)base | (unsigned long long)rs;
	const int ub = (al & 15) == 0 && rb % 16 == 0 ? 16 : ((al & 3) == 0 && rb % 4 == 0 ? 4 : 2); // piece bytes
	const int upr = rb / ub, total = n * upr;
	// Piece i is row j = i / upr, piece u = i % upr, advanced without
	// divisions.
	int j = threadIdx.x / upr, u = threadIdx.x - j * upr;
	const int dj = blockDim.x / upr, du = blockDim.x - dj * upr;
	char* dst = (char*)xs;
	if (ub == 16) {
		// Four pieces' loads in flight before their stores.
		for (int i = threadIdx.x; i < total; i += 4 * blockDim.x) {
			uint4 v[4];
			int at[4];
#pragma unroll
			for (int q = 0; q < 4; q++) {
				at[q] = -1;
				if (i + q * (int)blockDim.x < total) {
					v[q] = __ldg(reinterpret_cast<const uint4*>(base + j * rs + u * 16));
					at[q] = j * pw * 4 + u * 16;
				}
				u += du;
				j += dj;
				if (u >= upr) {
					u -= upr;
					j++;
				}
			}
#pragma unroll
			for (int q = 0; q < 4; q++) {
				if (at[q] < 0) continue;
				u32* w = reinterpret_cast<u32*>(dst + at[q]); // 4-byte aligned only: the pitch is odd
				w[0] = v[q].x;
				w[1] = v[q].y;
				w[2] = v[q].z;
				w[3] = v[q].w;
			}
		}
		return;
	}
	for (int i = threadIdx.x; i < total; i += blockDim.x) {
		const char* src = base + j * rs + u * ub;
		char* at = dst + j * pw * 4 + u * ub;
		if (ub == 4) {
			*reinterpret_cast<u32*>(at) = __ldg(reinterpret_cast<const unsigned int*>(src));
		} else {
			*reinterpret_cast<u16*>(at) = __ldg(reinterpret_cast<const unsigned short*>(src));
		}
		u += du;
		j += dj;
		if (u >= upr) {
			u -= upr;
			j++;
		}
	}
}

// psa_ox is element d of row j of the block: from the staged rows xs
// (DT the input type) or, with DT 0, from x itself (token lo + j).
template <int DT>
__device__ __forceinline__ float psa_ox(const View& x, const u32* xs, int pw, int b, int h, int lo, int j, int d) {
	if (DT == 0) return load(x, b, h, lo + j, d);
	if (DT == DT_F32) return __uint_as_float(xs[j * pw + d]);
	const u16 v = reinterpret_cast<const u16*>(xs)[2 * j * pw + d];
	return DT == DT_F16 ? f16_to_f32(v) : bf16_to_f32(v);
}

// psa_lo and psa_hi are the elements of a staged word of two 16-bit
// elements (DT_BF16 or DT_F16): the lower dimension in the low half.
template <int DT>
__device__ __forceinline__ float psa_lo(u32 v) {
	return DT == DT_BF16 ? __uint_as_float(v << 16) : f16_to_f32((u16)(v & 0xffffu));
}
template <int DT>
__device__ __forceinline__ float psa_hi(u32 v) {
	return DT == DT_BF16 ? __uint_as_float(v & 0xffff0000u) : f16_to_f32((u16)(v >> 16));
}

// psa_inv is 1/v for a dimension's summed squared deviations v, one
// correctly rounded division; v where v is not > 0 (0, or NaN, kept as
// the CPU keeps them).
__device__ __forceinline__ float psa_inv(float v) { return v > 0.0f ? __fdiv_rn(1.0f, v) : v; }

// psa_zterm adds dimension d's term (x − μ)²/v, as x − μ, its square and
// the product by 1/v each rounded on its own (float32, never fused), to
// the running score sc.
__device__ __forceinline__ float psa_zterm(float sc, float x, float mu, float inv) {
	const float y = __fsub_rn(x, mu);
	return __fadd_rn(sc, __fmul_rn(__fmul_rn(y, y), inv));
}

// psa_quad reads elements 4q … 4q+3 of token t (row, staged; or x itself
// with DT 0) to e.
template <int DT>
__device__ __forceinline__ void psa_quad(const View& x, const u32* row, int b, int h, int t, int q, float (&e)[4]) {
	if (DT == DT_BF16 || DT == DT_F16) {
		const u32 w0 = row[2 * q], w1 = row[2 * q + 1]; // two LDS.32: rows start at any word (the odd pitch)
		e[0] = psa_lo<DT>(w0), e[1] = psa_hi<DT>(w0), e[2] = psa_lo<DT>(w1), e[3] = psa_hi<DT>(w1);
	} else if (DT == DT_F32) {
#pragma unroll
		for (int k = 0; k < 4; k++) e[k] = __uint_as_float(row[4 * q + k]);
	} else {
#pragma unroll
		for (int k = 0; k < 4; k++) e[k] = load(x, b, h, t, 4 * q + k);
	}
}

// psa_outlier_scores writes the outlier scores of the block's n rows to z
// as their float32 bits: the mean and 1/v per dimension, summed in token
// order, then the score per token (a thread a token, summed in dimension
// order), as outlierScores. DC, when not 0, is D at compile time, so that
// the staged rows' pitch is too and each load's address is an immediate
// offset (D is otherwise the runtime D_, the pitch pw_). The mean and v
// of 16-bit elements are a thread a staged word: dimensions 2p and 2p+1,
// one 32-bit load for both and two independent chains (D/2 threads busy;
// the token order of each sum leaves no other split), of float32 or DT 0
// (x read in place) a thread a dimension.
template <int DT, int DC>
__device__ __forceinline__ void psa_outlier_scores(const View& x, const u32* xs, int pw_, int b, int h, int lo, int n, int D_, float* mean, float* inv,
                                                   u32* z) {
	constexpr bool half = DT == DT_BF16 || DT == DT_F16;
	const int D = DC > 0 ? DC : D_;
	const int pw = DC > 0 ? ((DT == DT_F32 ? DC : (DC + 1) / 2) | 1) : pw_; // psa_outlier_pitch
	const float fn = (float)n;                                               // exact
	if constexpr (half) {
		for (int p = threadIdx.x; p < (D + 1) >> 1; p += blockDim.x) {
			const u32* col = xs + p;
			float s0 = 0.0f, s1 = 0.0f;
#pragma unroll 8
			for (int j = 0; j < n; j++) {
				const u32 v = col[j * pw];
				s0 = __fadd_rn(s0, psa_lo<DT>(v));
				s1 = __fadd_rn(s1, psa_hi<DT>(v));
			}
			const float m0 = __fdiv_rn(s0, fn), m1 = __fdiv_rn(s1, fn);
			float v0 = 0.0f, v1 = 0.0f;
#pragma unroll 8
			for (int j = 0; j < n; j++) {
				const u32 v = col[j * pw];
				const float y0 = __fsub_rn(psa_lo<DT>(v), m0), y1 = __fsub_rn(psa_hi<DT>(v), m1);
				v0 = __fadd_rn(v0, __fmul_rn(y0, y0));
				v1 = __fadd_rn(v1, __fmul_rn(y1, y1));
			}
			mean[2 * p] = m0;
			inv[2 * p] = psa_inv(v0);
			if (2 * p + 1 < D) { // (the last word of an odd D holds one element)
				mean[2 * p + 1] = m1;
				inv[2 * p + 1] = psa_inv(v1);
			}
		}
	} else {
		for (int d = threadIdx.x; d < D; d += blockDim.x) {
			float sum = 0.0f;
#pragma unroll 8
			for (int j = 0; j < n; j++) sum = __fadd_rn(sum, psa_ox<DT>(x, xs, pw, b, h, lo, j, d));
			const float mu = __fdiv_rn(sum, fn);
			float v = 0.0f;
#pragma unroll 8
			for (int j = 0; j < n; j++) {
				const float y = __fsub_rn(psa_ox<DT>(x, xs, pw, b, h, lo, j, d), mu);
				v = __fadd_rn(v, __fmul_rn(y, y));
			}
			mean[d] = mu;
			inv[d] = psa_inv(v);
		}
	}
	__syncthreads();
	// The score: four dimensions a step, their means and inverses in two
	// broadcast 16-byte loads (mean and inv 16-byte aligned); row j's
	// words sit in distinct banks from its warp neighbours' (the odd
	// pitch).
	const float4* m4 = reinterpret_cast<const float4*>(mean);
	const float4* i4 = reinterpret_cast<const float4*>(inv);
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		const u32* row = xs + j * pw;
		float sc = 0.0f;
#pragma unroll 4
		for (int q = 0; q < (D >> 2); q++) {
			float e[4];
			psa_quad<DT>(x, row, b, h, lo + j, q, e);
			const float4 mu = m4[q], iv = i4[q];
			sc = psa_zterm(sc, e[0], mu.x, iv.x);
			sc = psa_zterm(sc, e[1], mu.y, iv.y);
			sc = psa_zterm(sc, e[2], mu.z, iv.z);
			sc = psa_zterm(sc, e[3], mu.w, iv.w);
		}
		for (int d = D & ~3; d < D; d++) sc = psa_zterm(sc, psa_ox<DT>(x, xs, pw, b, h, lo, j, d), mean[d], inv[d]);
		z[j] = __float_as_uint(sc);
	}
	__syncthreads();
}

// psa_count is how many of the scores z[k0 … k1−1] exceed t, compared as
// their float32 bits: the scores are ≥ +0 (or the canonical NaN), so their
// bits lie below 2³¹ and order as the scores do, and for t ≥ −1 the
// difference t − z[k] is exact, its sign bit the count. Four a 16-byte
// broadcast load into four counters; k0 a multiple of 4, z 16-byte
// aligned.
__device__ __forceinline__ int psa_count(const u32* z, int k0, int k1, int t) {
	u32 r0 = 0, r1 = 0, r2 = 0, r3 = 0;
	int k = k0;
#pragma unroll 4
	for (; k + 4 <= k1; k += 4) {
		const uint4 q = *reinterpret_cast<const uint4*>(z + k);
		r0 += (u32)(t - (int)q.x) >> 31;
		r1 += (u32)(t - (int)q.y) >> 31;
		r2 += (u32)(t - (int)q.z) >> 31;
		r3 += (u32)(t - (int)q.w) >> 31;
	}
	for (; k < k1; k++) r0 += (u32)(t - (int)z[k]) >> 31;
	return (int)((r0 + r1) + (r2 + r3));
}

// psa_outlier_dispatch runs psa_outlier_scores on a staged block of
// 16-bit elements, with D at compile time for the common head dimensions.
template <int DT>
__device__ __forceinline__ void psa_outlier_dispatch(const View& x, const u32* xs, int pw, int b, int h, int lo, int n, int D, float* mean, float* inv,
                                                     u32* z) {
	switch (D) {
	case 128: psa_outlier_scores<DT, 128>(x, xs, pw, b, h, lo, n, D, mean, inv, z); break;
	case 64: psa_outlier_scores<DT, 64>(x, xs, pw, b, h, lo, n, D, mean, inv, z); break;
	default: psa_outlier_scores<DT, 0>(x, xs, pw, b, h, lo, n, D, mean, inv, z);
	}
}

// psa_rank_out writes to out[r] (r < m) the offset of the token of rank r
// among z[0 … n−1], largest first, ties to the lower offset: each token's
// rank counted by its thread (all of the CTA's, blockDim.x a multiple of
// 32). Token j's rank in three ranges: the tokens before its warp's (all
// at lower offsets: scores ≥ z_j count, i.e. > z_j − 1 as integers), its
// warp's 32 (the same up to j, then > z_j), and those after (> z_j).
// jb = j − lane is the same for the whole warp, so the loops do not
// diverge.
__device__ __forceinline__ void psa_rank_out(const u32* z, int n, int m, int* out) {
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		const int zj = (int)z[j];
		const int jb = j & ~31, je = min(jb + 32, n);
		int r = psa_count(z, 0, jb, zj - 1) + psa_count(z, je, n, zj);
		int t = zj - 1;
		u32 rw = 0;
#pragma unroll 8
		for (int k = jb; k < je; k++) {
			t = k == j ? zj : t; // (j itself: z_j − z_j = 0, not counted)
			rw += (u32)(t - (int)z[k]) >> 31;
		}
		r += (int)rw;
		if (r < m) out[r] = j;
	}
}

// psa_top_warp is psa_rank_out for n ≤ 128 and m ≤ 32 on one warp (its
// lanes all calling it): lane l holds the scores of tokens l, l+32, l+64
// and l+96 (−1 past n, below every score: the scores' bits lie in
// [0, 2³¹), psa_count), and round r takes the largest remaining score, the
// lowest offset among equals, by two warp reductions (redux.sync: the
// maximum bits, then the least offset holding them) and strikes it out.
// Round r's token is the one of rank r: as many tokens come before it in
// the order (score descending, offset ascending) as rounds before it took,
// so out is psa_rank_out's, bit for bit. Lane r keeps round r's offset and
// the m lanes store them at once.
__device__ __forceinline__ void psa_top_warp(const u32* z, int n, int m, int* out) {
	const int lane = threadIdx.x & 31;
	int c[4];
#pragma unroll
	for (int k = 0; k < 4; k++) c[k] = lane + 32 * k < n ? (int)z[lane + 32 * k] : -1;
	int mine = 0;
	for (int r = 0; r < m; r++) {
		int bz = c[0], bk = 0; // the lane's largest, its lowest offset on ties (strictly greater replaces)
#pragma unroll
		for (int k = 1; k < 4; k++) {
			if (c[k] > bz) bz = c[k], bk = k;
		}
		const int wz = __reduce_max_sync(0xffffffffu, bz);
		const int me = lane + 32 * bk;
		const unsigned wj = __reduce_min_sync(0xffffffffu, bz == wz ? (unsigned)me : 0xffffffffu);
		mine = lane == r ? (int)wj : mine;
		if ((unsigned)me == wj) { // the winner's lane (offsets are distinct)
#pragma unroll
			for (int k = 0; k < 4; k++) c[k] = k == bk ? -1 : c[k];
		}
	}
	if (lane < m) out[lane] = mine;
}

// psa_outlier_select writes the offsets of the m largest of the n scores z
// (m < n), largest first, ties to the lower offset, to out: by psa_top_warp
// on warp 0 where it applies, else by psa_rank_out on every thread. Every
// thread of the CTA calls it, after the __syncthreads that completes z.
__device__ __forceinline__ void psa_outlier_select(const u32* z, int n, int m, int* out) {
	if (n <= 128 && m <= 32) {
		if (threadIdx.x < 32) psa_top_warp(z, n, m, out);
	} else {
		psa_rank_out(z, n, m, out);
	}
}
