// uni_outlier16, uni_outlier (plan_unisparse.cu, which includes this after
// it) for one head per group (c_h = 1) and 16-bit rows at 16-byte
// boundaries: the block staged once by cp.async instead of read from
// memory twice, and the threads' largest distances combined by warp
// reductions instead of a shared-memory tree; the same outlier token,
// composite queries and output bits.

// uo_lo and uo_hi are the elements of a staged word of two 16-bit
// elements (DT_BF16 or DT_F16): the lower dimension in the low half.
template <int DT>
__device__ __forceinline__ float uo_lo(u32 v) {
	return DT == DT_BF16 ? __uint_as_float(v << 16) : f16_to_f32((u16)(v & 0xffffu));
}
template <int DT>
__device__ __forceinline__ float uo_hi(u32 v) {
	return DT == DT_BF16 ? __uint_as_float(v & 0xffff0000u) : f16_to_f32((u16)(v >> 16));
}

// uo_row8 reads elements 8p … 8p+7 of the staged row r (a row every pw
// words), as ld8 converts them.
template <int DT>
__device__ __forceinline__ void uo_row8(const u32* r, int p, float (&v)[8]) {
	const uint4 w = reinterpret_cast<const uint4*>(r)[p];
	v[0] = uo_lo<DT>(w.x), v[1] = uo_hi<DT>(w.x), v[2] = uo_lo<DT>(w.y), v[3] = uo_hi<DT>(w.y);
	v[4] = uo_lo<DT>(w.z), v[5] = uo_hi<DT>(w.z), v[6] = uo_lo<DT>(w.w), v[7] = uo_hi<DT>(w.w);
}

// uo_find is uni_outlier's passes over the staged rows xs of tokens lo …
// hi−1 (a row every pw words; D a multiple of 8): the same work split, the
// same operations in the same order, each element read from shared memory
// instead of x. It returns the thread's largest distance and its first
// token (−1 and lo for a thread with none).
template <int DT>
__device__ __forceinline__ void uo_find(const PlanArgs& a, const u32* xs, int pw, float* mean, int lo, int hi, int c, int gpp, int set, float scale,
                                        u16* cq_hi, u16* cq_lo, int nq, float& best, int& bt) {
	const int tid = threadIdx.x, D = a.D, span = gpp * c, nd = D / 8;
	best = -1.0f;
	bt = lo;
	for (int p0 = lo; p0 < hi; p0 += span) { // c divides a.bq: groups start at lo + k·c
		const int p1 = min(p0 + span, hi), ng = (p1 - p0 + c - 1) / c;
		__syncthreads(); // the previous pass's means are used up
		for (int i = tid; i < ng * nd; i += blockDim.x) {
			const int gi = i / nd, d = (i % nd) * 8, c0 = p0 + gi * c, c1 = min(c0 + c, hi);
			float v[8], y[8];
#pragma unroll
			for (int e = 0; e < 8; e++) v[e] = 0.0f;
			const u32* r = xs + (c0 - lo) * pw;
#pragma unroll 4
			for (int t = c0; t < c1; t++, r += pw) {
				uo_row8<DT>(r, d / 8, y);
#pragma unroll
				for (int e = 0; e < 8; e++) v[e] = __fadd_rn(v[e], y[e]);
			}
			const float inv = __fdiv_rn(1.0f, (float)(c1 - c0));
#pragma unroll
			for (int e = 0; e < 8; e++) v[e] = __fmul_rn(v[e], inv);
			float4* m4 = reinterpret_cast<float4*>(mean + gi * D + d);
			m4[0] = make_float4(v[0], v[1], v[2], v[3]);
			m4[1] = make_float4(v[4], v[5], v[6], v[7]);
			if (cq_hi) uni_put8(cq_hi, cq_lo, ((long long)set * nq + c0 / c) * D + d, D - d, v, scale);
		}
		__syncthreads();
		for (int t = p0 + tid; t < p1; t += blockDim.x) {
			const float4* mu = reinterpret_cast<const float4*>(mean + (t - p0) / c * D);
			const u32* r = xs + (t - lo) * pw;
			float s = 0.0f;
			for (int p = 0; p < nd; p++) {
				float v[8];
				uo_row8<DT>(r, p, v);
				const float4 ma = mu[2 * p], mb = mu[2 * p + 1];
				const float m[8] = {ma.x, ma.y, ma.z, ma.w, mb.x, mb.y, mb.z, mb.w};
#pragma unroll
				for (int e = 0; e < 8; e++) {
					const float df = __fsub_rn(v[e], m[e]);
					s = __fadd_rn(s, __fmul_rn(df, df)); // never fused, as the CPU's
				}
			}
			if (s > best) { // a thread's tokens come in increasing order
				best = s;
				bt = t;
			}
		}
	}
}

// uni_outlier16 is uni_outlier (same arguments and contract, the same bits
// written) for c_h = 1 and 16-bit x with its rows at 16-byte boundaries
// (x.ptr 16-byte aligned, x.sb, x.sh and x.sn multiples of 8, D a multiple
// of 8; cuda.uniOutlier16): the block's rows of head h0 are staged by
// cp.async (every piece in flight at once) at a pitch of an odd number of
// 16-byte pieces (conflict-free row reads, a token a thread), and the
// largest distance, first token of ties, is found by two warp reductions
// (redux.sync: the distances' bits, which order as the distances do, all
// ≥ +0 or the −1 of a thread with none; then the least token holding the
// largest) and a pass over the four warps'. Dynamic shared memory
// (cuda.uniOutlier16Smem): a.bq rows of (D/8 | 1)·4 words, then gpp·D
// floats.
extern "C" __global__ void __launch_bounds__(128) uni_outlier16(PlanArgs a, View x, u16* out_hi, u16* out_lo, int c, int ch, float scale, int raw, int gpp,
                                                                u16* cq_hi, u16* cq_lo, int nq) {
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ int wz[4], wt[4];
	const int tid = threadIdx.x, set = blockIdx.x / a.q_blocks, qb = blockIdx.x % a.q_blocks, D = a.D;
	const int P = D / 8, pw = (P | 1) * 4;
	u32* xs = (u32*)smem;
	float* mean = (float*)(xs + a.bq * pw); // 16-byte aligned: pw is a multiple of 4
	int b, h0;
	set_heads(a, ch, set, &b, &h0);
	const int lo = qb * a.bq, hi = min(lo + a.bq, a.Nq), n = hi - lo;
	{
		// Piece i is row j = i / P, piece u = i % P, advanced without
		// divisions (blockDim.x = 128).
		const unsigned char* base = (const unsigned char*)x.ptr + ((long long)b * x.sb + (long long)h0 * x.sh + (long long)lo * x.sn) * 2;
		const long long rs = x.sn * 2;
		int j = tid / P, u = tid - j * P;
		const int dj = 128 / P, du = 128 - dj * P;
		for (int i = tid; i < n * P; i += 128) {
			const u32 dst = (u32)__cvta_generic_to_shared(xs + j * pw + u * 4);
			asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(base + j * rs + u * 16) : "memory");
			u += du;
			j += dj;
			if (u >= P) {
				u -= P;
				j++;
			}
		}
		asm volatile("cp.async.commit_group;\n" ::: "memory");
		asm volatile("cp.async.wait_group 0;\n" ::: "memory");
	}
	float best;
	int bt;
	if (x.dtype == DT_F16) {
		uo_find<DT_F16>(a, xs, pw, mean, lo, hi, c, gpp, set, scale, cq_hi, cq_lo, nq, best, bt);
	} else {
		uo_find<DT_BF16>(a, xs, pw, mean, lo, hi, c, gpp, set, scale, cq_hi, cq_lo, nq, best, bt);
	}
	// (uo_find's first __syncthreads also publishes the staged rows.)
	const int bz = __float_as_int(best), mz = __reduce_max_sync(0xffffffffu, bz);
	const int mt = __reduce_min_sync(0xffffffffu, bz == mz ? bt : 0x7fffffff);
	if ((tid & 31) == 0) wz[tid >> 5] = mz, wt[tid >> 5] = mt;
	__syncthreads();
	int o = wt[0], oz = wz[0];
	for (int w = 1; w < 4; w++) {
		if (wz[w] > oz || (wz[w] == oz && wt[w] < o)) o = wt[w], oz = wz[w];
	}
	const long long at = (long long)blockIdx.x * D;
	if (raw) {
		const u32* r = xs + (o - lo) * pw; // the token's own bits, as staged
		for (int d = tid; d < D / 2; d += blockDim.x) reinterpret_cast<u32*>(out_hi + at)[d] = r[d];
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
