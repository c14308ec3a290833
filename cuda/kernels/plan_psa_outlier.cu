// psa_outliers16, psa_outliers (plan_psa.cu) for 16-bit inputs whose rows
// lie at 16-byte boundaries, with the head dimension and the element type
// at compile time (cuda.psaOutlier16Defines): the same offsets, bit for
// bit, in about half the instructions and with the block's loads all in
// flight at once.

#include "psa.cuh"
#include "psa_outlier.cuh"

// PSA_OD is D, a multiple of 64 up to 256; PSA_ODT the element type,
// DT_BF16 or DT_F16.
#ifndef PSA_OD
#define PSA_OD 128
#endif
#ifndef PSA_ODT
#define PSA_ODT DT_BF16
#endif
static_assert(PSA_OD % 64 == 0 && PSA_OD <= 256, "psa_outliers16: D a multiple of 64 up to 256");
static_assert(PSA_ODT == DT_BF16 || PSA_ODT == DT_F16, "psa_outliers16: 16-bit elements");

// PSO_W is a row's 32-bit words (two elements each) and the CTA's threads:
// a thread a word in the mean and spread, a multiple of 32. PSO_P is a
// row's 16-byte pieces, PSO_PW the staged rows' pitch in words
// (cuda.psaOutlier16Pitch): whole pieces, an odd number of them, so that
// the 8 rows that a quarter warp reads 16 bytes of at one offset lie in 8
// distinct 16-byte bank groups.
#define PSO_W (PSA_OD / 2)
#define PSO_P (PSO_W / 4)
#define PSO_PW ((PSO_P | 1) * 4)

// pso_stage issues the copies of the n rows from token lo of head h of
// batch b of x to xs (a row every PSO_PW words), 16 bytes a cp.async
// (PSO_W threads: thread t copies piece t % PSO_P of rows t / PSO_P, +4,
// +8, …, since PSO_W = 4·PSO_P), and commits them as one group.
__device__ __forceinline__ void pso_stage(const View& x, u32* xs, int b, int h, int lo, int n) {
	const int c = threadIdx.x % PSO_P, r = threadIdx.x / PSO_P;
	const long long rs = x.sn * 2; // a row's bytes
	const unsigned char* src = (const unsigned char*)x.ptr + ((long long)b * x.sb + (long long)h * x.sh + (long long)(lo + r) * x.sn) * 2 + c * 16;
	u32 dst = (u32)__cvta_generic_to_shared(xs + r * PSO_PW + c * 4);
#pragma unroll 4
	for (int j = r; j < n; j += 4) {
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
		src += 4 * rs;
		dst += 4 * PSO_PW * 4;
	}
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// pso_columns writes the mean and 1/v (psa_inv) of dimensions 2p and 2p+1
// of the staged block's n rows, p the thread (one staged word): summed in
// token order, two independent chains, the means and then the squared
// deviations, as outlierScores (bit for bit). NC, when not 0, is n at
// compile time: the loops unroll by 16 with no remainder, the loads at
// immediate offsets. (Whole, the compiler hoists every load: 255
// registers.)
template <int DT, int NC>
__device__ __forceinline__ void pso_columns(const u32* xs, int n_, float* mean, float* inv) {
	const int n = NC > 0 ? NC : n_;
	const float fn = (float)n; // exact
	const int p = threadIdx.x;
	const u32* col = xs + p;
	float s0 = 0.0f, s1 = 0.0f;
#pragma unroll(NC > 0 ? 16 : 8)
	for (int j = 0; j < n; j++) {
		const u32 v = col[j * PSO_PW];
		s0 = __fadd_rn(s0, psa_lo<DT>(v));
		s1 = __fadd_rn(s1, psa_hi<DT>(v));
	}
	const float m0 = __fdiv_rn(s0, fn), m1 = __fdiv_rn(s1, fn);
	float v0 = 0.0f, v1 = 0.0f;
#pragma unroll(NC > 0 ? 16 : 8)
	for (int j = 0; j < n; j++) {
		const u32 v = col[j * PSO_PW];
		const float y0 = __fsub_rn(psa_lo<DT>(v), m0), y1 = __fsub_rn(psa_hi<DT>(v), m1);
		v0 = __fadd_rn(v0, __fmul_rn(y0, y0));
		v1 = __fadd_rn(v1, __fmul_rn(y1, y1));
	}
	reinterpret_cast<float2*>(mean)[p] = make_float2(m0, m1);
	reinterpret_cast<float2*>(inv)[p] = make_float2(psa_inv(v0), psa_inv(v1));
}

// pso_rows writes the scores of tokens j, j + PSO_W, …, K of them, to z:
// each summed in dimension order, 8 dimensions a step, one 16-byte load of
// each row (conflict-free: PSO_PW) and four broadcast 16-byte loads of the
// means and inverses, shared by the K tokens.
template <int DT, int K>
__device__ __forceinline__ void pso_rows(const u32* xs, int j, const float* mean, const float* inv, u32* z) {
	const float4* m4 = reinterpret_cast<const float4*>(mean);
	const float4* i4 = reinterpret_cast<const float4*>(inv);
	const uint4* r[K];
	float sc[K];
#pragma unroll
	for (int k = 0; k < K; k++) r[k] = reinterpret_cast<const uint4*>(xs + (j + k * PSO_W) * PSO_PW), sc[k] = 0.0f;
#pragma unroll 4
	for (int q = 0; q < PSO_P; q++) {
		const float4 ma = m4[2 * q], mb = m4[2 * q + 1], ia = i4[2 * q], ib = i4[2 * q + 1];
#pragma unroll
		for (int k = 0; k < K; k++) {
			const uint4 w = r[k][q];
			float a = sc[k];
			a = psa_zterm(a, psa_lo<DT>(w.x), ma.x, ia.x);
			a = psa_zterm(a, psa_hi<DT>(w.x), ma.y, ia.y);
			a = psa_zterm(a, psa_lo<DT>(w.y), ma.z, ia.z);
			a = psa_zterm(a, psa_hi<DT>(w.y), ma.w, ia.w);
			a = psa_zterm(a, psa_lo<DT>(w.z), mb.x, ib.x);
			a = psa_zterm(a, psa_hi<DT>(w.z), mb.y, ib.y);
			a = psa_zterm(a, psa_lo<DT>(w.w), mb.z, ib.z);
			a = psa_zterm(a, psa_hi<DT>(w.w), mb.w, ib.w);
			sc[k] = a;
		}
	}
#pragma unroll
	for (int k = 0; k < K; k++) z[j + k * PSO_W] = __float_as_uint(sc[k]);
}

// pso_scores writes the outlier scores of the staged block's n rows to z
// as their float32 bits, the arithmetic of psa_outlier_scores (method/psa
// outlierScores, bit for bit): pso_columns (whole blocks of 128 or 64
// tokens unrolled by 16 with the trip count known), then pso_rows, two
// tokens a thread (j and j + PSO_W) where both are in the block, else one.
template <int DT>
__device__ __forceinline__ void pso_scores(const u32* xs, int n, float* mean, float* inv, u32* z) {
	if (n == 128) {
		pso_columns<DT, 128>(xs, n, mean, inv);
	} else if (n == 64) {
		pso_columns<DT, 64>(xs, n, mean, inv);
	} else {
		pso_columns<DT, 0>(xs, n, mean, inv);
	}
	__syncthreads();
	for (int j = threadIdx.x; j < n; j += 2 * PSO_W) {
		if (j + PSO_W < n) {
			pso_rows<DT, 2>(xs, j, mean, inv, z);
		} else {
			pso_rows<DT, 1>(xs, j, mean, inv, z);
		}
	}
	__syncthreads();
}

// psa_outliers16 is psa_outliers (same arguments less staged, same
// contract and offsets) for PSA_ODT elements, D = PSA_OD, rows at 16-byte
// boundaries (x.ptr 16-byte aligned; x.sb, x.sh and x.sn multiples of 8),
// PSO_W threads a CTA, one block each: the block staged by cp.async (no
// register round trip: every piece in flight at once), the scores by
// pso_scores (every thread busy in both passes), the m largest by
// psa_outlier_select. Dynamic shared memory (cuda.psaOutlier16Smem): bs
// rows of PSO_PW words, then 2·D + bs floats: the means, inverses and
// scores.
extern "C" __global__ void __launch_bounds__(PSO_W) psa_outliers16(const PlanArgs a, const PsaArgs s, View x, int side) {
	extern __shared__ __align__(16) unsigned char smem[];
	const int bs = side == 0 ? a.bq : a.bk, N = side == 0 ? a.Nq : a.Nk;
	u32* xs = (u32*)smem;
	float* mean = (float*)(xs + bs * PSO_PW); // 16-byte aligned: PSO_PW is a multiple of 4
	float* inv = mean + PSA_OD;
	u32* z = (u32*)(inv + PSA_OD); // 16-byte aligned: psa_count reads fours
	const int nb = (N + bs - 1) / bs;
	const int heads = side == 0 ? a.Hq : a.Hkv;
	const long long i = blockIdx.x;
	if (i >= (long long)a.B * heads * nb) return;
	const int blk = (int)(i % nb), bh = (int)(i / nb), b = bh / heads, h = bh % heads;
	const int lo = blk * bs, n = min(lo + bs, N) - lo;
	const int want = side == 0 ? s.sq : s.sk, m = min(side == 0 ? s.oq : s.ok, want);
	if (m <= 0 || want >= n) return;
	pso_stage(x, xs, b, h, lo, n);
	asm volatile("cp.async.wait_group 0;\n" ::: "memory");
	__syncthreads();
	pso_scores<PSA_ODT>(xs, n, mean, inv, z);
	// The m largest, as psa_outliers picks them.
	psa_outlier_select(z, n, m, (side == 0 ? s.qout : s.kout) + i * m);
}
