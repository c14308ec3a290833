// FlexPrefill's planner on the device (package method/flexprefill). The
// probe (the last query block's exact attention, its vertical and slash
// sums) comes from plan_minference.cu's probe kernels; this file repeats
// flexprefill.Decide and Head.Row operation for operation: the γ-cover
// budgets (exact fixed-point cumulative sums), the pooled vertical and
// slash blocks (plan.Sum64), the estimate and its JS distance to the probe
// (FlexPrefill §3.2), the top vertical and slash blocks (§3.3, Alg. 2),
// and the query-aware blocks (heaviest first over the head until γ of
// its mass). CUDA's log may differ from Go's math.Log by one ulp; see
// flexprefill's sqrtJS.

#define INF64 __longlong_as_double(0x7ff0000000000000ll)

#include "probe.cuh"

// to_fixed is flexprefill's toFixed: x·2^shift truncated (x ≥ 0).
__device__ __forceinline__ u64 to_fixed(double x, int shift) { return __double2ull_rz(ldexp(x, shift)); }

// Block-wide reductions (every thread gets the result).
__device__ __forceinline__ u64 block_sum_u64(u64 x, u64* red) {
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
	__syncthreads();
	if (l == 0) red[w] = x;
	__syncthreads();
	u64 tot = 0;
	for (int i = 0; i < (int)(blockDim.x >> 5); i++) tot += red[i];
	__syncthreads();
	return tot;
}

__device__ __forceinline__ double block_max(double x, double* red) {
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, o));
	__syncthreads();
	if (l == 0) red[w] = x;
	__syncthreads();
	double m = -INF64;
	for (int i = 0; i < (int)(blockDim.x >> 5); i++) m = fmax(m, red[i]);
	__syncthreads();
	return m;
}

// sum64_warp0 is plan.Sum64 of x[0..n) computed by warp 0 (lane l adds
// the x[i] with i ≡ l mod 32 in increasing i, then the butterfly), and
// broadcast to the block through *out.
__device__ __forceinline__ double sum64_block(const double* x, int n, double* out) {
	if (threadIdx.x < 32) {
		double p = 0.0;
		for (int i = threadIdx.x; i < n; i += 32) p = add64(p, x[i]);
		p = warp_sum(p);
		if (threadIdx.x == 0) *out = p;
	}
	__syncthreads();
	double r = *out;
	__syncthreads();
	return r;
}

// Selection: the items' keys are 64-bit (0: not a candidate), ordered
// like the CPU's stable sorts (larger first, ties by smaller index).
struct Cut {
	u64 T;     // items with key > T are taken
	int ties;  // and the first `ties` items (by index) with key T
	int count; // items taken in all
};

// topk_cut finds the cut of the k largest candidates.
template <typename KeyFn>
__device__ Cut topk_cut(KeyFn key, int n, int kwant, u32* cnt, u64* red) {
	int tid = threadIdx.x;
	u64 cand = 0;
	for (int i = tid; i < n; i += blockDim.x) cand += key(i) != 0;
	cand = block_sum_u64(cand, red);
	Cut c;
	c.count = min((long long)kwant, (long long)cand);
	if (c.count <= 0) {
		c.count = 0;
		c.T = ~0ull;
		c.ties = 0;
		return c;
	}
	__shared__ u64 prefix_s;
	__shared__ int krem_s;
	if (tid == 0) {
		prefix_s = 0;
		krem_s = c.count;
	}
	__syncthreads();
	for (int shift = 56; shift >= 0; shift -= 8) {
		for (int x = tid; x < 256; x += blockDim.x) cnt[x] = 0;
		__syncthreads();
		u64 prefix = prefix_s;
		for (int base = 0; base < n; base += blockDim.x) {
			int i = base + tid;
			u64 kk = i < n ? key(i) : 0;
			bool in = i < n && (shift == 56 || (kk >> (shift + 8)) == prefix);
			int dg = in ? (int)((kk >> shift) & 255) : 256;
			u32 peers = __match_any_sync(0xffffffffu, dg);
			if (in && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&cnt[dg], (u32)__popc(peers));
		}
		__syncthreads();
		if (tid == 0) {
			int krem = krem_s, cum = 0;
			for (int dg = 255; dg >= 0; dg--) {
				int h = (int)cnt[dg];
				if (cum + h >= krem) {
					krem_s = krem - cum;
					prefix_s = (prefix << 8) | (u64)dg;
					break;
				}
				cum += h;
			}
		}
		__syncthreads();
	}
	c.T = prefix_s;
	c.ties = krem_s;
	__syncthreads();
	return c;
}

// cover_cut finds the cut of the largest candidates whose cumulative
// fixed-point value fx (0 for non-candidates) stays within G: the items
// before the first one whose running sum exceeds G, in the sorted order.
// When the sum of all stays within G, every candidate is taken.
template <typename KeyFn, typename FixFn>
__device__ Cut cover_cut(KeyFn key, FixFn fx, int n, u64 G, u32* cnt, u64* fs, u64* red) {
	int tid = threadIdx.x;
	u64 tot = 0, ncand = 0;
	for (int i = tid; i < n; i += blockDim.x) {
		u64 kk = key(i);
		if (kk != 0) {
			tot += fx(i);
			ncand++;
		}
	}
	tot = block_sum_u64(tot, red);
	ncand = block_sum_u64(ncand, red);
	Cut c;
	if (tot <= G) {
		c.T = 0;
		c.ties = 0;
		c.count = (int)ncand;
		return c;
	}
	__shared__ u64 prefix_s, above_s;
	__shared__ int count_s;
	if (tid == 0) {
		prefix_s = 0;
		above_s = 0;
		count_s = 0;
	}
	__syncthreads();
	for (int shift = 56; shift >= 0; shift -= 8) {
		for (int x = tid; x < 256; x += blockDim.x) {
			cnt[x] = 0;
			fs[x] = 0;
		}
		__syncthreads();
		u64 prefix = prefix_s;
		for (int base = 0; base < n; base += blockDim.x) {
			int i = base + tid;
			u64 kk = i < n ? key(i) : 0;
			bool in = kk != 0 && (shift == 56 || (kk >> (shift + 8)) == prefix);
			int dg = in ? (int)((kk >> shift) & 255) : 256;
			u64 v = in ? fx(i) : 0;
			// Lanes with the same digit add once: the fixed values
			// (< 2^62) in three exact 32-bit partial sums.
			u32 peers = __match_any_sync(0xffffffffu, dg);
			u32 lo = __reduce_add_sync(peers, (u32)(v & 0x3fffff));
			u32 mid = __reduce_add_sync(peers, (u32)((v >> 22) & 0x3fffff));
			u32 hi = __reduce_add_sync(peers, (u32)(v >> 44));
			if (in && (threadIdx.x & 31) == __ffs(peers) - 1) {
				atomicAdd(&cnt[dg], (u32)__popc(peers));
				atomicAdd((unsigned long long*)&fs[dg], (unsigned long long)lo + ((unsigned long long)mid << 22) + ((unsigned long long)hi << 44));
			}
		}
		__syncthreads();
		if (tid == 0) {
			u64 A = above_s;
			int C = count_s;
			for (int dg = 255; dg >= 0; dg--) {
				if (A + fs[dg] > G) {
					prefix_s = (prefix << 8) | (u64)dg;
					break;
				}
				A += fs[dg];
				C += (int)cnt[dg];
			}
			above_s = A;
			count_s = C;
		}
		__syncthreads();
	}
	c.T = prefix_s;
	u64 A = above_s;
	int C = count_s;
	__syncthreads();
	// The items with key T share one value, T − 1 as bits; its fixed
	// value is positive, as the crossing lies among them.
	u64 ft = 0;
	for (int i = tid; i < n; i += blockDim.x)
		if (key(i) == c.T) {
			ft = fx(i);
			break;
		}
	__shared__ u64 ft_s;
	if (tid == 0) ft_s = 0;
	__syncthreads();
	if (ft != 0) atomicMax((unsigned long long*)&ft_s, (unsigned long long)ft);
	__syncthreads();
	ft = ft_s;
	__syncthreads();
	c.ties = (int)((G - A) / ft);
	c.count = C + c.ties;
	return c;
}

// cut_mark calls mark(i, selected) for every item, in index chunks.
template <typename KeyFn, typename MarkFn>
__device__ void cut_mark(KeyFn key, int n, Cut c, MarkFn mark) {
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31, nw = blockDim.x >> 5;
	__shared__ int eq_w[32];
	int carry = 0;
	for (int base = 0; base < n; base += blockDim.x) {
		int i = base + tid;
		u64 kk = i < n ? key(i) : 0;
		bool cand = i < n && c.count > 0 && kk != 0;
		bool gt = cand && kk > c.T, eq = cand && kk == c.T;
		u32 beq = __ballot_sync(0xffffffffu, eq);
		if (l == 0) eq_w[w] = __popc(beq);
		__syncthreads();
		int before = carry + __popc(beq & ((1u << l) - 1)), tot = 0;
		for (int x = 0; x < nw; x++) {
			if (x < w) before += eq_w[x];
			tot += eq_w[x];
		}
		if (i < n) mark(i, gt || (eq && before < c.ties));
		carry += tot;
		__syncthreads();
	}
}

// FpArgs mirror cuda.fpArgs.
struct FpArgs {
	const float* km;      // [B·Hkv][KBlocks][D] block mean keys
	double* vb;           // [G][KBlocks] pooled verticals, then estimate scratch
	double* sb;           // [G][nsd] pooled slashes
	double* est;          // [G][KBlocks]
	unsigned char* vflag; // [B·Hq][KBlocks]
	unsigned char* sflag; // [B·Hq][nsd], diagonal s at s − smin
	int* qa;              // [B·Hq] query-aware heads
	double gamma, tau;
	int minb, maxb, smin, nsd;
};

// fp_keymeans: block (KV block, B·Hkv), one thread per head dim: the mean
// key, float32, products rounded before each sum (flexprefill.blockMeans).
extern "C" __global__ void fp_keymeans(PlanArgs a, View k, FpArgs f) {
	int kb = blockIdx.x, bh = blockIdx.y, b = bh / a.Hkv, h = bh % a.Hkv, d = threadIdx.x;
	int nkb = (a.Nk + a.bk - 1) / a.bk;
	if (d >= a.D) return;
	int lo = kb * a.bk, hi = min(lo + a.bk, a.Nk);
	float inv = __fdiv_rn(1.0f, (float)(hi - lo)), y = 0.0f;
	for (int j = lo; j < hi; j++) y = __fadd_rn(y, __fmul_rn(inv, load(k, b, h, j, d)));
	((float*)f.km)[((long long)bh * nkb + kb) * a.D + d] = y;
}

__device__ __forceinline__ int fp_clamp(int n, int blocks, int minb, int maxb) {
	int lo = max(minb, 1), hi = blocks;
	if (maxb > 0) hi = min(hi, maxb);
	return min(max(n, lo), max(hi, lo));
}

// fp_head: one 1024-thread block per head of the group: Decide's
// vertical-slash part and the query-aware choice.
extern "C" __global__ void __launch_bounds__(1024) fp_head(PlanArgs a, View q, ProbeArgs p, FpArgs f) {
	__shared__ u32 cnt[256];
	__shared__ u64 fs[256];
	__shared__ u64 red[32];
	__shared__ double redd[32];
	__shared__ double bcast;
	__shared__ float qm[128];
	int hg = blockIdx.x, head = p.head0 + hg, b = head / a.Hq, h = head % a.Hq, kh = h / (a.Hq / a.Hkv);
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31, nw = blockDim.x >> 5;
	int nk = a.Nk, bk = a.bk, nkb = (nk + bk - 1) / bk, no = 2 * nk - 1;
	double n = (double)p.n;
	double* vert = p.v + (long long)hg * nk;
	double* slash = p.sl + (long long)hg * no;
	for (int j = tid; j < nk; j += blockDim.x) vert[j] = __ddiv_rn(vert[j], n);
	for (int o = tid; o < no; o += blockDim.x) slash[o] = __ddiv_rn(slash[o], n);
	__syncthreads();
	// Budgets (FlexPrefill Alg. 2): the lines covering γ, in blocks.
	u64 G = to_fixed(f.gamma, 60);
	auto vkey = [&](int j) -> u64 { return dbits(vert[j]) + 1; };
	auto vfx = [&](int j) -> u64 { return to_fixed(vert[j], 60); };
	Cut cv = cover_cut(vkey, vfx, nk, G, cnt, fs, red);
	auto skey = [&](int o) -> u64 { return dbits(slash[o]) + 1; };
	auto sfx = [&](int o) -> u64 { return to_fixed(slash[o], 60); };
	Cut cs = cover_cut(skey, sfx, no, G, cnt, fs, red);
	int nv = fp_clamp(cv.count / bk + 1, nkb, f.minb, f.maxb);
	int ns = fp_clamp(cs.count / bk + 1, nkb, f.minb, f.maxb);
	// Pooled lines: Sum64 per KV block and per block diagonal.
	double* vb = f.vb + (long long)hg * nkb;
	double* sb = f.sb + (long long)hg * f.nsd;
	for (int kb = w; kb < nkb; kb += nw) {
		double part = 0.0;
		for (int x = l; x < bk && kb * bk + x < nk; x += 32) part = add64(part, vert[kb * bk + x]);
		part = warp_sum(part);
		if (l == 0) vb[kb] = part;
	}
	for (int si = w; si < f.nsd; si += nw) {
		int s = f.smin + si, base = s * bk;
		double part = 0.0;
		bool mass = false;
		for (int x = l; x < bk; x += 32) {
			int d = base + x;
			if (d < -(nk - 1) || d > nk - 1) continue;
			double v = slash[d + nk - 1];
			part = add64(part, v);
			mass = mass || v > 0.0;
		}
		part = warp_sum(part);
		bool any = __any_sync(0xffffffffu, mass);
		// NaN marks a diagonal that is not a candidate.
		if (l == 0) sb[si] = (any || s == 0) ? part : __longlong_as_double(0x7ff8000000000000ll);
	}
	// The estimate (FlexPrefill §3.2): softmax of the mean probe query
	// against the block mean keys.
	if (tid < a.D) {
		float inv = __double2float_rn(__ddiv_rn(1.0, n)), y = 0.0f;
		for (int i = 0; i < p.n; i++) y = __fadd_rn(y, __fmul_rn(inv, load(q, b, h, a.Nq - p.n + i, tid)));
		qm[tid] = y;
	}
	__syncthreads();
	double* est = f.est + (long long)hg * nkb;
	const float* km = f.km + ((long long)(b * a.Hkv + kh) * nkb) * a.D;
	double scale = (double)a.scale, mx = -INF64;
	for (int kb = tid; kb < nkb; kb += blockDim.x) {
		double s = 0.0;
		for (int d = 0; d < a.D; d++) s = fma((double)qm[d], (double)km[(long long)kb * a.D + d], s);
		est[kb] = mul64(s, scale);
		mx = fmax(mx, est[kb]);
	}
	mx = block_max(mx, redd);
	for (int kb = tid; kb < nkb; kb += blockDim.x) est[kb] = exp64_canon(__dsub_rn(est[kb], mx));
	__syncthreads();
	double S = sum64_block(est, nkb, &bcast);
	for (int kb = tid; kb < nkb; kb += blockDim.x) {
		double pe = __ddiv_rn(est[kb], S), pv = vb[kb];
		double m = __ddiv_rn(add64(pe, pv), 2.0), x = 0.0, y = 0.0;
		if (pe > 0.0) x = mul64(mul64(0.5, pe), log(__ddiv_rn(pe, m)));
		if (pv > 0.0) y = mul64(mul64(0.5, pv), log(__ddiv_rn(pv, m)));
		est[kb] = add64(x, y);
	}
	__syncthreads();
	double js = sum64_block(est, nkb, &bcast);
	double dist = __dsqrt_rn(fmax(js, 0.0));
	bool qa = dist < f.tau;
	if (qa) nv = ns = fp_clamp(0, nkb, f.minb, f.maxb);
	if (tid == 0) f.qa[head] = qa ? 1 : 0;
	// The kept verticals (block 0 first) and slashes (diagonal 0 first).
	auto vbkey = [&](int kb) -> u64 { return kb == 0 ? ((1ull << 63) | dbits(vb[kb])) : dbits(vb[kb]) + 1; };
	Cut tv = topk_cut(vbkey, nkb, nv, cnt, red);
	unsigned char* vf = f.vflag + (long long)head * nkb;
	cut_mark(vbkey, nkb, tv, [&](int kb, bool sel) { vf[kb] = sel; });
	int smin = f.smin;
	auto sbkey = [&](int si) -> u64 {
		double x = sb[si];
		if (x != x) return 0;
		return si + smin == 0 ? ((1ull << 63) | dbits(x)) : dbits(x) + 1;
	};
	Cut ts = topk_cut(sbkey, f.nsd, ns, cnt, red);
	unsigned char* sf = f.sflag + (long long)head * f.nsd;
	cut_mark(sbkey, f.nsd, ts, [&](int si, bool sel) { sf[si] = sel; });
}

// QaArgs mirror cuda.qaArgs: the query-aware pairs of one head group.
struct QaArgs {
	double* pw;           // [G][QBlocks][KBlocks] pair weights, −1 where not visible
	unsigned char* flag;  // [B·Hq][QBlocks][KBlocks] kept pairs
	const int* qa;        // [B·Hq]
	const float* km;      // block mean keys
	u64 budget;           // toFixed(γ·rows, shift)
	int head0, G, shift;
};

// fp_qa_weights: block (query block, head of group), 128 threads: the
// softmax of the block's mean query against every block mean key,
// renormalized over the visible blocks (flexprefill.queryAware).
extern "C" __global__ void fp_qa_weights(PlanArgs a, View q, QaArgs x) {
	__shared__ float qm[128];
	__shared__ double redd[32];
	__shared__ double bcast;
	int qb = blockIdx.x, hg = blockIdx.y, head = x.head0 + hg;
	if (!x.qa[head]) return;
	int b = head / a.Hq, h = head % a.Hq, kh = h / (a.Hq / a.Hkv), tid = threadIdx.x;
	int nkb = (a.Nk + a.bk - 1) / a.bk, vis = visible_blocks(a, qb);
	double* pw = x.pw + ((long long)hg * a.q_blocks + qb) * nkb;
	if (vis == 0) {
		for (int kb = tid; kb < nkb; kb += blockDim.x) pw[kb] = -1.0;
		return;
	}
	int qlo = qb * a.bq, qhi = min(qlo + a.bq, a.Nq);
	if (tid < a.D) {
		float inv = __fdiv_rn(1.0f, (float)(qhi - qlo)), y = 0.0f;
		for (int i = qlo; i < qhi; i++) y = __fadd_rn(y, __fmul_rn(inv, load(q, b, h, i, tid)));
		qm[tid] = y;
	}
	__syncthreads();
	const float* km = x.km + ((long long)(b * a.Hkv + kh) * nkb) * a.D;
	double scale = (double)a.scale, mx = -INF64;
	// Block mean keys staged in shared memory, 128 blocks × 64 dims at a
	// time; each thread's dot product still runs over d in increasing
	// order (Dot64).
	__shared__ float kt[128][65];
	for (int kb0 = 0; kb0 < nkb; kb0 += 128) {
		double s = 0.0;
		for (int d0 = 0; d0 < a.D; d0 += 64) {
			__syncthreads();
			for (int e = tid; e < 128 * 64; e += blockDim.x) {
				int r = e >> 6, dd = e & 63, kr = kb0 + r, d = d0 + dd;
				kt[r][dd] = (kr < nkb && d < a.D) ? km[(long long)kr * a.D + d] : 0.0f;
			}
			__syncthreads();
			int dn = min(64, a.D - d0);
			for (int dd = 0; dd < dn; dd++) s = fma((double)qm[d0 + dd], (double)kt[tid][dd], s);
		}
		int kb = kb0 + tid;
		if (kb < nkb) {
			pw[kb] = mul64(s, scale);
			mx = fmax(mx, pw[kb]);
		}
	}
	mx = block_max(mx, redd);
	for (int kb = tid; kb < nkb; kb += blockDim.x) pw[kb] = exp64_canon(__dsub_rn(pw[kb], mx));
	__syncthreads();
	double S = sum64_block(pw, nkb, &bcast);
	for (int kb = tid; kb < nkb; kb += blockDim.x) pw[kb] = __ddiv_rn(pw[kb], S);
	__syncthreads();
	double S2 = sum64_block(pw, vis, &bcast);
	for (int kb = tid; kb < nkb; kb += blockDim.x) pw[kb] = kb < vis ? __ddiv_rn(pw[kb], S2) : -1.0;
}

// fp_qa_select: one 1024-thread block per head of the group: the
// heaviest pairs (ties in (query block, KV block) order) while their
// cumulative mass stays within γ × the rows with a visible block.
extern "C" __global__ void __launch_bounds__(1024) fp_qa_select(PlanArgs a, QaArgs x) {
	__shared__ u32 cnt[256];
	__shared__ u64 fs[256];
	__shared__ u64 red[32];
	int hg = blockIdx.x, head = x.head0 + hg;
	if (!x.qa[head]) return;
	int nkb = (a.Nk + a.bk - 1) / a.bk, n = a.q_blocks * nkb, shift = x.shift;
	const double* pw = x.pw + (long long)hg * n;
	auto key = [&](int i) -> u64 {
		double v = pw[i];
		return v < 0.0 ? 0 : dbits(v) + 1;
	};
	auto fx = [&](int i) -> u64 {
		double v = pw[i];
		return v < 0.0 ? 0 : to_fixed(v, shift);
	};
	Cut c = cover_cut(key, fx, n, x.budget, cnt, fs, red);
	unsigned char* fl = x.flag + (long long)head * n;
	cut_mark(key, n, c, [&](int i, bool sel) { fl[i] = sel; });
}

// fp_rows: one warp per plan row (flexprefill.Head.Row).
extern "C" __global__ void fp_rows(PlanArgs a, FpArgs f, QaArgs x) {
	int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), l = threadIdx.x & 31;
	if (r >= a.rows) return;
	int head = r / a.q_blocks, qb = r % a.q_blocks;
	int nkb = (a.Nk + a.bk - 1) / a.bk, vis = visible_blocks(a, qb);
	int diag = min((qb + 1) * a.bq, a.Nq) - 1 + (a.Nk - a.Nq);
	diag = diag >= 0 ? diag / a.bk : -1;
	bool qa = f.qa[head] != 0;
	const unsigned char* vf = f.vflag + (long long)head * nkb;
	const unsigned char* sf = f.sflag + (long long)head * f.nsd;
	const unsigned char* qf = x.flag + ((long long)head * a.q_blocks + qb) * nkb;
	int* out = a.lists + (long long)r * a.stride;
	int cnt = 0;
	for (int kb0 = 0; kb0 < vis; kb0 += 32) {
		int kb = kb0 + l;
		bool want = false;
		if (kb < vis) {
			want = vf[kb] != 0;
			if (!want && diag >= 0) {
				int si = diag - kb - f.smin;
				want = si >= 0 && si < f.nsd && sf[si] != 0;
			}
			if (!want && qa) want = qf[kb] != 0;
		}
		u32 bal = __ballot_sync(0xffffffffu, want);
		if (want) out[cnt + __popc(bal & ((1u << l) - 1))] = kb;
		cnt += __popc(bal);
	}
	if (l == 0) a.row_len[r] = cnt;
}
