// The PSA planner's kernels but its scoring (psa.cuh says what each
// step does; psa_score is in plan_psa_score.cu).

#include "psa.cuh"

// ---- Go's math/rand/v2 PCG-DXSM and Rand.IntN (64-bit platforms) ----

struct Pcg {
	u64 hi, lo;
};

__device__ __forceinline__ u64 pcg_next(Pcg& p) {
	const u64 mulHi = 2549297995355413924ull, mulLo = 4865540595714422341ull;
	const u64 incHi = 6364136223846793005ull, incLo = 1442695040888963407ull;
	u64 hi = __umul64hi(p.lo, mulLo), lo = p.lo * mulLo;
	hi += p.hi * mulLo + p.lo * mulHi;
	u64 l2 = lo + incLo;
	u64 c = l2 < lo ? 1ull : 0ull;
	hi = hi + incHi + c;
	p.lo = l2;
	p.hi = hi;
	const u64 cheapMul = 0xda942042e4dd58b5ull;
	hi ^= hi >> 32;
	hi *= cheapMul;
	hi ^= hi >> 48;
	hi *= (l2 | 1ull);
	return hi;
}

// pcg_intn is Rand.IntN(n): a mask for powers of two, else Lemire's
// multiply with rejection, as rand.uint64n.
__device__ __forceinline__ u64 pcg_intn(Pcg& p, u64 n) {
	if ((n & (n - 1)) == 0) return pcg_next(p) & (n - 1);
	u64 x = pcg_next(p);
	u64 hi = __umul64hi(x, n), lo = x * n;
	if (lo < n) {
		u64 thresh = (0ull - n) % n;
		while (lo < thresh) {
			x = pcg_next(p);
			hi = __umul64hi(x, n);
			lo = x * n;
		}
	}
	return hi;
}

#include "psa_outlier.cuh"

// psa_outliers writes, per block of a side (0: queries, per (b, h, qb);
// 1: keys, per (b, kh, kb)), one CTA each, the offsets of the block's m
// most outlying tokens (m = s.oq or s.ok), largest score first, ties to
// the lower offset: the first m of Sampling's draws (method/psa,
// outlierScores and estimator.draw; our extension of PSA §3.3.1). The
// scores are the CPU's canonical float32, bit for bit: the mean and the
// squared deviations summed in token order per dimension, one division
// each for the mean and 1/v (v where v is not > 0), the score summed in
// dimension order per token (a thread a token), every product and
// difference rounded on its own (the _rn intrinsics: no contraction into
// FMAs). With staged set the CTA first copies its block to shared memory
// as it is (coalesced, the rows at psa_outlier_pitch), so that each
// element is read from memory once; else it reads x directly (blocks too
// large to stage). psa_outlier_select then picks the m largest (scores
// compared as their bits, which order as the numbers do since they are
// ≥ +0 for inputs below 2⁶³ in magnitude: psa_count). Blocks that
// Sampling takes whole (n ≤ the draw) are left alone. Dynamic shared
// memory: 2·D + bs floats (bs the side's block size; D rounded up to a
// multiple of 4), then, staged, bs rows of psa_outlier_pitch words. 16-bit
// inputs with 16-byte rows and D a multiple of 64 up to 256 take
// psa_outliers16 instead (plan_psa_outlier.cu).
extern "C" __global__ void __launch_bounds__(128) psa_outliers(const PlanArgs a, const PsaArgs s, View x, int side, int staged) {
	extern __shared__ __align__(16) unsigned char smem[];
	const int bs = side == 0 ? a.bq : a.bk, N = side == 0 ? a.Nq : a.Nk;
	const int Dp = (a.D + 3) & ~3;
	float* mean = (float*)smem;
	float* inv = mean + Dp;       // 16-byte aligned: the score pass reads fours
	u32* z = (u32*)(inv + Dp);    // 16-byte aligned: psa_count reads fours
	u32* xs = z + bs;
	const int nb = (N + bs - 1) / bs;
	const int heads = side == 0 ? a.Hq : a.Hkv;
	const long long i = blockIdx.x;
	if (i >= (long long)a.B * heads * nb) return;
	const int blk = (int)(i % nb), bh = (int)(i / nb), b = bh / heads, h = bh % heads;
	const int lo = blk * bs, n = min(lo + bs, N) - lo;
	const int want = side == 0 ? s.sq : s.sk, m = min(side == 0 ? s.oq : s.ok, want);
	if (m <= 0 || want >= n) return;
	const int pw = psa_outlier_pitch(a.D, x.dtype);
	if (!staged) {
		psa_outlier_scores<0, 0>(x, xs, pw, b, h, lo, n, a.D, mean, inv, z);
	} else {
		psa_stage(x, xs, pw, b, h, lo, n, a.D);
		__syncthreads();
		switch (x.dtype) {
		case DT_F32:
			psa_outlier_scores<DT_F32, 0>(x, xs, pw, b, h, lo, n, a.D, mean, inv, z);
			break;
		case DT_F16:
			psa_outlier_dispatch<DT_F16>(x, xs, pw, b, h, lo, n, a.D, mean, inv, z);
			break;
		default:
			psa_outlier_dispatch<DT_BF16>(x, xs, pw, b, h, lo, n, a.D, mean, inv, z);
		}
	}
	// The m largest, largest first, ties to the lower offset: the offsets
	// estimator.draw's selection sort swaps into place (it compares
	// offsets, not positions, so the order does not depend on its swaps).
	psa_outlier_select(z, n, m, (side == 0 ? s.qout : s.kout) + i * m);
}

// psa_tokens writes the first tokens of the rows (side 0: queries, per
// (b, h, qb)) or columns (side 1: keys, per (b, kh, kb)) of one block per
// thread: Sampling's draw (estimator.draw with the stream of
// estimator.rng: psa_outliers' m offsets swapped into place first, then
// the partial Fisher–Yates shuffle from position m), or the Stride-token
// groups.
extern "C" __global__ void psa_tokens(const PlanArgs a, const PsaArgs s, int side) {
	const int nb = side == 0 ? (a.Nq + a.bq - 1) / a.bq : (a.Nk + a.bk - 1) / a.bk;
	const int heads = side == 0 ? a.Hq : a.Hkv;
	const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (long long)a.B * heads * nb) return;
	const int blk = (int)(i % nb), bh = (int)(i / nb), b = bh / heads, h = bh % heads;
	const int bs = side == 0 ? a.bq : a.bk, N = side == 0 ? a.Nq : a.Nk;
	const int lo = blk * bs, n = min(lo + bs, N) - lo;
	const int per = side == 0 ? s.RQ : s.CP;
	int* out = (side == 0 ? s.qtok : s.ktok) + i * per;
	int cnt = 0;
	if (s.est == 0) {
		const int want = side == 0 ? s.sq : s.sk;
		int perm[256];
		for (int j = 0; j < n; j++) perm[j] = j;
		if (want >= n) {
			cnt = n;
		} else {
			Pcg p;
			p.hi = s.seed;
			p.lo = ((u64)side << 60) ^ ((u64)b << 40) ^ ((u64)h << 20) ^ (u64)blk;
			const int m = min(side == 0 ? s.oq : s.ok, want);
			const int* top = (side == 0 ? s.qout : s.kout) + i * max(m, 0);
			// top[j] sits where the swaps before it moved it: a swap at j'
			// moves only what sat at j' (to kpos[j'], where top[j'] was),
			// so follow those from top[j] instead of scanning perm.
			int kpos[256];
			for (int j = 0; j < m; j++) {
				int k = top[j];
				for (int q = 0; q < j; q++) k = k == q ? kpos[q] : k;
				k = k >= j && k < n ? k : j; // always, with psa_outliers' distinct offsets in [0, n): no access past perm
				kpos[j] = k;
				int x = perm[j];
				perm[j] = perm[k];
				perm[k] = x;
			}
			for (int j = max(m, 0); j < want; j++) {
				int k = j + (int)pcg_intn(p, (u64)(n - j));
				int x = perm[j];
				perm[j] = perm[k];
				perm[k] = x;
			}
			cnt = want;
		}
		for (int j = 0; j < per; j++) out[j] = j < cnt ? lo + perm[j] : -1;
	} else {
		for (int j = 0; j < per; j++) out[j] = j * s.S < n ? lo + j * s.S : -1;
	}
}

// psa_gather writes the 16-bit operand rows, one thread per (row, element
// pair); side 0 the query rows, 1 the key columns.
extern "C" __global__ void psa_gather(const PlanArgs a, const PsaArgs s, View x, int side) {
	const int nb = side == 0 ? (a.Nq + a.bq - 1) / a.bq : (a.Nk + a.bk - 1) / a.bk;
	const int heads = side == 0 ? a.Hq : a.Hkv;
	const int per = side == 0 ? s.RQ : s.CP;
	const int pw = s.Wp / 8; // 8-element pieces of a row (Wp is a multiple of 64)
	const long long rows = (long long)a.B * heads * nb * per;
	const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows * pw) return;
	// A thread writes one piece: the row's indices are worked out once for
	// 8 elements (one per element, in 64-bit divisions, made this gather
	// cost 295 M instructions at 32K, H100 ncu).
	const long long r = i / pw;
	const int e0 = (int)(i - r * pw) * 8;
	const long long hb_ = r / per;
	const int blk = (int)(hb_ % nb), bh = (int)(hb_ / nb);
	const int b = bh / heads, h = bh % heads;
	const int t = (side == 0 ? s.qtok : s.ktok)[r];
	const int bs = side == 0 ? a.bq : a.bk, N = side == 0 ? a.Nq : a.Nk;
	const int bhi = min((blk + 1) * bs, N);
	const long long at = r * s.Wp + e0;
	if (x.dtype == DT_BF16 && !s.split && a.D % 8 == 0 && e0 + 8 <= s.W) {
		// bf16 rows: the piece is 8 consecutive elements of one token, moved
		// as they are (the path below rounds each exact value to itself).
		uint4 v = make_uint4(0u, 0u, 0u, 0u);
		const int slot = e0 / a.D, d = e0 - slot * a.D;
		const int tok = s.est == 0 ? t : (side == 0 ? t + slot : t + s.S - 1 - slot);
		if (t >= 0 && tok < bhi) {
			const u16* src = (const u16*)x.ptr + (long long)b * x.sb + (long long)h * x.sh + (long long)tok * x.sn + d;
			if (((unsigned long long)src & 15) == 0) {
				v = *reinterpret_cast<const uint4*>(src);
			} else {
				u32 w[4];
#pragma unroll
				for (int k = 0; k < 4; k++) w[k] = (u32)src[2 * k] | ((u32)src[2 * k + 1] << 16);
				v = make_uint4(w[0], w[1], w[2], w[3]);
			}
		}
		*reinterpret_cast<uint4*>((side == 0 ? s.qh : s.kh) + at) = v;
		return;
	}
	u32 hw[4], lw[4];
#pragma unroll
	for (int k = 0; k < 8; k += 2) {
		float v[2];
#pragma unroll
		for (int u = 0; u < 2; u++) {
			const int e = e0 + k + u;
			v[u] = 0.0f;
			if (t >= 0 && e < s.W) {
				const int slot = e / a.D, d = e - slot * a.D;
				const int tok = s.est == 0 ? t : (side == 0 ? t + slot : t + s.S - 1 - slot);
				if (tok < bhi) v[u] = load(x, b, h, tok, d);
			}
		}
		u32 hb;
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hb) : "f"(v[1]), "f"(v[0]));
		hw[k / 2] = hb;
		if (s.split) {
			u32 lb;
			asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(lb) : "f"(v[1] - __uint_as_float(hb & 0xffff0000u)), "f"(v[0] - __uint_as_float(hb << 16)));
			lw[k / 2] = lb;
		}
	}
	*reinterpret_cast<uint4*>((side == 0 ? s.qh : s.kh) + at) = make_uint4(hw[0], hw[1], hw[2], hw[3]);
	if (s.split) *reinterpret_cast<uint4*>((side == 0 ? s.ql : s.kl) + at) = make_uint4(lw[0], lw[1], lw[2], lw[3]);
}

// psa_caps writes the similarity cap of one (b, kh, kb) per warp
// (similarityCaps): lane i computes pair i's cosine for each level in
// canonical float64 (exact products, sums in dimension order, IEEE sqrt
// and division), and lane 0 averages them in pair order.
extern "C" __global__ void psa_caps(const PlanArgs a, const PsaArgs s, View k) {
	__shared__ double cosv[8][128];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int KB = a.stride;
	const long long item = (long long)blockIdx.x * 8 + warp;
	if (item >= (long long)a.B * a.Hkv * KB) return;
	const int kb = (int)(item % KB), bkh = (int)(item / KB), b = bkh / a.Hkv, kh = bkh % a.Hkv;
	const int lo = kb * a.bk, n = min(lo + a.bk, a.Nk) - lo;
	int lv = 1;
	for (int h = 2; h <= s.H; h++) {
		const int size = 1 << (h - 1);
		const int groups = (n + size - 1) / size;
		for (int gi = lane; gi < groups; gi += 32) {
			const int g0 = gi * size, g1 = min(g0 + size, n) - 1;
			double c = 0.0;
			if (g1 != g0) {
				double ab = 0.0, aa = 0.0, bb = 0.0;
				for (int d = 0; d < a.D; d++) {
					const double x = (double)load(k, b, kh, lo + g0, d), y = (double)load(k, b, kh, lo + g1, d);
					ab = add64(ab, mul64(x, y));
					aa = add64(aa, mul64(x, x));
					bb = add64(bb, mul64(y, y));
				}
				if (aa == 0.0 && bb == 0.0) c = 1.0;
				else if (aa == 0.0 || bb == 0.0) c = 0.0;
				else c = __ddiv_rn(ab, __dsqrt_rn(mul64(aa, bb)));
			}
			cosv[warp][gi] = c;
		}
		__syncwarp();
		if (lane == 0) {
			double sum = 0.0;
			int pairs = 0;
			for (int gi = 0; gi < groups; gi++) {
				const int g0 = gi * size, g1 = min(g0 + size, n) - 1;
				if (g1 == g0) continue;
				sum = add64(sum, cosv[warp][gi]);
				pairs++;
			}
			const double sim = pairs == 0 ? 1.0 : __ddiv_rn(sum, (double)pairs);
			if (sim > s.sim[h - 2]) lv = h;
		}
		__syncwarp();
	}
	if (lane == 0) s.cap[item] = (unsigned char)lv;
}

#include "psa_sort.cuh"

// PSA_SORT_E is the most positions a thread of psa_assign sorts in
// registers (8: rows of up to 8·PSA_AT blocks, 64 registers; 16 and 32
// about 120 and 220 registers, which the host compiles only for plans
// whose rows are longer than 8·256 blocks: psaSortPositions).
#ifndef PSA_SORT_E
#define PSA_SORT_E 8
#endif

// PSA_SUM_CHUNK is the chunk of psa_assign's float64 sums (method/psa's
// sumChunk): positions summed in order on one thread.
#define PSA_SUM_CHUNK 32

// psa_assign assigns one plan row's levels per CTA (assign, then the cap
// and the causal rule of Planner.Plan) and writes its listed blocks and
// their levels. The importance sits in shared memory; the two sums whose
// order fixes their bits (the total in key order, the preceding mass in
// sorted order) run by chunks of PSA_SUM_CHUNK, a chunk a thread, then the
// chunks' sums on one thread. The CTA is small (PSA_AT threads: 64, or
// one per 8 blocks of the plan's longest row up to 256) so that a
// multiprocessor holds many rows at once while the sort of the longest
// stays in 64 registers. Dynamic shared memory: 21·n2 + 8·n2/PSA_SUM_CHUNK
// bytes (psaAssignSmem).
extern "C" __global__ void __launch_bounds__(PSA_AT) psa_assign(const PlanArgs a, const PsaArgs s) {
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ double stot;
	const int tid = threadIdx.x, lane = tid & 31;
	const long long row = blockIdx.x;
	const int KB = a.stride, qb = (int)(row % a.q_blocks), bh = (int)(row / a.q_blocks);
	const int b = bh / a.Hq, h = bh % a.Hq, kh = h / (a.Hq / a.Hkv);
	const int n = visible_blocks(a, qb);
	int n2 = 1;
	while (n2 < n) n2 <<= 1;
	n2 = max(n2, 64); // psa_sort_rows' least (assignSmem holds at least 64 entries)
	u64* skey = (u64*)smem;           // sort keys; then the weights in sorted order
	double* simp = (double*)(skey + n2); // importance by block; then the preceding masses
	int* sidx = (int*)(simp + n2);
	double* csum = (double*)(sidx + n2); // n2 / PSA_SUM_CHUNK chunk sums (sidx + n2 is 8-byte aligned: n2 ≥ 64)
	unsigned char* lv = (unsigned char*)(csum + n2 / PSA_SUM_CHUNK);
	const double* imp = s.imp + row * KB;
	for (int i = tid; i < n2; i += PSA_AT) {
		const double x = i < n ? imp[i] : 0.0;
		simp[i] = x;
		skey[i] = i < n ? (u64)__double_as_longlong(x) : 0ull;
		sidx[i] = i < n ? i : 0x7fffffff;
	}
	// Bitonic sort: (key, index) is a strict order, so the network's
	// result is the stable sort's. Rows of PSA_AT to PSA_AT·PSA_SORT_E
	// positions sort in registers (psa_sort_rows, psa_sort.cuh: shuffles,
	// a shared-memory step per warp bit); shorter and longer ones in
	// shared memory, where a thread takes compare-exchange pairs, not
	// indices: pair q is i = q with a 0 bit inserted at j's bit, and i | j,
	// so every iteration does work.
	const bool inregs = n2 >= PSA_AT && n2 <= PSA_AT * PSA_SORT_E;
	switch (inregs ? n2 / PSA_AT : 0) {
	case 1: psa_sort_rows<1>(skey, sidx); break;
	case 2: psa_sort_rows<2>(skey, sidx); break;
	case 4: psa_sort_rows<4>(skey, sidx); break;
	case 8: psa_sort_rows<8>(skey, sidx); break;
#if PSA_SORT_E >= 16
	case 16: psa_sort_rows<16>(skey, sidx); break;
#endif
#if PSA_SORT_E >= 32
	case 32: psa_sort_rows<32>(skey, sidx); break;
#endif
	default: __syncthreads();
	}
	for (int kq = 2; kq <= (inregs ? 1 : n2); kq <<= 1) {
		for (int j = kq >> 1; j > 0; j >>= 1) {
			for (int q = tid; q < n2 / 2; q += PSA_AT) {
				const int i = ((q & ~(j - 1)) << 1) | (q & (j - 1)), ixj = i | j;
				const bool up = (i & kq) == 0;
				const u64 ki = skey[i], kx = skey[ixj];
				const int ii = sidx[i], ix = sidx[ixj];
				if (psa_precedes(kx, ix, ki, ii) == up) {
					skey[i] = kx;
					skey[ixj] = ki;
					sidx[i] = ix;
					sidx[ixj] = ii;
				}
			}
			__syncthreads();
		}
	}
	if (s.rule == 0) {
		// The total in key order and the preceding masses in sorted order,
		// each by chunks of PSA_SUM_CHUNK: a chunk summed in order on its
		// thread, the chunks' sums then in order on thread 0 (the CPU's
		// chunkedSum and chunked prefix in method/psa/levels.go, bit for
		// bit), so that no chain is longer than a chunk plus the chunks.
		const int nc = (n + PSA_SUM_CHUNK - 1) / PSA_SUM_CHUNK;
		for (int c = tid; c < nc; c += PSA_AT) {
			const int p1 = min(n, (c + 1) * PSA_SUM_CHUNK);
			double x = 0.0;
			for (int i = c * PSA_SUM_CHUNK; i < p1; i++) x = add64(x, simp[i]);
			csum[c] = x;
		}
		__syncthreads();
		if (tid == 0) {
			double total = 0.0;
			for (int c = 0; c < nc; c++) total = add64(total, csum[c]);
			stot = total;
		}
		__syncthreads();
		const double total = stot;
		double* wsorted = (double*)skey;
		for (int p = tid; p < n; p += PSA_AT) wsorted[p] = total > 0.0 ? __ddiv_rn(simp[sidx[p]], total) : __ddiv_rn(1.0, (double)n);
		__syncthreads();
		for (int c = tid; c < nc; c += PSA_AT) {
			const int p1 = min(n, (c + 1) * PSA_SUM_CHUNK);
			double x = 0.0;
			for (int p = c * PSA_SUM_CHUNK; p < p1; p++) x = add64(x, wsorted[p]);
			csum[c] = x;
		}
		__syncthreads();
		if (tid == 0) { // the chunks' preceding masses, in place
			double before = 0.0;
			for (int c = 0; c < nc; c++) {
				const double x = csum[c];
				csum[c] = before;
				before = add64(before, x);
			}
		}
		__syncthreads();
		for (int c = tid; c < nc; c += PSA_AT) {
			const int p1 = min(n, (c + 1) * PSA_SUM_CHUNK);
			const double base = csum[c];
			double x = 0.0;
			for (int p = c * PSA_SUM_CHUNK; p < p1; p++) {
				const double w = wsorted[p];
				simp[p] = add64(base, x);
				x = add64(x, w);
			}
		}
		__syncthreads();
	}
	for (int p = tid; p < n; p += PSA_AT) {
		int l = 0;
		for (int x = 0; x < s.H; x++) {
			const bool in = s.rule == 0 ? (s.cuts[x] >= 1.0 || simp[p] < s.cuts[x])
			                            : p < (int)ceil(__dsub_rn(mul64(s.cuts[x], (double)n), 1e-9));
			if (in) {
				l = x + 1;
				break;
			}
		}
		lv[sidx[p]] = (unsigned char)l;
	}
	__syncthreads();
	const int off = a.Nk - a.Nq, qlo = qb * a.bq;
	for (int kb = tid; kb < n; kb += PSA_AT) {
		int l = lv[kb];
		if (l == 0) continue;
		if (s.cap) l = min(l, (int)s.cap[(b * a.Hkv + kh) * KB + kb]);
		const int khi = min((kb + 1) * a.bk, a.Nk);
		if (a.causal && khi - 1 > qlo + off) l = 1;
		lv[kb] = (unsigned char)l;
	}
	__syncthreads();
	if (tid >= 32) return;
	int cnt = 0;
	for (int base = 0; base < n; base += 32) {
		const int kb = base + lane;
		const bool f = kb < n && lv[kb] != 0;
		const unsigned m = __ballot_sync(0xffffffffu, f);
		if (f) {
			const int pos = cnt + __popc(m & ((1u << lane) - 1u));
			a.lists[row * a.stride + pos] = kb;
			s.lvl[row * a.stride + pos] = lv[kb];
		}
		cnt += __popc(m);
	}
	if (lane == 0) a.row_len[row] = cnt;
}

// psa_levels copies each row's levels to its CSR entries, a CTA per row.
extern "C" __global__ void psa_levels(const PlanArgs a, const PsaArgs s, const int* row_start, unsigned char* level) {
	const long long row = blockIdx.x;
	const int lo = row_start[row], n = row_start[row + 1] - lo;
	for (int i = threadIdx.x; i < n; i += blockDim.x) level[lo + i] = s.lvl[row * a.stride + i];
}
