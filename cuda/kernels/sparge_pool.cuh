// sparge_pool, the first of the sparge device planner's kernels
// (plan_sparge.cu includes this file): per block of tokens, the mean token
// (its float32 sum in token order over the count in float64), the CPU's
// bits, and the self-similarity CosSim in float32
// (SpargeAttn §3.2; sparge.blockStats on the CPU). One thread block of
// POOL_WARPS warps per block of tokens: the tokens are staged in shared
// memory, each warp finds its tokens' 1/|x|, and thread d sums column d.

#define TG 8         // tokens a pool warp loads at a time (sum8_transposed takes 8)
#define POOL_WARPS 4 // sparge_pool's warps a block (one block of tokens): cuda.spargePoolWarps

// Raw is the storage type of an input type.
template <int DT> struct Raw {
	typedef u16 T;
};
template <> struct Raw<DT_F32> {
	typedef float T;
};

// sum8_transposed reduces eight per-lane partials v[t] (token t) over the
// warp with 9 shuffles instead of 40: halves of the vector are exchanged at
// xor 16, 8 and 4 (lane bit b keeps the half its bit selects), then xor 2
// and 1 finish. Lanes 4t..4t+3 end with token t's sum (t = lane >> 2).
// float32: the order of the sum is immaterial (see pool_block).
__device__ __forceinline__ float sum8_transposed(const float (&v)[8], int lane) {
	float w[4], y[2];
	bool h4 = lane & 16, h3 = lane & 8, h2 = lane & 4;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		float send = h4 ? v[j] : v[j + 4], keep = h4 ? v[j + 4] : v[j];
		w[j] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
	}
#pragma unroll
	for (int j = 0; j < 2; j++) {
		float send = h3 ? w[j] : w[j + 2], keep = h3 ? w[j + 2] : w[j];
		y[j] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
	}
	float send = h2 ? y[0] : y[1], keep = h2 ? y[1] : y[0];
	float z = keep + __shfl_xor_sync(0xffffffffu, send, 4);
	z += __shfl_xor_sync(0xffffffffu, z, 2);
	return z + __shfl_xor_sync(0xffffffffu, z, 1);
}

// NW is the 32-bit words of one token a pool lane holds: its NL elements,
// two to a word for the 16-bit types.
template <int DT> struct Words {
	static constexpr int NW = DT == DT_F32 ? NL : (NL + 1) / 2;
};

// load_token loads a lane's elements of one token, dimensions lane·NL …
// lane·NL + NL − 1 (those below SD; zeros beyond), into w: by one vector
// load when vec (SD = 32·NL, NL 2 or 4, and the row aligned for it), else
// element by element.
template <int DT>
__device__ __forceinline__ void load_token(const typename Raw<DT>::T* row, int lane, bool vec, u32 (&w)[Words<DT>::NW]) {
	if constexpr (DT == DT_F32) {
		if constexpr (NL == 4) {
			if (vec) {
				uint4 v = *(const uint4*)(row + 4 * lane);
				w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
				return;
			}
		} else if constexpr (NL == 2) {
			if (vec) {
				uint2 v = *(const uint2*)(row + 2 * lane);
				w[0] = v.x, w[1] = v.y;
				return;
			}
		}
#pragma unroll
		for (int i = 0; i < NL; i++) {
			int d = lane * NL + i;
			w[i] = d < SD ? __float_as_uint(row[d]) : 0u;
		}
	} else {
		if constexpr (NL == 4) {
			if (vec) {
				uint2 v = *(const uint2*)(row + 4 * lane);
				w[0] = v.x, w[1] = v.y;
				return;
			}
		} else if constexpr (NL == 2) {
			if (vec) {
				w[0] = *(const u32*)(row + 2 * lane);
				return;
			}
		}
#pragma unroll
		for (int j = 0; j < Words<DT>::NW; j++) w[j] = 0;
#pragma unroll
		for (int i = 0; i < NL; i++) {
			int d = lane * NL + i;
			u32 e = d < SD ? (u32)row[d] : 0u;
			w[i >> 1] |= i & 1 ? e << 16 : e;
		}
	}
}

// elem32 is element i of a lane's token words as float32 (exact).
template <int DT> __device__ __forceinline__ float elem32(const u32 (&w)[Words<DT>::NW], int i) {
	if constexpr (DT == DT_F32)
		return __uint_as_float(w[i]);
	else if constexpr (DT == DT_F16)
		return f16_to_f32((u16)(i & 1 ? w[i >> 1] >> 16 : w[i >> 1]));
	else
		return __uint_as_float(i & 1 ? w[i >> 1] & 0xffff0000u : w[i >> 1] << 16);
}

// raw32 converts one stored element to float32 (exactly).
template <int DT> __device__ __forceinline__ float raw32(typename Raw<DT>::T r) {
	if constexpr (DT == DT_F32)
		return r;
	else if constexpr (DT == DT_F16)
		return f16_to_f32(r);
	else
		return bf16_to_f32(r);
}

#define POOL_BYTES 32768 // a pool block's staged tokens: 128 of bf16/f16 D 128, 64 of f32

// stage_token copies a lane's elements of one token (see load_token) from
// global row to shared dst: by one cp.async when vec, else element by
// element.
template <int DT>
__device__ __forceinline__ void stage_token(typename Raw<DT>::T* dst, const typename Raw<DT>::T* row, int lane, bool vec) {
	typedef typename Raw<DT>::T T;
	constexpr int BYTES = NL * sizeof(T);
	if constexpr (BYTES == 4 || BYTES == 8 || BYTES == 16) {
		if (vec) {
			u32 d = (u32)__cvta_generic_to_shared(dst + lane * NL);
			asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(row + lane * NL), "n"(BYTES));
			return;
		}
	}
#pragma unroll
	for (int i = 0; i < NL; i++) {
		int c = lane * NL + i;
		if (c < SD) dst[c] = row[c];
	}
}

#define POOL_ROUND 256 // the most tokens a pool block stages at a time

// column_sums adds the n staged tokens of one column (col, stride SD) to
// msum, their float32 sum in token order (the CPU's bits), and to usum,
// each times its token's 1/|x| from inv, or through float64 by inv64
// where inv is NaN (|x|² outside float32's safe range; odd is set when any
// token is, and turns the unrolled loop off).
template <int DT, typename T>
__device__ __forceinline__ void column_sums(const T* col, int n, bool odd, const float* inv, const double* inv64, float& msum, float& usum) {
	int t = 0;
	if (!odd)
		for (; t + 8 <= n; t += 8) {
			float v[8], iv[8];
			*(float4*)iv = *(const float4*)(inv + t);
			*(float4*)(iv + 4) = *(const float4*)(inv + t + 4);
#pragma unroll
			for (int u = 0; u < 8; u++) v[u] = raw32<DT>(col[(t + u) * SD]);
#pragma unroll
			for (int u = 0; u < 8; u++) {
				msum = __fadd_rn(msum, v[u]);
				usum = fmaf(v[u], iv[u], usum);
			}
		}
	for (; t < n; t++) {
		float v = raw32<DT>(col[t * SD]), iv = inv[t];
		msum = __fadd_rn(msum, v);
		if (iv == iv) usum = fmaf(v, iv, usum);
		else usum += (float)mul64((double)v, inv64[t]);
	}
}

// column_mean is column d's mean over tokens [lo, hi) of the head at x
// (token stride sn), from msum, its float32 sum in token order: msum over
// the count in float64, or, where msum overflowed (inputs near float32's
// limit), the float64 sum in token order read again from global memory
// (sparge.blockStats and columnSum64 on the CPU).
template <int DT>
__device__ __forceinline__ double column_mean(float msum, const typename Raw<DT>::T* x, long long sn, int lo, int hi, int d) {
	double s = msum;
	if (isinf(msum)) {
		s = 0;
		for (int n = lo; n < hi; n++) s = add64(s, (double)raw32<DT>(x[(long long)n * sn + d]));
	}
	return s / (double)(hi - lo);
}

// PoolShared is sparge_pool's shared memory: the staged tokens, and each
// staged token's 1/|x| (inv; NaN marks a token whose float32 |x|² left
// [2^-100, 2^100], whose 1/|x| is inv64, in float64, 0 for a zero token).
struct PoolShared {
	__align__(16) unsigned char tile[POOL_BYTES];
	__align__(16) float inv[POOL_ROUND];
	double inv64[POOL_ROUND];
	double red[POOL_WARPS];
	int odd; // some staged token's inv is NaN
};

// pool_block pools tokens [lo, hi) of one head with one block of
// POOL_WARPS warps, x pointing at the head's token 0, sn the token stride.
// Tokens are staged in sh.tile, up to POOL_BYTES at a time, each warp
// copying its share and finding its tokens' 1/|x|: |x|² in float32 and
// rsqrtf, or in float64 for a token whose float32 |x|² leaves [2^-100,
// 2^100] (a zero token, underflow, overflow). Then thread d adds
// dimension d of every staged token, in token order, to msum, Σ_n x[n, d]
// in float32, the CPU's bits (sparge.blockStats), and x̂[n, d] = x[n, d]/|x|
// to usum in float32. usum's error is bounded by spargeSimTol in
// cuda/selftest/cases_sparge.go, which the self-test's judge allows; the
// bound holds for any order of the float32 sums.
//
// One warp a block of tokens, reading its tokens in sequence, took 61 µs
// at 8K (H100, Hq 32, Hkv 8, D 128; about 27 µs reads Q and K once),
// whatever was tried within that shape (vector loads, four batches in
// flight): its per-token branches and shuffles, not its loads, bounded it.
template <int DT>
__device__ __forceinline__ void pool_block(const typename Raw<DT>::T* x, long long sn, int lo, int hi, PoolShared& sh, float& msum,
                                           float& usum) {
	typedef typename Raw<DT>::T T;
	constexpr int NW = Words<DT>::NW;
	constexpr int FIT = POOL_BYTES / (SD * (int)sizeof(T)), CAP = FIT < POOL_ROUND ? FIT : POOL_ROUND;
	constexpr int PER = CAP / (POOL_WARPS * TG) * TG, ROUND = PER * POOL_WARPS;
	static_assert(PER > 0, "pool_block: a warp stages at least one batch");
	T* tile = (T*)sh.tile;
	int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	constexpr bool svec = SD == 32 * NL && (NL == 2 || NL == 4); // shared rows align for load_token
	bool vec = svec && (unsigned long long)x % (NL * sizeof(T)) == 0 && sn % NL == 0;
	msum = 0, usum = 0;
	for (int r0 = lo; r0 < hi; r0 += ROUND) {
		int rn = min(ROUND, hi - r0), t0 = warp * PER, t1 = min(t0 + PER, rn);
		for (int t = t0; t < t1; t++) stage_token<DT>(tile + t * SD, x + (long long)(r0 + t) * sn, lane, vec);
		asm volatile("cp.async.wait_all;\n" ::: "memory");
		__syncwarp();
		for (int c0 = t0; c0 < t1; c0 += TG) {
			int cn = min(TG, t1 - c0);
			float nn[TG];
#pragma unroll
			for (int t = 0; t < TG; t++) {
				u32 raw[NW];
				if (t < cn) {
					load_token<DT>(tile + (c0 + t) * SD, lane, svec, raw);
				} else {
#pragma unroll
					for (int j = 0; j < NW; j++) raw[j] = 0;
				}
				nn[t] = 0;
#pragma unroll
				for (int i = 0; i < NL; i++) {
					float f = elem32<DT>(raw, i);
					nn[t] = fmaf(f, f, nn[t]);
				}
			}
			float mine = sum8_transposed(nn, lane); // token lane >> 2's |x|²
			bool bad = !(mine >= 0x1p-100f && mine <= 0x1p100f);
			int t = lane >> 2;
			if ((lane & 3) == 0 && t < cn) sh.inv[c0 + t] = bad ? __int_as_float(0x7fc00000) : rsqrtf(mine);
			unsigned badt = __ballot_sync(0xffffffffu, bad && t < cn); // token t's flag at bit 4t
			while (badt) { // rare: |x|² in float64, token by token
				int u = (__ffs(badt) - 1) >> 2;
				badt &= ~(15u << (4 * u));
				u32 raw[NW];
				load_token<DT>(tile + (c0 + u) * SD, lane, svec, raw);
				double p = 0;
#pragma unroll
				for (int i = 0; i < NL; i++) {
					double f = elem32<DT>(raw, i);
					p = add64(p, mul64(f, f));
				}
				double n64 = warp_sum(p);
				if (lane == 0) sh.inv64[c0 + u] = n64 != 0 ? 1.0 / sqrt(n64) : 0.0, sh.odd = 1;
			}
		}
		__syncthreads();
		if (tid < SD) {
			column_sums<DT>(tile + tid, rn, sh.odd, sh.inv, sh.inv64, msum, usum);
		}
		__syncthreads(); // the next round overwrites the tile
	}
}

// sparge_pool: per block of tokens [lo, hi) of one head, mean[d] =
// (Σ_n x[n,d])/cnt, the CPU's bits (column_mean), and CosSim = |Σ_n x̂_n|²/cnt²
// (sparge.blockStats) within spargeSimTol of the CPU's, one thread block
// of POOL_WARPS warps per block of tokens (pool_block). Task t =
// blockIdx.x < B·Hq·q_blocks is query row t = (b·Hq + h)·q_blocks + qb: it
// writes qm[t·SD + d] = mean[d]·scale and qsim[t]; the others are key
// blocks: kmt[((b·Hkv + kvh)·nkb + kb)·SD + d] = mean[d] and
// ksim[(b·Hkv + kvh)·nkb + kb].
extern "C" __global__ void __launch_bounds__(32 * POOL_WARPS)
    sparge_pool(PlanArgs a, View q, View k, double* qm, double* qsim, double* kmt, double* ksim) {
	__shared__ PoolShared sh;
	int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	int nkb = (a.Nk + a.bk - 1) / a.bk;
	long long nq = (long long)a.B * a.Hq * a.q_blocks;
	long long task = blockIdx.x;
	if (task >= nq + (long long)a.B * a.Hkv * nkb) return;
	bool isq = task < nq;
	int b, h, lo, hi;
	if (isq) {
		b = (int)(task / ((long long)a.Hq * a.q_blocks));
		h = (int)(task / a.q_blocks % a.Hq);
		int qb = (int)(task % a.q_blocks);
		lo = qb * a.bq, hi = min(lo + a.bq, a.Nq);
	} else {
		long long t = task - nq;
		b = (int)(t / ((long long)a.Hkv * nkb));
		h = (int)(t / nkb % a.Hkv);
		int kb = (int)(t % nkb);
		lo = kb * a.bk, hi = min(lo + a.bk, a.Nk);
	}
	const void* ptr = isq ? q.ptr : k.ptr;
	long long sn = isq ? q.sn : k.sn, off = (long long)b * (isq ? q.sb : k.sb) + (long long)h * (isq ? q.sh : k.sh);
	int dt = isq ? q.dtype : k.dtype;
	if (tid == 0) sh.odd = 0;
	__syncthreads();
	float msum, usum;
	double mean = 0;
	if (dt == DT_BF16) {
		pool_block<DT_BF16>((const u16*)ptr + off, sn, lo, hi, sh, msum, usum);
		if (tid < SD) mean = column_mean<DT_BF16>(msum, (const u16*)ptr + off, sn, lo, hi, tid);
	} else if (dt == DT_F16) {
		pool_block<DT_F16>((const u16*)ptr + off, sn, lo, hi, sh, msum, usum);
		if (tid < SD) mean = column_mean<DT_F16>(msum, (const u16*)ptr + off, sn, lo, hi, tid);
	} else {
		pool_block<DT_F32>((const float*)ptr + off, sn, lo, hi, sh, msum, usum);
		if (tid < SD) mean = column_mean<DT_F32>(msum, (const float*)ptr + off, sn, lo, hi, tid);
	}
	double s = tid < SD ? (double)usum * (double)usum : 0; // products of floats are exact in float64
	s = warp_sum(s);
	if (lane == 0) sh.red[warp] = s;
	__syncthreads();
	double cnt = hi - lo, sim = 0;
#pragma unroll
	for (int w = 0; w < POOL_WARPS; w++) sim += sh.red[w];
	sim /= cnt * cnt;
	if (isq) {
		if (tid < SD) qm[task * SD + tid] = mul64(mean, (double)a.scale);
		if (tid == 0) qsim[task] = sim;
	} else {
		long long t = task - nq;
		if (tid < SD) kmt[t * SD + tid] = mean;
		if (tid == 0) ksim[t] = sim;
	}
}


// ---------------------------------------------------------------------------
// sparge_pool_vec: sparge_pool for 16-bit inputs whose rows are 16-byte
// aligned and whose head dimension is 8 × a power of two, at most 128
// (cuda.spargeVecPool chooses it). A persistent grid: each block walks
// tasks blockIdx.x, blockIdx.x + gridDim.x, ..., the next task's tokens
// loading by 16-byte cp.async while this one's are pooled, so that memory
// stays busy. The arithmetic is sparge_pool's, with fewer instructions:
// every thread takes a whole token (or half of one) for 1/|x|, reading it
// by 16-byte chunks in a rotated order that keeps shared memory free of
// bank conflicts, and thread d then sums column d in token order: Σ_n x[n,
// d] in float32, the CPU's bits (column_mean), and Σ_n x̂[n, d] in float32 (within
// spargeSimTol, as sparge_pool's).

#if SD % 8 == 0 && SD <= 128 && ((SD / 8) & (SD / 8 - 1)) == 0 // else only sparge_pool is compiled

#define VPOOL_THREADS 256 // cuda.spargeVecThreads
#define VPOOL_STAGE 32768 // bytes of one staged block of tokens: cuda.spargeVecStage
#ifndef VPOOL_STAGES
#define VPOOL_STAGES 2 // cuda.spargeVecStages
#endif
#ifndef VPOOL_BLOCKS
#define VPOOL_BLOCKS 3 // blocks an SM: cuda.spargeVecBlocksPerSM
#endif
#ifndef VPOOL_NOCOMP
#define VPOOL_NOCOMP 0 // 1: load only, no pooling (timing the memory pipeline)
#endif
#define VPOOL_TOK 256     // the most tokens a task: cuda.spargeVecTokens

// pool_task_range decodes a pooling task: query block (b, h, qb) for task <
// nq, else key block (b, kvh, kb); tokens [lo, hi). Tasks are 32-bit
// (cuda.spargeVecPool checks that they fit): a 64-bit division costs
// several times the instructions, and every thread decodes every task.
__device__ __forceinline__ bool pool_task_range(const PlanArgs& a, int task, int nq, int nkb, int& b, int& h, int& lo, int& hi) {
	bool isq = task < nq;
	int t = isq ? task : task - nq, nb = isq ? a.q_blocks : nkb, nh = isq ? a.Hq : a.Hkv;
	int u = t / nb, blk = t - u * nb;
	b = u / nh, h = u - b * nh;
	int bs = isq ? a.bq : a.bk, n = isq ? a.Nq : a.Nk;
	lo = blk * bs, hi = min(lo + bs, n);
	return isq;
}

// vpool_issue starts the 16-byte copies of task's tokens into tile
// (token-major, SD elements a token); the caller commits the group. Thread
// tid copies chunk tid % LPT of tokens tid / LPT, + TPS, + 2·TPS, ...
__device__ __forceinline__ void vpool_issue(const PlanArgs& a, const View& q, const View& k, int task, int nq, int nkb, u16* tile) {
	constexpr int LPT = SD / 8, TPS = VPOOL_THREADS / LPT;
	int b, h, lo, hi;
	bool isq = pool_task_range(a, task, nq, nkb, b, h, lo, hi);
	// Fields by value: a reference to q or k chosen at run time would
	// copy both parameters to local memory.
	const u16* x = (const u16*)(isq ? q.ptr : k.ptr);
	long long sb = isq ? q.sb : k.sb, sh = isq ? q.sh : k.sh, sn = isq ? q.sn : k.sn;
	int t = threadIdx.x / LPT, c = threadIdx.x % LPT;
	const u16* src = x + (long long)b * sb + (long long)h * sh + (long long)(lo + t) * sn + c * 8;
	u32 dst = (u32)__cvta_generic_to_shared(tile + t * SD + c * 8);
	for (int n = hi - lo; t < n; t += TPS, src += TPS * sn, dst += TPS * SD * 2)
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// VpoolShared is sparge_pool_vec's static shared memory: each staged
// token's 1/|x| (inv; NaN marks a token whose float32 |x|² left [2^-100,
// 2^100], whose 1/|x| is inv64, in float64, 0 for a zero token) and the
// per-warp CosSim partials.
struct VpoolShared {
	__align__(16) float inv[VPOOL_TOK];
	double inv64[VPOOL_TOK];
	double sim[VPOOL_THREADS / 32];
};

// pair32 converts the two 16-bit elements of word w (DT bfloat16 or
// float16) to float32, exactly: the low one to f0.
template <int DT> __device__ __forceinline__ void pair32(u32 w, float& f0, float& f1) {
	if constexpr (DT == DT_BF16) {
		f0 = __uint_as_float(w << 16), f1 = __uint_as_float(w & 0xffff0000u);
	} else {
		f0 = f16_to_f32((u16)w), f1 = f16_to_f32((u16)(w >> 16));
	}
}

// vpool_task pools one staged block of tokens [lo, hi) of type DT (see
// sparge_pool_vec); isq: a query block; x points at token 0 of the block's
// head in global memory, sn its token stride (for column_mean).
template <int DT>
__device__ __forceinline__ void vpool_task(const PlanArgs& a, int task, int nq, bool isq, int lo, int hi, const u16* x, long long sn, const u16* tile,
                                           VpoolShared& sh, double* qm, double* qsim, double* kmt, double* ksim) {
	constexpr int LPT = SD / 8, CPT = LPT < 8 ? LPT : 8, P = LPT / CPT; // chunks a token, a thread; threads a token
	const unsigned full = 0xffffffffu;
	int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	int cnt = hi - lo;
	// 1/|x|: thread i takes part i % P (CPT chunks) of token i / P; the
	// chunk order is rotated by token and part, so that the 8 threads of a
	// shared-memory wavefront read 8 different 16-byte bank groups.
	bool odd = false;
	for (int i0 = 0; i0 < cnt * P; i0 += VPOOL_THREADS) { // uniform: the shuffles below take every lane
		int i = i0 + tid, t = i / P, p = i % P;
		bool valid = i < cnt * P;
		const u16* row = tile + (valid ? t : 0) * SD + p * CPT * 8;
		int rot = t + p * (CPT / 2);
		float n2 = 0;
#pragma unroll
		for (int s = 0; s < CPT; s++) {
			uint4 w4 = *(const uint4*)(row + ((s + rot) % CPT) * 8);
			u32 w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
			for (int j = 0; j < 4; j++) {
				float f0, f1;
				pair32<DT>(w[j], f0, f1);
				n2 = fmaf(f0, f0, n2), n2 = fmaf(f1, f1, n2);
			}
		}
		if (P == 2) n2 += __shfl_xor_sync(full, n2, 1); // the same sum in both lanes of the token
		bool bad = valid && !(n2 >= 0x1p-100f && n2 <= 0x1p100f);
		if (__any_sync(full, bad)) { // rare: |x|² in float64
			double p64 = 0;
#pragma unroll
			for (int s = 0; s < CPT; s++) {
				uint4 w4 = *(const uint4*)(row + s * 8);
				u32 w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
				for (int j = 0; j < 4; j++) {
					float f0, f1;
					pair32<DT>(w[j], f0, f1);
					p64 = add64(p64, mul64(f0, f0)), p64 = add64(p64, mul64(f1, f1));
				}
			}
			if (P == 2) p64 = add64(p64, __shfl_xor_sync(full, p64, 1));
			if (bad && p == 0) sh.inv64[t] = p64 != 0 ? 1.0 / sqrt(p64) : 0.0;
		}
		if (valid && p == 0) sh.inv[t] = bad ? __int_as_float(0x7fc00000) : rsqrtf(n2);
		odd = odd || bad;
	}
	odd = __syncthreads_or(odd); // the barrier before the columns read inv
	// Column d: the float32 sum in token order, the CPU's, and the unit sum.
	float msum = 0, usum = 0;
	if (tid < SD) {
		column_sums<DT>(tile + tid, cnt, odd, sh.inv, sh.inv64, msum, usum);
	}
	if (warp < (SD + 31) / 32) {
		double s = tid < SD ? (double)usum * (double)usum : 0; // products of floats are exact in float64
		s = warp_sum(s);
		if (lane == 0) sh.sim[warp] = s;
	}
	__syncthreads(); // also: inv and this tile are read before the next task writes them
	double n = cnt;
	if (tid < SD) {
		double mean = column_mean<DT>(msum, x, sn, lo, hi, tid);
		if (isq)
			qm[(long long)task * SD + tid] = mul64(mean, (double)a.scale);
		else
			kmt[(long long)(task - nq) * SD + tid] = mean;
	}
	if (tid == 0) {
		double sim = 0;
#pragma unroll
		for (int w = 0; w < (SD + 31) / 32; w++) sim += sh.sim[w];
		sim /= n * n;
		if (isq)
			qsim[task] = sim;
		else
			ksim[task - nq] = sim;
	}
}

// sparge_pool_vec writes what sparge_pool writes (see there), for 16-bit
// q and k whose rows start 16-byte aligned, SD = 8·2^i ≤ 128, and blocks
// of at most VPOOL_TOK tokens and VPOOL_STAGE bytes. Dynamic shared memory:
// VPOOL_STAGES × VPOOL_STAGE bytes. Grid: any size; each block takes tasks
// blockIdx.x + i·gridDim.x.
extern "C" __global__ void __launch_bounds__(VPOOL_THREADS, VPOOL_BLOCKS)
    sparge_pool_vec(PlanArgs a, View q, View k, double* qm, double* qsim, double* kmt, double* ksim) {
	extern __shared__ __align__(16) unsigned char vdyn[];
	__shared__ VpoolShared sh;
	int nkb = (a.Nk + a.bk - 1) / a.bk;
	int nq = a.B * a.Hq * a.q_blocks, ntask = nq + a.B * a.Hkv * nkb;
	u16* tiles = (u16*)vdyn;
	constexpr int STAGE = VPOOL_STAGE / 2; // elements
#pragma unroll
	for (int s = 0; s < VPOOL_STAGES - 1; s++) {
		int t = blockIdx.x + s * gridDim.x;
		if (t < ntask) vpool_issue(a, q, k, t, nq, nkb, tiles + s * STAGE);
		asm volatile("cp.async.commit_group;\n" ::);
	}
	for (int i = 0;; i++) {
		int task = blockIdx.x + i * gridDim.x;
		if (task >= ntask) break;
		int next = task + (VPOOL_STAGES - 1) * gridDim.x;
		if (next < ntask) vpool_issue(a, q, k, next, nq, nkb, tiles + (i + VPOOL_STAGES - 1) % VPOOL_STAGES * STAGE);
		asm volatile("cp.async.commit_group;\n" ::);
		asm volatile("cp.async.wait_group %0;\n" ::"n"(VPOOL_STAGES - 1) : "memory");
		__syncthreads(); // every thread's copies of this task are in
		int b, h, lo, hi;
		bool isq = pool_task_range(a, task, nq, nkb, b, h, lo, hi);
		const u16* tile = tiles + i % VPOOL_STAGES * STAGE;
		if (VPOOL_NOCOMP) {
			__syncthreads(); // the tile is read before the next task writes it
			continue;
		}
		// Fields by value, as in vpool_issue.
		const u16* x = (const u16*)(isq ? q.ptr : k.ptr);
		long long sn = isq ? q.sn : k.sn;
		x += (long long)b * (isq ? q.sb : k.sb) + (long long)h * (isq ? q.sh : k.sh);
		if ((isq ? q.dtype : k.dtype) == DT_BF16)
			vpool_task<DT_BF16>(a, task, nq, isq, lo, hi, x, sn, tile, sh, qm, qsim, kmt, ksim);
		else
			vpool_task<DT_F16>(a, task, nq, isq, lo, hi, x, sn, tile, sh, qm, qsim, kmt, ksim);
	}
	asm volatile("cp.async.wait_all;\n" ::: "memory");
}

#endif // SD is 8 times a power of two
