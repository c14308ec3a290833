// The S2O planner on the device (package method/s2o; Zhang et al., "S2O:
// Early Stopping for Sparse Attention via Online Permutation", §3.1,
// Alg. 1). The plan's rows, stop rule and order layout do not depend on
// the inputs (s2o.Planner.Layout, uploaded once); these kernels rank its
// orders in place:
//
//   - s2o_means: the guide key (mean key of the first segment) per KV head
//     and the mean query of every segment, each a float64 sum in row order
//     divided by the count and rounded to float32, as s2o's meanRows;
//   - s2o_qscore: each query's score against the guide key (Eq. 1), when
//     there are no outlier queries (s2o_outq scores them otherwise);
//   - s2o_kscore: each ranked key's score against its segment's mean
//     query (Eq. 2), per tile of keys for every query head and segment;
//   - s2o_outq (our extension, method/s2o/outlier.go): each segment's
//     outlier queries, those farthest from its mean query, picked as s2o's
//     pickOutliers, and in the same read each query's score of Eq. 1;
//     s2o_kscore then also finds each outlier's top ranked key;
//   - s2o_promote: the outliers' top keys get sort key 0 (first);
//   - s2o_sort and s2o_merge: a stable descending sort of every list (a
//     segment's queries, or a segment's ranked keys): s2o_sort sorts each
//     chunk of 4096 elements in one CTA, and s2o_merge's levels merge a
//     longer list's sorted runs pairwise, a CTA per 4096 outputs, so that
//     a long list is spread over many CTAs.
//
// Scores are s2o.Score: the float64 dot product with exact products added
// in index order (an FMA gives the same bits, the product being exact),
// rounded to float32; they are sorted on an order-preserving 32-bit key,
// ties in index order, as s2o's ranker does on the CPU (a list element
// holds its token below the key, and the lists are written in token
// order, so that order is the elements' own ascending order).

// S2OArgs mirrors cuda.s2oArgs on the Go side. A list element is a u64,
// the sort key in the high word and the token in the low word.
struct S2OArgs {
	View q, k;
	float* guide;   // [B·Hkv, D]
	double* qmean;  // [B·Hq·segs, D]: float32 values, kept as float64 for s2o_kscore
	u64* qbuf;      // query lists [B·Hq·Nq], and their second buffer
	u64* qbuf2;
	int* qorder;    // Q_perm [B·Hq·Nq]
	u64* kbuf;      // key lists, indexed as kv_order, and their second buffer
	u64* kbuf2;
	int* kv_order;  // the key orders
	const int* kv_start; // [B·Hq·segs + 1]
	int B, Hq, Hkv, Nq, Nk, D;
	int seg, win, causal, segs;
	double* oq;  // [B·Hq·segs·outliers, D]: the outlier queries, float32 values as float64
	int* otok;   // [B·Hq·segs·outliers]: their tokens, −1 past the segment's last
	u64* otop;   // [B·Hq·segs·outliers]: their top keys, (desc_key(score), token), ~0 for none
	int outliers; // outlier queries per segment; 0: none (the paper's order)
};
static_assert(sizeof(S2OArgs) == 256, "S2OArgs: cuda.s2oArgs's size (TestS2OArgsLayout checks the offsets)");

// s2o_window gives segment n's pass-1 keys [wlo, whi), as s2o's window.
__device__ __forceinline__ void s2o_window(const S2OArgs& a, int n, int& wlo, int& whi) {
	int off = a.Nk - a.Nq;
	int qlo = n * a.seg, qhi = min(qlo + a.seg, a.Nq);
	whi = min(max(qhi + off, 0), a.Nk);
	wlo = min(max(qlo + off - a.win, 0), whi);
}

// desc_key is s2o's descKey: ascending keys are descending scores, −0 and
// +0 equal, NaN last.
__device__ __forceinline__ u32 desc_key(float s) {
	if (s != s) return 0xffffffffu;
	if (s == 0.0f) s = 0.0f;
	u32 u = __float_as_uint(s);
	u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
	return ~u;
}

// elem is element i of a tensor of input type DT as float32 (exact): load
// without the type switch, which kept loads from issuing ahead of each other.
template <int DT> __device__ __forceinline__ float elem(const void* p, long long i) {
	if (DT == DT_F32) return ((const float*)p)[i];
	if (DT == DT_F16) return f16_to_f32(((const u16*)p)[i]);
	return bf16_to_f32(((const u16*)p)[i]);
}

#define MEAN_STAGE 16384 // bytes of rows one s2o_means stage holds; two stages

// S2ORaw is the storage type of an input type.
template <int DT> struct S2ORaw {
	typedef u16 T;
};
template <> struct S2ORaw<DT_F32> {
	typedef float T;
};

// col_sums sets acc, for thread c < D, to Σ t[b, h, n, c] over rows n in
// [lo, hi), in float64 in row order. The block stages rows in shared
// memory, MEAN_STAGE bytes at a time, the next stage loading (16-byte
// cp.async where rows align, else element by element) while thread c adds
// column c of this one. With each thread loading its own column, 32 rows
// in flight, s2o_means was bound by memory latency (0.33 ms at 32K,
// S = 2048, H100: a quarter of the bandwidth).
template <int DT> __device__ __forceinline__ void col_sums(const View& t, int b, int h, int lo, int hi, int D, unsigned char* stage, double& acc) {
	typedef typename S2ORaw<DT>::T T;
	const int rowb = D * (int)sizeof(T), rows = MEAN_STAGE / rowb, tid = threadIdx.x;
	const T* base = (const T*)t.ptr + (long long)b * t.sb + (long long)h * t.sh;
	bool vec = rowb % 16 == 0 && t.sn * (long long)sizeof(T) % 16 == 0 && (unsigned long long)base % 16 == 0;
	auto issue = [&](int r0, unsigned char* dst) {
		int rn = min(rows, hi - r0);
		if (vec) {
			int pieces = rowb / 16;
			for (int p = tid; p < rn * pieces; p += blockDim.x) {
				int r = p / pieces, c = p % pieces;
				u32 d = (u32)__cvta_generic_to_shared(dst + r * rowb + c * 16);
				asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"((const unsigned char*)(base + (long long)(r0 + r) * t.sn) + c * 16));
			}
		} else {
			for (int e = tid; e < rn * D; e += blockDim.x) ((T*)dst)[e] = base[(long long)(r0 + e / D) * t.sn + e % D];
		}
		asm volatile("cp.async.commit_group;\n" ::);
	};
	acc = 0.0;
	issue(lo, stage);
	for (int r0 = lo, s = 0; r0 < hi; r0 += rows, s ^= 1) {
		issue(r0 + rows, stage + (s ^ 1) * MEAN_STAGE); // no rows past hi: an empty group
		asm volatile("cp.async.wait_group 1;\n" ::: "memory");
		__syncthreads();
		if (tid < D) {
			const T* col = (const T*)(stage + s * MEAN_STAGE) + tid;
			int rn = min(rows, hi - r0), r = 0;
			for (; r + 8 <= rn; r += 8) {
				float v[8];
#pragma unroll
				for (int u = 0; u < 8; u++) v[u] = elem<DT>(col, (long long)(r + u) * D);
#pragma unroll
				for (int u = 0; u < 8; u++) acc = __dadd_rn(acc, (double)v[u]);
			}
			for (; r < rn; r++) acc = __dadd_rn(acc, (double)elem<DT>(col, (long long)r * D));
		}
		__syncthreads(); // the stage is overwritten two rounds on
	}
}

// s2o_means: block x < B·Hkv computes that KV head's guide key, the others
// one (b·Hq + h, segment) mean query; thread c sums column c in row order
// (col_sums) and writes the sum over the count, rounded to float32.
extern "C" __global__ void __launch_bounds__(128) s2o_means(S2OArgs a) {
	__shared__ __align__(16) unsigned char stage[2 * MEAN_STAGE];
	int x = blockIdx.x;
	View t;
	int b, h, lo, hi;
	float* dst = nullptr;
	double* dst64 = nullptr;
	if (x < a.B * a.Hkv) {
		t = a.k, b = x / a.Hkv, h = x % a.Hkv, lo = 0, hi = min(a.seg, a.Nk);
		dst = a.guide + (long long)x * a.D;
	} else {
		x -= a.B * a.Hkv;
		int bh = x / a.segs, n = x % a.segs;
		t = a.q, b = bh / a.Hq, h = bh % a.Hq, lo = n * a.seg, hi = min(lo + a.seg, a.Nq);
		dst64 = a.qmean + (long long)x * a.D;
	}
	double acc;
	switch (t.dtype) {
	case DT_F32:
		col_sums<DT_F32>(t, b, h, lo, hi, a.D, stage, acc);
		break;
	case DT_F16:
		col_sums<DT_F16>(t, b, h, lo, hi, a.D, stage, acc);
		break;
	default:
		col_sums<DT_BF16>(t, b, h, lo, hi, a.D, stage, acc);
	}
	int c = threadIdx.x;
	if (c < a.D) {
		float m = hi > lo ? (float)__ddiv_rn(acc, (double)(hi - lo)) : 0.0f;
		if (dst) dst[c] = m;
		else dst64[c] = (double)m;
	}
}

#define QS_COLS 64 // head-dimension columns s2o_qscore stages at a time

// stage_query_cols copies columns c0 … c0 + QS_COLS − 1 (those below D)
// of a warp's rows query tokens i0 … i0 + rows − 1 (head offset base) into
// tile, a row per token, and syncs the warp: qscore_rows' and outq_pass'
// staging.
template <int DT>
__device__ __forceinline__ void stage_query_cols(const S2OArgs& a, float (*tile)[QS_COLS + 1], long long base, int i0, int rows, int c0, int lane) {
	for (int r = 0; r < rows; r++) {
#pragma unroll
		for (int u = 0; u < QS_COLS; u += 32)
			if (c0 + u + lane < a.D) tile[r][u + lane] = elem<DT>(a.q.ptr, base + (long long)(i0 + r) * a.q.sn + c0 + u + lane);
	}
	__syncwarp();
}

// qscore_rows is s2o_qscore for input type DT: each warp stages its 32
// queries' rows in shared memory, QS_COLS columns at a time, with loads
// along a row (a thread reading its own row touched 32 rows a load), then
// each thread adds its row's products in column order.
template <int DT> __device__ __forceinline__ void qscore_rows(const S2OArgs& a, float (*tile)[QS_COLS + 1], const double* g) {
	int bh = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int i0 = blockIdx.x * blockDim.x + w * 32, i = i0 + lane;
	int b = bh / a.Hq, h = bh % a.Hq;
	const long long base = (long long)b * a.q.sb + (long long)h * a.q.sh;
	int rows = min(32, a.Nq - i0);
	double s = 0.0;
	for (int c0 = 0; c0 < a.D; c0 += QS_COLS) {
		stage_query_cols<DT>(a, tile, base, i0, rows, c0, lane);
		int nc = min(QS_COLS, a.D - c0);
		if (i < a.Nq)
			for (int c = 0; c < nc; c++) s = __fma_rn((double)tile[lane][c], g[c0 + c], s);
		__syncwarp();
	}
	if (i < a.Nq) a.qbuf[(long long)bh * a.Nq + i] = (u64)desc_key((float)s) << 32 | (u32)i;
}

// stage_guide copies the guide key of query head bh's KV head to gs as
// float64 (exact), and syncs the block.
__device__ __forceinline__ void stage_guide(const S2OArgs& a, int bh, double* gs) {
	int b = bh / a.Hq, h = bh % a.Hq;
	const float* g = a.guide + (long long)(b * a.Hkv + h / (a.Hq / a.Hkv)) * a.D;
	for (int c = threadIdx.x; c < a.D; c += blockDim.x) gs[c] = (double)g[c];
	__syncthreads();
}

// s2o_qscore: thread per query (blockIdx.y = b·Hq + h) scores it against
// its KV head's guide key (Eq. 1): its list element, in token order
// (qscore_rows; the guide staged as float64, stage_guide). Only with no
// outlier queries: s2o_outq scores the queries otherwise. 128 threads.
extern "C" __global__ void __launch_bounds__(128) s2o_qscore(S2OArgs a) {
	__shared__ float tile[4][32][QS_COLS + 1];
	__shared__ double gs[128];
	float(*mine)[QS_COLS + 1] = tile[threadIdx.x >> 5];
	stage_guide(a, blockIdx.y, gs);
	if (blockIdx.x * blockDim.x + (threadIdx.x & ~31) >= a.Nq) return; // a warp past the last query
	switch (a.q.dtype) {
	case DT_F32:
		qscore_rows<DT_F32>(a, mine, gs);
		break;
	case DT_F16:
		qscore_rows<DT_F16>(a, mine, gs);
		break;
	default:
		qscore_rows<DT_BF16>(a, mine, gs);
	}
}

// outq_pass is one pass of s2o_outq over segment [qlo, qhi) of query head
// (b, h), for input type DT: each warp stages its 32 queries' rows in
// shared memory, QS_COLS columns at a time (as qscore_rows), and each lane
// adds its query's squared distance from the mean m in column order —
// float64 difference of the float32 values, squared and rounded, then
// added (s2o's distances; NaN as −1) — and keeps the largest (distance,
// earliest token) strictly below the previous pick (pd, pi; none when pi
// < 0) in (bd, bi). With SCORE (the first pass, Q_perm on), each lane also
// scores its query against the guide key g (Eq. 1, as qscore_rows: one
// read of the queries for both) and writes its list element.
template <int DT, bool SCORE> __device__ __forceinline__ void outq_pass(const S2OArgs& a, int b, int h, int qlo, int qhi, const double* m, const double* g, float (*tile)[QS_COLS + 1], double pd, int pi, double& bd, int& bi) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	const long long base = (long long)b * a.q.sb + (long long)h * a.q.sh;
	for (int i0 = qlo + w * 32; i0 < qhi; i0 += blockDim.x) {
		int rows = min(32, qhi - i0), i = i0 + lane;
		double r = 0.0, s = 0.0;
		for (int c0 = 0; c0 < a.D; c0 += QS_COLS) {
			stage_query_cols<DT>(a, tile, base, i0, rows, c0, lane);
			int nc = min(QS_COLS, a.D - c0);
			if (lane < rows)
				for (int c = 0; c < nc; c++) {
					double x = (double)tile[lane][c];
					double e = __dsub_rn(x, m[c0 + c]);
					r = __dadd_rn(r, __dmul_rn(e, e));
					if (SCORE) s = __fma_rn(x, g[c0 + c], s);
				}
			__syncwarp();
		}
		if (SCORE && lane < rows) a.qbuf[(long long)(b * a.Hq + h) * a.Nq + i] = (u64)desc_key((float)s) << 32 | (u32)i;
		if (lane < rows) {
			if (r != r) r = -1.0;
			bool below = pi < 0 || r < pd || (r == pd && i > pi);
			if (below && (bi < 0 || r > bd)) bd = r, bi = i; // tokens rise: the first of ties stays
		}
	}
}

// outq_any is outq_pass for the input's dtype.
template <bool SCORE> __device__ __forceinline__ void outq_any(const S2OArgs& a, int b, int h, int qlo, int qhi, const double* m, const double* g, float (*tile)[QS_COLS + 1], double pd, int pi, double& bd, int& bi) {
	switch (a.q.dtype) {
	case DT_F32:
		outq_pass<DT_F32, SCORE>(a, b, h, qlo, qhi, m, g, tile, pd, pi, bd, bi);
		break;
	case DT_F16:
		outq_pass<DT_F16, SCORE>(a, b, h, qlo, qhi, m, g, tile, pd, pi, bd, bi);
		break;
	default:
		outq_pass<DT_BF16, SCORE>(a, b, h, qlo, qhi, m, g, tile, pd, pi, bd, bi);
	}
}

// s2o_outq: block l = (b·Hq + h)·segs + n picks segment n's outlier
// queries, a.outliers rounds (s2o's pickOutliers: each the largest
// distance, earliest token of ties, below the previous pick; the distances
// are recomputed each round, in the same operations), writes each one's
// token to otok and its row to oq (float32 values as float64), and sets
// the top-key slots otop that s2o_kscore lowers to ~0. A round past the
// segment's last query writes token −1. With a.qbuf (Q_perm), the first
// round also gives each of the segment's queries its list element, as
// s2o_qscore does (which then does not run). The mean query and the guide
// key are staged as float64. 128 threads.
extern "C" __global__ void __launch_bounds__(128) s2o_outq(S2OArgs a) {
	__shared__ float tile[4][32][QS_COLS + 1];
	__shared__ double wd[4], pickd, ms[128], gs[128];
	__shared__ int wi[4], pick;
	float(*mine)[QS_COLS + 1] = tile[threadIdx.x >> 5];
	int l = blockIdx.x, bh = l / a.segs, n = l % a.segs, b = bh / a.Hq, h = bh % a.Hq;
	int qlo = n * a.seg, qhi = min(qlo + a.seg, a.Nq);
	const double* m = ms;
	for (int c = threadIdx.x; c < a.D; c += blockDim.x) ms[c] = a.qmean[(long long)l * a.D + c];
	stage_guide(a, bh, gs); // and syncs ms
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	double pd = 0.0;
	int pi = -1;
	for (int o = 0; o < a.outliers; o++) {
		long long slot = (long long)l * a.outliers + o;
		double bd = 0.0;
		int bi = -1;
		if (o == 0 && a.qbuf)
			outq_any<true>(a, b, h, qlo, qhi, m, gs, mine, pd, pi, bd, bi);
		else if (pi >= 0 || o == 0)
			outq_any<false>(a, b, h, qlo, qhi, m, gs, mine, pd, pi, bd, bi);
		// The block's best: larger distance first, then the earlier token
		// (−1: none).
		for (int off = 16; off > 0; off >>= 1) {
			double od = __shfl_xor_sync(0xffffffffu, bd, off);
			int oi = __shfl_xor_sync(0xffffffffu, bi, off);
			if (oi >= 0 && (bi < 0 || od > bd || (od == bd && oi < bi))) bd = od, bi = oi;
		}
		if (lane == 0) wd[w] = bd, wi[w] = bi;
		__syncthreads();
		if (threadIdx.x == 0) {
			double cd = wd[0];
			int ci = wi[0];
			for (int x = 1; x < 4; x++)
				if (wi[x] >= 0 && (ci < 0 || wd[x] > cd || (wd[x] == cd && wi[x] < ci))) cd = wd[x], ci = wi[x];
			pick = ci, pickd = cd;
			a.otok[slot] = ci;
			a.otop[slot] = ~0ull;
		}
		__syncthreads();
		pi = pick, pd = pickd;
		if (pi >= 0)
			for (int c = threadIdx.x; c < a.D; c += blockDim.x) a.oq[slot * a.D + c] = (double)load(a.q, b, h, pi, c);
		__syncthreads(); // wd, wi, pick and pickd are rewritten next round
	}
}

#define KS_KEYS 64   // keys a block stages, two a lane
#define KS_WARPS 8
#define KS_VECS 8    // query vectors (mean and outlier queries) a warp scores at once
#define KS_COLS 32   // columns of its vectors a warp stages at a time
#define KS_STRIDE 130 // doubles a staged key row takes: 16-byte rows, double2 loads without bank conflicts
// KS_SHARED is s2o_kscore's dynamic shared memory (cuda.s2oKscoreShared):
// the key tile as float64 and each warp's staged vector columns.
#define KS_SHARED ((KS_KEYS * KS_STRIDE + KS_WARPS * KS_VECS * KS_COLS) * 8)
static_assert(KS_SHARED == 82944, "KS_SHARED: cuda.s2oKscoreShared");

// s2o_kscore: a tile of KS_KEYS keys of KV head blockIdx.y (b·Hkv + kh),
// staged once as float64 (so the inner loop converts nothing: with a
// float32 tile, one float32-to-float64 conversion per product, at a
// quarter of the FP64 rate, bound the kernel). The vectors that rank the
// tile — for every segment with a ranked key in it, each query head of
// the group's mean query, then its outlier queries (s2o_outq), G1 =
// group·(1 + outliers) a segment — are taken KS_VECS at a time by the
// warps in turn, their columns staged KS_COLS at a time (the next ones
// loaded into registers while these are used); each lane scores its two
// keys against the warp's KS_VECS vectors, 16 float64 sums, each in column
// order, as before. A mean query writes each ranked key's list element
// (score of Eq. 2, token) at its place in the segment's ranked keys, in
// token order; an outlier query's top ranked key of the tile, the smallest
// (desc_key(score), token), lowers its slot (s2o's keyRank; the same
// scores in the same operations as the mean query's). The segments with
// no ranked key in the tile are a contiguous range (windows only move
// right), skipped. KS_SHARED bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(KS_WARPS * 32, 2) s2o_kscore(S2OArgs a) {
	extern __shared__ __align__(16) double ksm[];
	double* ks = ksm;
	const unsigned full = 0xffffffffu;
	int bk = blockIdx.y, b = bk / a.Hkv, kh = bk % a.Hkv;
	int j0 = blockIdx.x * KS_KEYS, nj = min(KS_KEYS, a.Nk - j0);
	int dp = (a.D + 1) & ~1; // columns, rounded up to pairs; a zero column pads an odd D
	for (int e = threadIdx.x; e < KS_KEYS * dp; e += blockDim.x) {
		int r = e / dp, c = e % dp;
		ks[r * KS_STRIDE + c] = r < nj && c < a.D ? (double)load(a.k, b, kh, j0 + r, c) : 0.0;
	}
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	double* vb = ksm + KS_KEYS * KS_STRIDE + w * KS_VECS * KS_COLS;
	int group = a.Hq / a.Hkv, per = 1 + a.outliers, g1 = group * per;
	// The segments without a ranked key in the tile: [na, na + nskip).
	int na = a.segs, nskip = 0;
	for (int n0 = 0; n0 < a.segs; n0 += 32) {
		int n = n0 + lane;
		bool skip = false;
		if (n < a.segs) {
			int wlo, whi;
			s2o_window(a, n, wlo, whi);
			skip = j0 >= wlo && (a.causal || j0 + nj <= whi);
		}
		unsigned m = __ballot_sync(full, skip);
		nskip += __popc(m);
		if (m && na == a.segs) na = n0 + __ffs(m) - 1;
	}
	const int nvec = (a.segs - nskip) * g1, items = (nvec + KS_VECS - 1) / KS_VECS;
	// locate gives active vector p's segment n, query head bh and kind t
	// (0: the mean query; t ≥ 1: outlier query t − 1).
	auto locate = [&](int p, int& n, int& bh, int& t) {
		int vi = p < na * g1 ? p : p + nskip * g1;
		n = vi / g1;
		int r = vi % g1;
		t = r % per;
		bh = b * a.Hq + kh * group + r / per;
	};
	// Each warp's vectors of its item (vp[w][0]) and its next (vp[w][1]),
	// nullptr past the last; pre holds their next columns, column lane of
	// each.
	__shared__ const double* vp[KS_WARPS][2][KS_VECS];
	double pre[KS_VECS];
	auto point = [&](int it, int slot) {
		if (lane < KS_VECS) {
			int p = it * KS_VECS + lane, n, bh, t;
			const double* x = nullptr;
			if (p < nvec) {
				locate(p, n, bh, t);
				long long l = (long long)bh * a.segs + n;
				x = t == 0 ? a.qmean + l * a.D : a.oq + (l * a.outliers + t - 1) * a.D;
			}
			vp[w][slot][lane] = x;
		}
		__syncwarp();
	};
	auto fetch = [&](int slot, int c0) {
		int c = c0 + lane;
#pragma unroll
		for (int v = 0; v < KS_VECS; v++) {
			const double* x = vp[w][slot][v];
			pre[v] = x && c < a.D ? x[c] : 0.0;
		}
	};
	__syncthreads(); // the key tile
	if (w < items) {
		point(w, 0);
		fetch(0, 0);
	}
	for (int it = w, cur = 0; it < items; it += KS_WARPS, cur ^= 1) {
		double acc[KS_VECS][2];
#pragma unroll
		for (int v = 0; v < KS_VECS; v++) acc[v][0] = acc[v][1] = 0.0;
		for (int c0 = 0; c0 < dp; c0 += KS_COLS) {
			__syncwarp(); // every lane is done with the last columns
#pragma unroll
			for (int v = 0; v < KS_VECS; v++) vb[v * KS_COLS + lane] = pre[v];
			__syncwarp();
			if (c0 + KS_COLS < dp) fetch(cur, c0 + KS_COLS);
			else if (it + KS_WARPS < items) {
				point(it + KS_WARPS, cur ^ 1);
				fetch(cur ^ 1, 0);
			}
			int nc = min(KS_COLS, dp - c0);
			const double* k0 = ks + lane * KS_STRIDE + c0;
			const double* k1 = k0 + 32 * KS_STRIDE;
#pragma unroll 2
			for (int c = 0; c < nc; c += 2) {
				double2 x0 = *(const double2*)(k0 + c), x1 = *(const double2*)(k1 + c);
#pragma unroll
				for (int v = 0; v < KS_VECS; v++) {
					double2 m = *(const double2*)(vb + v * KS_COLS + c);
					acc[v][0] = __fma_rn(m.x, x0.x, acc[v][0]);
					acc[v][1] = __fma_rn(m.x, x1.x, acc[v][1]);
					acc[v][0] = __fma_rn(m.y, x0.y, acc[v][0]);
					acc[v][1] = __fma_rn(m.y, x1.y, acc[v][1]);
				}
			}
		}
#pragma unroll
		for (int v = 0; v < KS_VECS; v++) {
			int p = it * KS_VECS + v, n, bh, t; // p, and so all below, is the warp's
			if (p >= nvec) break;
			locate(p, n, bh, t);
			int wlo, whi;
			s2o_window(a, n, wlo, whi);
			long long l = (long long)bh * a.segs + n;
			if (t == 0) {
				long long base = (long long)a.kv_start[l] + (whi - wlo);
#pragma unroll
				for (int u = 0; u < 2; u++) {
					int jj = lane + 32 * u, j = j0 + jj;
					if (jj >= nj) break;
					long long r;
					if (j < wlo) r = j;
					else if (!a.causal && j >= whi) r = wlo + (j - whi);
					else continue;
					a.kbuf[base + r] = (u64)desc_key((float)acc[v][u]) << 32 | (u32)j;
				}
				continue;
			}
			long long slot = l * a.outliers + t - 1;
			if (a.otok[slot] < 0) continue;
			u64 best = ~0ull;
#pragma unroll
			for (int u = 0; u < 2; u++) {
				int jj = lane + 32 * u, j = j0 + jj;
				bool ranked = jj < nj && (j < wlo || (!a.causal && j >= whi));
				u64 e = (u64)desc_key((float)acc[v][u]) << 32 | (u32)j;
				if (ranked && e < best) best = e;
			}
			for (int off = 16; off > 0; off >>= 1) {
				u64 other = __shfl_xor_sync(full, best, off);
				if (other < best) best = other;
			}
			if (lane == 0 && best != ~0ull) atomicMin(&a.otop[slot], best);
		}
	}
}

// s2o_promote gives the top keys of list blockIdx.x's outlier queries
// (s2o_kscore) key 0 in the list's elements, below every score's desc_key,
// so that the sort (s2o_sort, s2o_merge) leaves them in token order
// ahead of the rest (s2o's promote). A kernel of its own: in s2o_sort's prologue it
// made the sort spill (56 bytes against 8). 32 threads.
extern "C" __global__ void __launch_bounds__(32) s2o_promote(S2OArgs a) {
	int l = blockIdx.x, n = l % a.segs;
	int wlo, whi;
	s2o_window(a, n, wlo, whi);
	u64* kb = a.kbuf + (long long)a.kv_start[l] + (whi - wlo);
	for (int o = threadIdx.x; o < a.outliers; o += blockDim.x) {
		long long slot = (long long)l * a.outliers + o;
		u64 top = a.otop[slot];
		if (a.otok[slot] < 0 || top == ~0ull) continue;
		int j = (int)(u32)top;
		kb[j < wlo ? j : wlo + (j - whi)] = (u64)(u32)j;
	}
}

#include "s2o_sort.cuh"
