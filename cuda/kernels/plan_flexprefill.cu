// FlexPrefill's planner on the device (package method/flexprefill). The
// probe (the last query block's attention, its vertical and slash sums)
// comes from probe.cuh, on the tensor cores, so its line scores differ
// from the CPU's float64 ones by about 1e-6 relative; everything after it
// repeats flexprefill.Decide and Head.Row operation for operation: the
// γ-cover budgets (exact fixed-point cumulative sums), the pooled vertical
// and slash blocks (plan.Sum64), the estimate and its JS distance to the
// probe (FlexPrefill §3.2), the top vertical and slash blocks (§3.3, Alg.
// 2), and the query-aware blocks (heaviest first over the head until γ of
// its mass, from float64 scores computed in the CPU's order). A decision
// that the probe's rounding can flip (a line within tolerance of a cut, a
// distance within tolerance of τ) may differ from the CPU's; cuda/selftest's
// flexprefillTieBreak bounds it. CUDA's log may differ from Go's math.Log
// by one ulp; see flexprefill's sqrtJS.

#define INF64 __longlong_as_double(0x7ff0000000000000ll)

#include "probe.cuh"

// to_fixed is flexprefill's toFixed: x·2^shift truncated (x ≥ 0).
__device__ __forceinline__ u64 to_fixed(double x, int shift) { return __double2ull_rz(ldexp(x, shift)); }

// block_max: every thread gets the block's maximum of x.
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

// FpArgs mirror cuda.fpArgs.
struct FpArgs {
	const float* km;      // [B·Hkv][KBlocks][D] block mean keys
	double* vb;           // [G][KBlocks] pooled verticals, then estimate scratch
	double* sb;           // [G][nsd] pooled slashes
	double* est;          // [G][KBlocks]
	unsigned char* vflag; // [B·Hq][KBlocks]
	unsigned char* sflag; // [B·Hq][nsd], diagonal s at s − smin
	int* qa;              // [B·Hq] query-aware heads
	int* counts;          // [B·Hq][2] γ-cover counts of the vertical and slash lines
	int* list;            // [B·Hq][2][2Nk] fp_cover's lines of the crossing bin
	double gamma, tau;
	int minb, maxb, smin, nsd;
};

// mean8 writes to out[0 … 8) the mean over tokens [lo, hi) of dims d …
// d+7 of head h of x (16-bit, 8-element pieces 16-byte aligned), as
// fp_keymeans and fp_qmeans compute each dim: float32, (1/n)·x rounded,
// then added in token order; one 16-byte load a token.
__device__ __forceinline__ void mean8(const View& x, int b, int h, int lo, int hi, int d, float* out) {
	const float inv = __fdiv_rn(1.0f, (float)(hi - lo));
	const u16* p = (const u16*)x.ptr + (long long)b * x.sb + (long long)h * x.sh + d;
	float y[8];
#pragma unroll
	for (int e = 0; e < 8; e++) y[e] = 0.0f;
#pragma unroll 4
	for (int i = lo; i < hi; i++) {
		const uint4 w = *(const uint4*)(p + (long long)i * x.sn);
		const u32 ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
		for (int e = 0; e < 8; e++) {
			const u16 v16 = (u16)(e & 1 ? ws[e >> 1] >> 16 : ws[e >> 1] & 0xffffu);
			const float v = x.dtype == DT_F16 ? f16_to_f32(v16) : bf16_to_f32(v16);
			y[e] = __fadd_rn(y[e], __fmul_rn(inv, v));
		}
	}
#pragma unroll
	for (int e = 0; e < 8; e++) out[e] = y[e];
}

// fp_keymeans8 is fp_keymeans for 16-bit keys whose 8-element pieces are
// 16-byte aligned: block (group of KV blocks, B·Hkv), 128 threads, each
// thread eight dims of one KV block (128 / (D/8) KV blocks a block).
extern "C" __global__ void __launch_bounds__(128) fp_keymeans8(PlanArgs a, View k, FpArgs f) {
	const int bh = blockIdx.y, b = bh / a.Hkv, h = bh % a.Hkv;
	const int nkb = (a.Nk + a.bk - 1) / a.bk;
	const int nd = a.D / 8, per = blockDim.x / nd, sub = threadIdx.x / nd, d = (threadIdx.x % nd) * 8;
	const int kb = blockIdx.x * per + sub;
	if (sub >= per || kb >= nkb) return;
	const int lo = kb * a.bk, hi = min(lo + a.bk, a.Nk);
	mean8(k, b, h, lo, hi, d, (float*)f.km + ((long long)bh * nkb + kb) * a.D + d);
}

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

#define QA_BINS 2048

// qa_bin is a weight's bin: the sign, exponent and top five mantissa bits
// of its float64 bits, counted from 2⁻⁶³ (bin 0 holds everything below).
// Larger bins hold larger weights.
__device__ __forceinline__ int qa_bin(double v) {
	long long b = (long long)(dbits(v) >> 47) - (long long)(dbits(0x1p-63) >> 47);
	return (int)min(max(b, 0ll), (long long)(QA_BINS - 1));
}

// BinShared is bin_cover's shared memory.
struct BinShared {
	u32 cnt[QA_BINS];
	u64 fs[QA_BINS];
	u64 above;
	int bin, above_cnt, wcnt[32];
};

// BinCut is a cover found by bin_cover: the candidates in bins above B
// are taken (C of them), and of bin B's candidates, gathered in index order
// in list[0 … m), those the exact cover c over them takes. B < 0 when all
// candidates fit the budget (C is then their number).
struct BinCut {
	int B, C, m;
	Cut c;
};

// bin_hist adds the candidates val(i) ≥ 0 of [lo, hi) to the bin counts
// cnt and fixed-point sums fs (shared memory), with every thread of the
// block. Lanes with the same bin add once (warp-aggregated, as sel_hist):
// the fixed values go in three exact 32-bit partial sums. A partial sum is
// at most the total, which the caller's shift keeps below 2^62.
template <typename ValFn>
__device__ __forceinline__ void bin_hist(ValFn val, int lo, int hi, int shift, u32* cnt, u64* fs) {
	const int l = threadIdx.x & 31;
	for (int base = lo; base < hi; base += blockDim.x) {
		const int i = base + threadIdx.x;
		const double v = i < hi ? val(i) : -1.0;
		const bool in = v >= 0.0;
		if (!__any_sync(0xffffffffu, in)) continue;
		const int b = in ? qa_bin(v) : QA_BINS;
		const u32 peers = __match_any_sync(0xffffffffu, b);
		const u64 f = in ? to_fixed(v, shift) : 0;
		const u32 flo = __reduce_add_sync(peers, (u32)(f & 0x3fffff));
		const u32 fmid = __reduce_add_sync(peers, (u32)((f >> 22) & 0x3fffff));
		const u32 fhi = __reduce_add_sync(peers, (u32)(f >> 44));
		if (in && l == __ffs(peers) - 1) {
			atomicAdd(&cnt[b], (u32)__popc(peers));
			atomicAdd((unsigned long long*)&fs[b], (unsigned long long)flo + ((unsigned long long)fmid << 22) + ((unsigned long long)fhi << 44));
		}
	}
}

// bin_cross, run by one whole warp, finds the crossing bin of the
// histogram (cnt, fs): the largest bins are taken while their cumulative
// fixed-point sum stays within G; *bin is the bin where the sum would
// exceed G (left unchanged when everything fits), *above and *above_cnt
// the sum and count of the bins above it (of all bins when everything
// fits). Lane l owns bins 2047 − 64l down to 1984 − 64l; the lane whose
// range holds the crossing walks it.
__device__ __forceinline__ void bin_cross(const u32* cnt, const u64* fs, u64 G, int* bin, u64* above, int* above_cnt) {
	const int per = QA_BINS / 32, l = threadIdx.x & 31;
	u64 tot = 0;
	int ctot = 0;
	for (int u = 0; u < per; u++) {
		int b = QA_BINS - 1 - per * l - u;
		tot += fs[b];
		ctot += (int)cnt[b];
	}
	u64 pre = tot;
	int cpre = ctot;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		u64 y = __shfl_up_sync(0xffffffffu, pre, o);
		int cy = __shfl_up_sync(0xffffffffu, cpre, o);
		if (l >= o) {
			pre += y;
			cpre += cy;
		}
	}
	if (l == 31 && pre <= G) *above_cnt = cpre; // everything fits
	pre -= tot;
	cpre -= ctot;
	if (pre <= G && G < pre + tot) {
		for (int u = 0; u < per; u++) {
			int b = QA_BINS - 1 - per * l - u;
			if (pre + fs[b] > G) {
				*bin = b;
				*above = pre;
				*above_cnt = cpre;
				break;
			}
			pre += fs[b];
			cpre += (int)cnt[b];
		}
	}
}

// bin_cover is cover_cut (the largest candidates, ties by index, while
// their cumulative fixed-point value stays within G) for weights val(i) in
// [0, 1] (negative: not a candidate). One pass histograms the weights into
// QA_BINS bins (counts and exact fixed-point sums); the bins above the one
// where the running sum crosses G are taken whole, and only that bin's
// candidates go through the exact radix cover, with what is left of G.
template <typename ValFn>
__device__ BinCut bin_cover(ValFn val, int n, u64 G, int shift, int* list, BinShared& bs, SelShared& sh) {
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31, nw = blockDim.x >> 5;
	for (int b = tid; b < QA_BINS; b += blockDim.x) {
		bs.cnt[b] = 0;
		bs.fs[b] = 0;
	}
	if (tid == 0) {
		bs.bin = -1;
		bs.above = 0;
		bs.above_cnt = 0;
	}
	__syncthreads();
	bin_hist(val, 0, n, shift, bs.cnt, bs.fs);
	__syncthreads();
	if (w == 0) bin_cross(bs.cnt, bs.fs, G, &bs.bin, &bs.above, &bs.above_cnt);
	__syncthreads();
	BinCut r;
	r.B = bs.bin;
	r.C = bs.above_cnt;
	r.m = 0;
	r.c.T = ~0ull;
	r.c.ties = 0;
	r.c.count = 0;
	u64 A = bs.above;
	__syncthreads();
	if (r.B < 0) return r;
	// Bin B's candidates, in index order.
	int carry = 0;
	for (int base = 0; base < n; base += blockDim.x) {
		int i = base + tid;
		bool in = false;
		if (i < n) {
			double v = val(i);
			in = v >= 0.0 && qa_bin(v) == r.B;
		}
		u32 bal = __ballot_sync(0xffffffffu, in);
		if (l == 0) bs.wcnt[w] = __popc(bal);
		__syncthreads();
		int wpre, tot;
		block_prefix(bs.wcnt, nw, w, wpre, tot);
		if (in) list[carry + wpre + __popc(bal & ((1u << l) - 1))] = i;
		carry += tot;
		__syncthreads();
	}
	r.m = carry;
	auto key = [&](int j) -> u64 { return dbits(val(list[j])) + 1; };
	auto fx = [&](int j) -> u64 { return to_fixed(val(list[j]), shift); };
	r.c = cover_cut(key, fx, r.m, G - A, sh);
	return r;
}

// fp_cover: block (head, 0 vertical | 1 slash), 1024 threads: how many
// of the largest line means cover γ (FlexPrefill Alg. 2; flexprefill's
// coverCount, exact fixed-point cumulative sums). The probe's sums are
// already means (probe_combine divides by n).
extern "C" __global__ void __launch_bounds__(1024) fp_cover(PlanArgs a, ProbeArgs p, FpArgs f) {
	__shared__ SelShared sh;
	__shared__ BinShared bs;
	int hg = blockIdx.x, head = p.head0 + hg, nk = a.Nk, no = 2 * nk - 1;
	const double* x = blockIdx.y == 0 ? p.v + (long long)hg * nk : p.sl + (long long)hg * no;
	int* list = f.list + (long long)(2 * hg + blockIdx.y) * (2ll * nk);
	auto val = [&](int j) -> double { return x[j]; };
	BinCut r = bin_cover(val, blockIdx.y == 0 ? nk : no, to_fixed(f.gamma, 60), 60, list, bs, sh);
	if (threadIdx.x == 0) f.counts[2 * head + blockIdx.y] = r.C + r.c.count;
}

// fp_head: one 1024-thread block per head: the rest of Decide's
// vertical-slash part and the query-aware choice.
extern "C" __global__ void __launch_bounds__(1024) fp_head(PlanArgs a, View q, ProbeArgs p, FpArgs f) {
	__shared__ SelShared sh;
	__shared__ double redd[32];
	__shared__ double bcast;
	__shared__ float qm[HEAD_DIM_PAD];
	int hg = blockIdx.x, head = p.head0 + hg, b = head / a.Hq, h = head % a.Hq, kh = h / (a.Hq / a.Hkv);
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31, nw = blockDim.x >> 5;
	int nk = a.Nk, bk = a.bk, nkb = (nk + bk - 1) / bk;
	double n = (double)p.n;
	const double* vert = p.v + (long long)hg * nk;
	const double* slash = p.sl + (long long)hg * (2 * nk - 1);
	int nv = fp_clamp(f.counts[2 * head] / bk + 1, nkb, f.minb, f.maxb);
	int ns = fp_clamp(f.counts[2 * head + 1] / bk + 1, nkb, f.minb, f.maxb);
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
#pragma unroll 8
		for (int i = 0; i < p.n; i++) y = __fadd_rn(y, __fmul_rn(inv, load(q, b, h, a.Nq - p.n + i, tid)));
		qm[tid] = y;
	}
	__syncthreads();
	double* est = f.est + (long long)hg * nkb;
	const float* km = f.km + ((long long)(b * a.Hkv + kh) * nkb) * a.D;
	double scale = (double)a.scale, mx = -INF64;
	for (int kb = tid; kb < nkb; kb += blockDim.x) {
		double s = 0.0;
#pragma unroll 8
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
	Cut tv = topk_cut(vbkey, nkb, nv, sh);
	unsigned char* vf = f.vflag + (long long)head * nkb;
	cut_mark(vbkey, nkb, tv, [&](int kb, bool sel, int) { vf[kb] = sel; });
	int smin = f.smin;
	auto sbkey = [&](int si) -> u64 {
		double x = sb[si];
		if (x != x) return 0;
		return si + smin == 0 ? ((1ull << 63) | dbits(x)) : dbits(x) + 1;
	};
	Cut ts = topk_cut(sbkey, f.nsd, ns, sh);
	unsigned char* sf = f.sflag + (long long)head * f.nsd;
	cut_mark(sbkey, f.nsd, ts, [&](int si, bool sel, int) { sf[si] = sel; });
}

// QaArgs mirror cuda.qaArgs: the query-aware pairs of one head group.
struct QaArgs {
	double* pw;           // [G][QBlocks][KBlocks] pair weights, −1 where not visible
	unsigned char* flag;  // [B·Hq][QBlocks][KBlocks] kept pairs
	const int* qa;        // [B·Hq]
	const float* km;      // block mean keys
	float* qm;            // [B·Hq][QBlocks][D] block mean queries
	int* list;            // [G][QBlocks·KBlocks] fp_qa_select's pairs of the crossing bin
	u64 budget;           // toFixed(γ·rows, shift)
	int head0, G, shift;
};

// fp_qmeans: block (query block, head), one thread per head dim (looping
// past blockDim): the block's mean query, float32, products rounded before
// each sum (flexprefill.queryAware).
extern "C" __global__ void fp_qmeans(PlanArgs a, View q, QaArgs x) {
	int qb = blockIdx.x, head = blockIdx.y;
	if (!x.qa[head]) return;
	int b = head / a.Hq, h = head % a.Hq;
	int qlo = qb * a.bq, qhi = min(qlo + a.bq, a.Nq);
	float inv = __fdiv_rn(1.0f, (float)(qhi - qlo));
	for (int d = threadIdx.x; d < a.D; d += blockDim.x) {
		float y = 0.0f;
#pragma unroll 8
		for (int i = qlo; i < qhi; i++) y = __fadd_rn(y, __fmul_rn(inv, load(q, b, h, i, d)));
		x.qm[((long long)head * a.q_blocks + qb) * a.D + d] = y;
	}
}

// fp_qmeans8 is fp_qmeans for 16-bit queries whose 8-element pieces are
// 16-byte aligned: block (group of query blocks, head), 128 threads, each
// thread eight dims of one query block (128 / (D/8) query blocks a
// block), loaded 16 bytes a row; the same sums in the same order.
extern "C" __global__ void __launch_bounds__(128) fp_qmeans8(PlanArgs a, View q, QaArgs x) {
	const int head = blockIdx.y;
	if (!x.qa[head]) return;
	const int nd = a.D / 8, per = blockDim.x / nd, sub = threadIdx.x / nd, d = (threadIdx.x % nd) * 8;
	const int qb = blockIdx.x * per + sub;
	if (sub >= per || qb >= a.q_blocks) return;
	const int b = head / a.Hq, h = head % a.Hq;
	const int qlo = qb * a.bq, qhi = min(qlo + a.bq, a.Nq);
	mean8(q, b, h, qlo, qhi, d, x.qm + ((long long)head * a.q_blocks + qb) * a.D + d);
}

#define QA_QG 8   // query blocks per fp_qa_dots block
#define QA_KC 128 // KV blocks per chunk: one per thread
#define QA_DC 32  // head dims staged per step

// fp_qa_dots: block (group of QA_QG query blocks, head of group), QA_KC
// threads: the scaled logits mean query · block mean key, each a float64
// dot product over d in increasing order (plan.Dot64: the products of
// float32 values are exact, so fused multiply-adds give its bits).
extern "C" __global__ void __launch_bounds__(QA_KC) fp_qa_dots(PlanArgs a, QaArgs x) {
	__shared__ float ks[QA_DC][QA_KC + 1];
	__shared__ __align__(16) float qs[QA_DC][QA_QG];
	int qb0 = blockIdx.x * QA_QG, hg = blockIdx.y, head = x.head0 + hg;
	if (!x.qa[head]) return;
	int b = head / a.Hq, h = head % a.Hq, kh = h / (a.Hq / a.Hkv), tid = threadIdx.x;
	int nkb = (a.Nk + a.bk - 1) / a.bk;
	const float* km = x.km + ((long long)(b * a.Hkv + kh) * nkb) * a.D;
	const float* qm = x.qm + ((long long)head * a.q_blocks) * a.D;
	double scale = (double)a.scale;
	for (int kb0 = 0; kb0 < nkb; kb0 += QA_KC) {
		double acc[QA_QG];
#pragma unroll
		for (int g = 0; g < QA_QG; g++) acc[g] = 0.0;
		for (int d0 = 0; d0 < a.D; d0 += QA_DC) {
			__syncthreads();
			for (int e = tid; e < QA_KC * QA_DC; e += blockDim.x) {
				int r = e / QA_DC, dd = e % QA_DC, kb = kb0 + r, d = d0 + dd;
				ks[dd][r] = (kb < nkb && d < a.D) ? km[(long long)kb * a.D + d] : 0.0f;
			}
			for (int e = tid; e < QA_QG * QA_DC; e += blockDim.x) {
				int g = e / QA_DC, dd = e % QA_DC, qb = qb0 + g, d = d0 + dd;
				qs[dd][g] = (qb < a.q_blocks && d < a.D) ? qm[(long long)qb * a.D + d] : 0.0f;
			}
			__syncthreads();
			int dn = min(QA_DC, a.D - d0);
			for (int dd = 0; dd < dn; dd++) {
				double kv = (double)ks[dd][tid];
#pragma unroll
				for (int g4 = 0; g4 < QA_QG; g4 += 4) {
					float4 qv = *(const float4*)&qs[dd][g4];
					acc[g4] = fma((double)qv.x, kv, acc[g4]);
					acc[g4 + 1] = fma((double)qv.y, kv, acc[g4 + 1]);
					acc[g4 + 2] = fma((double)qv.z, kv, acc[g4 + 2]);
					acc[g4 + 3] = fma((double)qv.w, kv, acc[g4 + 3]);
				}
			}
		}
		int kb = kb0 + tid;
		if (kb < nkb)
#pragma unroll
			for (int g = 0; g < QA_QG; g++)
				if (qb0 + g < a.q_blocks) x.pw[((long long)hg * a.q_blocks + qb0 + g) * nkb + kb] = mul64(acc[g], scale);
	}
}

// fp_qa_softmax: one warp per (head of group, query block): the softmax of
// the logits over every KV block (plan.Exp64, a plan.Sum64 normalizer:
// lane l adds the blocks ≡ l mod 32 in order, then the butterfly),
// renormalized over the visible blocks; −1 marks the blocks not visible.
extern "C" __global__ void fp_qa_softmax(PlanArgs a, QaArgs x) {
	long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	int l = threadIdx.x & 31;
	if (row >= (long long)x.G * a.q_blocks) return;
	int hg = row / a.q_blocks, qb = row % a.q_blocks, head = x.head0 + hg;
	if (!x.qa[head]) return;
	int nkb = (a.Nk + a.bk - 1) / a.bk, vis = visible_blocks(a, qb);
	double* pw = x.pw + row * nkb;
	if (vis == 0) {
		for (int kb = l; kb < nkb; kb += 32) pw[kb] = -1.0;
		return;
	}
	double mx = -INF64;
	for (int kb = l; kb < nkb; kb += 32) mx = fmax(mx, pw[kb]);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	double part = 0.0;
	for (int kb = l; kb < nkb; kb += 32) {
		double e = exp64_canon(__dsub_rn(pw[kb], mx));
		pw[kb] = e;
		part = add64(part, e);
	}
	double S = warp_sum(part);
	part = 0.0;
	for (int kb = l; kb < nkb; kb += 32) {
		double w = __ddiv_rn(pw[kb], S);
		pw[kb] = w;
		if (kb < vis) part = add64(part, w);
	}
	double S2 = warp_sum(part);
	for (int kb = l; kb < nkb; kb += 32) pw[kb] = kb < vis ? __ddiv_rn(pw[kb], S2) : -1.0;
}

// The query-aware selection (fp_qa_select's bin_cover, spread over
// QaSel.chunks blocks per head): fp_qa_hist adds each chunk of a head's
// pairs to the head's global histogram; fp_qa_mark finds the crossing
// bin, flags the pairs above it and counts each chunk's pairs in it;
// fp_qa_list gathers those, in index order; fp_qa_select takes the exact
// cover over them. The histogram is exact (integer sums), so the cut is
// bin_cover's.

// QaSel mirrors cuda.qaSel: the query-aware selection's scratch.
struct QaSel {
	u32* cnt;       // [G][QA_BINS] bin counts (zero before fp_qa_hist)
	u64* fs;        // [G][QA_BINS] bin fixed-point sums (zero before fp_qa_hist)
	int* ccnt;      // [G][chunks] each chunk's pairs in the crossing bin
	long long* cut; // [G][3]: the crossing bin (−1: all fit), the sum and count above it
	int chunks, chunk;
};

// fp_qa_hist: block (chunk, head of group), 256 threads: the chunk's
// pairs added to the head's histogram.
extern "C" __global__ void __launch_bounds__(256) fp_qa_hist(PlanArgs a, QaArgs x, QaSel s) {
	__shared__ u32 cnt[QA_BINS];
	__shared__ u64 fs[QA_BINS];
	const int hg = blockIdx.y, head = x.head0 + hg;
	if (!x.qa[head]) return;
	const int nkb = (a.Nk + a.bk - 1) / a.bk, n = a.q_blocks * nkb;
	const int lo = blockIdx.x * s.chunk, hi = min(lo + s.chunk, n);
	if (lo >= hi) return;
	const double* pw = x.pw + (long long)hg * n;
	for (int b = threadIdx.x; b < QA_BINS; b += blockDim.x) cnt[b] = 0, fs[b] = 0;
	__syncthreads();
	bin_hist([&](int i) -> double { return pw[i]; }, lo, hi, x.shift, cnt, fs);
	__syncthreads();
	u32* gc = s.cnt + (long long)hg * QA_BINS;
	u64* gf = s.fs + (long long)hg * QA_BINS;
	for (int b = threadIdx.x; b < QA_BINS; b += blockDim.x)
		if (cnt[b] != 0) {
			atomicAdd(&gc[b], cnt[b]);
			atomicAdd((unsigned long long*)&gf[b], (unsigned long long)fs[b]);
		}
}

// fp_qa_mark: block (chunk, head of group), 256 threads: the crossing bin
// B from the head's histogram (chunk 0 records it), the flags of the
// chunk's pairs (kept: a candidate in a bin above B, or any candidate when
// all fit; bin B's are decided by fp_qa_select), and the chunk's count of
// bin-B candidates.
extern "C" __global__ void __launch_bounds__(256) fp_qa_mark(PlanArgs a, QaArgs x, QaSel s) {
	__shared__ int sbin, scnt, wc[8];
	__shared__ u64 sabove;
	const int hg = blockIdx.y, head = x.head0 + hg, tid = threadIdx.x, w = tid >> 5, l = tid & 31;
	if (!x.qa[head]) return;
	const int nkb = (a.Nk + a.bk - 1) / a.bk, n = a.q_blocks * nkb;
	const int lo = blockIdx.x * s.chunk, hi = min(lo + s.chunk, n);
	if (tid == 0) sbin = -1, sabove = 0, scnt = 0;
	__syncthreads();
	if (w == 0) bin_cross(s.cnt + (long long)hg * QA_BINS, s.fs + (long long)hg * QA_BINS, x.budget, &sbin, &sabove, &scnt);
	__syncthreads();
	const int B = sbin;
	if (blockIdx.x == 0 && tid == 0) {
		long long* c = s.cut + 3ll * hg;
		c[0] = B;
		c[1] = (long long)sabove;
		c[2] = scnt;
	}
	const double* pw = x.pw + (long long)hg * n;
	unsigned char* fl = x.flag + (long long)head * n;
	int inb = 0;
	for (int i = lo + tid; i < hi; i += blockDim.x) {
		const double v = pw[i];
		const int b = v >= 0.0 ? qa_bin(v) : -1;
		fl[i] = v >= 0.0 && (B < 0 || b > B);
		inb += v >= 0.0 && b == B;
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) inb += __shfl_xor_sync(0xffffffffu, inb, o);
	if (l == 0) wc[w] = inb;
	__syncthreads();
	if (tid == 0) {
		int t = 0;
		for (int y = 0; y < (int)(blockDim.x >> 5); y++) t += wc[y];
		s.ccnt[(long long)hg * s.chunks + blockIdx.x] = t;
	}
}

// fp_qa_list: block (chunk, head of group), 256 threads: the chunk's
// bin-B candidates, in index order, at their place in the head's list
// (after the earlier chunks').
extern "C" __global__ void __launch_bounds__(256) fp_qa_list(PlanArgs a, QaArgs x, QaSel s) {
	__shared__ int wcnt[8];
	const int hg = blockIdx.y, head = x.head0 + hg, tid = threadIdx.x, w = tid >> 5, l = tid & 31, nw = blockDim.x >> 5;
	if (!x.qa[head]) return;
	const int B = (int)s.cut[3ll * hg];
	if (B < 0) return;
	const int nkb = (a.Nk + a.bk - 1) / a.bk, n = a.q_blocks * nkb;
	const int lo = blockIdx.x * s.chunk, hi = min(lo + s.chunk, n);
	const int* cc = s.ccnt + (long long)hg * s.chunks;
	int carry = 0;
	for (int c = 0; c < (int)blockIdx.x; c++) carry += cc[c];
	const double* pw = x.pw + (long long)hg * n;
	int* list = x.list + (long long)hg * n;
	for (int base = lo; base < hi; base += blockDim.x) {
		const int i = base + tid;
		bool in = false;
		if (i < hi) {
			const double v = pw[i];
			in = v >= 0.0 && qa_bin(v) == B;
		}
		const u32 bal = __ballot_sync(0xffffffffu, in);
		if (l == 0) wcnt[w] = __popc(bal);
		__syncthreads();
		int wpre, tot;
		block_prefix(wcnt, nw, w, wpre, tot);
		if (in) list[carry + wpre + __popc(bal & ((1u << l) - 1))] = i;
		carry += tot;
		__syncthreads();
	}
}

// fp_qa_select: one 1024-thread block per head of the group: of the
// crossing bin's candidates (fp_qa_list), the heaviest (ties in (query
// block, KV block) order) while the cumulative mass stays within what is
// left of γ × the rows with a visible block.
extern "C" __global__ void __launch_bounds__(1024) fp_qa_select(PlanArgs a, QaArgs x, QaSel s) {
	__shared__ SelShared sh;
	const int hg = blockIdx.x, head = x.head0 + hg;
	if (!x.qa[head]) return;
	const long long* cut = s.cut + 3ll * hg;
	if (cut[0] < 0) return;
	const u64 A = (u64)cut[1];
	const int nkb = (a.Nk + a.bk - 1) / a.bk, n = a.q_blocks * nkb;
	int m = 0;
	for (int c = 0; c < s.chunks; c++) m += s.ccnt[(long long)hg * s.chunks + c];
	const double* pw = x.pw + (long long)hg * n;
	const int* list = x.list + (long long)hg * n;
	unsigned char* fl = x.flag + (long long)head * n;
	auto key = [&](int j) -> u64 { return dbits(pw[list[j]]) + 1; };
	auto fx = [&](int j) -> u64 { return to_fixed(pw[list[j]], x.shift); };
	const Cut c = cover_cut(key, fx, m, x.budget - A, sh);
	cut_mark(key, m, c, [&](int j, bool sel, int) { fl[list[j]] = sel; });
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
