// The attention probe of the last queries of every head, on the tensor
// cores, and (select64.cuh, included at the end) the radix selections
// over 64-bit keys that the MInference (plan_minference.cu) and
// FlexPrefill (plan_flexprefill.cu) planners share. Compile-time: HEAD_DIM_PAD (the head dim rounded up to 16) and
// DTYPE (DT_F32, DT_F16 or DT_BF16).
//
// The probe is package method/internal/probe's softmax of the last n
// queries over all keys, summed per key (vertical) and per query−key
// offset (slash). Unlike the CPU, it scores QKᵀ with mma.sync (16-bit
// products are exact, accumulated in float32; float32 inputs are split
// into bf16 high and low halves, three products, as plan_oracle.cu does)
// and exponentiates in float32 base 2 (ex2.approx.ftz, the softmax scale
// and log2 e folded into one fused multiply-add), summing the
// probabilities in float32 within 16 rows and in float64 beyond. So its
// line scores differ from the CPU's by about 1e-6 relative (bounded in
// cuda/selftest's probeTol), and a line that close to a selection boundary
// may be chosen by one side only.
//
// Pipeline (every head at once; r = row chunk of PR_RC probe rows, t = key
// tile of PR_PT keys; a block walks PR_TILES tiles; λ = scale·log2 e and a
// the raw QKᵀ dot product, so l·log2 e = a·λ):
//   probe_stats   per (row, tile): the tile's maximum m_t of a·λ and
//                 s_t = Σ 2^(a·λ − m_t)
//   probe_norm    per row: m = max m_t, S = Σ_t s_t·2^(m_t − m) (float64)
//                 and the row's bias β = m + log2 S, rounded to float32
//   probe_lines   recomputes the logits; P = 2^(a·λ − β) = exp(l − max)/Σ;
//                 per (chunk, tile) the column sums and diagonal sums of P
//   probe_combine v[j] and s[d], adding the partial sums in a fixed order

#ifndef PR_WARPS
#define PR_WARPS 4 // warps per probe block (the Go side sets 8 for more than 64 probe rows)
#endif
#define PR_RC (16 * PR_WARPS) // probe rows per block: 16 per warp
#define PR_KSTEPS (HEAD_DIM_PAD / 16)
#if DTYPE == DT_F32 && HEAD_DIM_PAD > 128
#define PR_PT 32 // keys per tile
#else
#define PR_PT 64
#endif
#define PR_WIN (PR_PT + PR_RC - 1) // diagonals one (chunk, tile) meets
#define PR_STR (HEAD_DIM_PAD + 8)  // key tile row stride, 16-bit elements
#define PR_NEG_INF __int_as_float(0xff800000)
#define PR_LOG2E 1.4426950408889634f
// Blocks a multiprocessor for the probe's tensor-core kernels: sixteen
// warps (at most 128 registers a thread) for 16-bit inputs with D ≤ 128,
// eight (255) for float32's three products or a 256-wide head.
#if DTYPE == DT_F32 || HEAD_DIM_PAD > 128
#define PR_MINB (PR_WARPS >= 8 ? 1 : 8 / PR_WARPS)
#else
#define PR_MINB (16 / PR_WARPS)
#endif

// ProbeArgs locate the probe's scratch and results, for every head.
struct ProbeArgs {
	float* m;     // [heads][n][tiles] tile maxima m_t of a·λ
	float* s;     // [heads][n][tiles] tile sums s_t
	double* vp;   // [heads][chunks][Nk] per-chunk column sums
	double* sp;   // [heads][chunks][tiles][PR_WIN] per-(chunk, tile) diagonal sums
	double* v;    // [heads][Nk] vertical sums
	double* sl;   // [heads][2Nk−1] slash sums, offset d at d + Nk − 1
	float* bias;  // [heads][n] β = m + log2 S (probe_norm; 0 for a row that sees no key)
	int head0;    // first head (b·Hq + h) the selections index from
	int G, n, tiles, chunks;
	int mean;     // probe_combine divides the sums by n (means, for FlexPrefill)
};

// dbits is x's bit pattern, for ordering non-negative doubles as integers.
__device__ __forceinline__ u64 dbits(double x) { return (u64)__double_as_longlong(x); }

#include "mma16.cuh"

// pr_ex2 is 2^x (ex2.approx.ftz: about 2 ulp; below 2⁻¹²⁶ the result is
// 0, and 2^−∞ is 0).
__device__ __forceinline__ float pr_ex2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}

// pr_smem_addr is p's shared-window address.
__device__ __forceinline__ u32 pr_smem_addr(const void* p) {
	u32 a;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
	return a;
}

// PrTile is a shared key tile of PR_PT keys (float32 inputs: both halves).
struct PrTile {
	u16 hi[PR_PT * PR_STR];
#if DTYPE == DT_F32
	u16 lo[PR_PT * PR_STR];
#endif
};

// PrFetch is one thread's share of a key tile, held in registers between
// its global loads and its shared store, so that the next tile's loads
// overlap the current tile's math.
#define PR_PIECES ((PR_PT * (HEAD_DIM_PAD / 8) + PR_WARPS * 32 - 1) / (PR_WARPS * 32)) // 8-element pieces per thread
struct PrFetch {
	u32 w[PR_PIECES][4];
#if DTYPE == DT_F32
	u32 l[PR_PIECES][4];
#endif
};

// pr_vec reports whether 16-bit keys load as 16-byte pieces: every
// 8-element piece of a row is 16-byte aligned and D is a multiple of 8.
__device__ __forceinline__ bool pr_vec(const View& k) {
	return (((unsigned long long)k.ptr | (unsigned long long)(k.sb | k.sh | k.sn) * 2) & 15) == 0 && k.D % 8 == 0;
}

// pr_fetch loads the thread's pieces of keys key0 … key0+PR_PT−1 of KV
// head kh (zeros past N and D).
__device__ __forceinline__ void pr_fetch(PrFetch& f, const View& k, int b, int kh, int key0) {
	const int per = HEAD_DIM_PAD / 8;
#if DTYPE != DT_F32
	const bool vec = pr_vec(k);
#endif
#pragma unroll
	for (int x = 0; x < PR_PIECES; x++) {
		int i = threadIdx.x + x * PR_WARPS * 32;
		if (i >= PR_PT * per) break;
		int r = i / per, d0 = (i % per) * 8, n = key0 + r;
#if DTYPE != DT_F32
		if (vec && n < k.N && d0 < k.D) {
			const U4 v = *(const U4*)((const u16*)k.ptr + (long long)b * k.sb + (long long)kh * k.sh + (long long)n * k.sn + d0);
			f.w[x][0] = v.x, f.w[x][1] = v.y, f.w[x][2] = v.z, f.w[x][3] = v.w;
			continue;
		}
		u32 l[4];
#pragma unroll
		for (int e = 0; e < 4; e++) f.w[x][e] = pair16(k, b, kh, n, d0 + 2 * e, l[e]);
#else
#pragma unroll
		for (int e = 0; e < 4; e++) f.w[x][e] = pair16(k, b, kh, n, d0 + 2 * e, f.l[x][e]);
#endif
	}
}

// pr_async copies keys key0 … key0+PR_PT−1 of KV head kh into tile t
// with cp.async, 16 bytes a piece (zeros past N and D), for 16-bit keys
// that pr_vec accepts, and commits the group; the caller waits.
__device__ __forceinline__ void pr_async(PrTile& t, const View& k, int b, int kh, int key0) {
	const int per = HEAD_DIM_PAD / 8;
#pragma unroll
	for (int x = 0; x < PR_PIECES; x++) {
		int i = threadIdx.x + x * PR_WARPS * 32;
		if (i >= PR_PT * per) break;
		int r = i / per, d0 = (i % per) * 8, n = key0 + r;
		bool ok = n < k.N && d0 < k.D;
		const u16* src = (const u16*)k.ptr + (ok ? (long long)b * k.sb + (long long)kh * k.sh + (long long)n * k.sn + d0 : 0);
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(pr_smem_addr(&t.hi[r * PR_STR + d0])), "l"(src), "r"(ok ? 16 : 0) : "memory");
	}
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// pr_load writes keys key0 … key0+PR_PT−1 of KV head kh into tile t
// piece by piece through pair16 (16-bit keys that pr_vec refuses: no
// overlap with the math, few registers).
__device__ __forceinline__ void pr_load(PrTile& t, const View& k, int b, int kh, int key0) {
	const int per = HEAD_DIM_PAD / 8;
#pragma unroll 1
	for (int i = threadIdx.x; i < PR_PT * per; i += PR_WARPS * 32) {
		int r = i / per, d0 = (i % per) * 8, n = key0 + r;
		u32 w[4], l;
#pragma unroll
		for (int e = 0; e < 4; e++) w[e] = pair16(k, b, kh, n, d0 + 2 * e, l);
		*(U4*)&t.hi[r * PR_STR + d0] = U4{w[0], w[1], w[2], w[3]};
	}
}

// pr_store writes the fetched pieces into tile t.
__device__ __forceinline__ void pr_store(PrTile& t, const PrFetch& f) {
	const int per = HEAD_DIM_PAD / 8;
#pragma unroll
	for (int x = 0; x < PR_PIECES; x++) {
		int i = threadIdx.x + x * PR_WARPS * 32;
		if (i >= PR_PT * per) break;
		int r = i / per, d0 = (i % per) * 8;
		*(U4*)&t.hi[r * PR_STR + d0] = U4{f.w[x][0], f.w[x][1], f.w[x][2], f.w[x][3]};
#if DTYPE == DT_F32
		*(U4*)&t.lo[r * PR_STR + d0] = U4{f.l[x][0], f.l[x][1], f.l[x][2], f.l[x][3]};
#endif
	}
}

// PrRows is one warp's 16 probe rows: their Q fragments.
struct PrRows {
	u32 qa[PR_KSTEPS][4];
#if DTYPE == DT_F32
	u32 ql[PR_KSTEPS][4];
#endif
};

// pr_rows loads the fragments of probe rows i0 … i0+15 (token Nq − n + i;
// rows past n load as zeros).
__device__ __forceinline__ void pr_rows(PrRows& w, const PlanArgs& a, const View& q, int b, int h, int n, int i0) {
	int lane = threadIdx.x & 31, t = lane & 3, g = lane >> 2;
	int r0 = i0 + g < n ? a.Nq - n + i0 + g : -1, r1 = i0 + g + 8 < n ? a.Nq - n + i0 + g + 8 : -1;
#pragma unroll
	for (int ks = 0; ks < PR_KSTEPS; ks++) {
		int d0 = 16 * ks + 2 * t;
		u32 l[4];
		w.qa[ks][0] = pair16(q, b, h, r0, d0, l[0]);
		w.qa[ks][1] = pair16(q, b, h, r1, d0, l[1]);
		w.qa[ks][2] = pair16(q, b, h, r0, d0 + 8, l[2]);
		w.qa[ks][3] = pair16(q, b, h, r1, d0 + 8, l[3]);
#if DTYPE == DT_F32
		for (int i = 0; i < 4; i++) w.ql[ks][i] = l[i];
#endif
	}
}

// pr_ldsm4 loads four 8×8 matrices of 16-bit elements from shared memory,
// row r of matrix m from the address lane 8m + r gives (ldmatrix).
__device__ __forceinline__ void pr_ldsm4(u32 (&r)[4], const void* p) {
	const u32 a = pr_smem_addr(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// pr_logits fills s with the raw dot products a (the logit is a·scale) of
// the warp's rows i0 + g + 8·(e/2) against keys key0 + 8j + 2t + e%2 (−∞
// where the row is past n, the key past Nk, or the key after the row's
// position when causal).
__device__ __forceinline__ void pr_logits(const PrRows& w, const PrTile& tile, const PlanArgs& a, int n, int i0, int key0, float (&s)[PR_PT / 8][4]) {
	int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
	for (int j = 0; j < PR_PT / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
	// k-steps outside, key groups inside: the PR_PT/8 accumulators are
	// independent, so their MMAs overlap (each still adds its k-steps in
	// order). One ldmatrix gives the B registers of key groups j and j+1:
	// key 8j + g, dims 16ks + 2t (b0) and + 8 (b1), as lane 8m + r reads
	// row r of key group j + m/2 at dims 16ks + 8·(m mod 2).
	const int lrow = (lane & 7) + ((lane >> 4) << 3), lcol = ((lane >> 3) & 1) * 8;
#pragma unroll
	for (int ks = 0; ks < PR_KSTEPS; ks++) {
#pragma unroll
		for (int j = 0; j < PR_PT / 8; j += 2) {
			const int base = (8 * j + lrow) * PR_STR + 16 * ks + lcol;
			u32 bh[4];
			pr_ldsm4(bh, &tile.hi[base]);
#if DTYPE == DT_F32
			u32 bl[4];
			pr_ldsm4(bl, &tile.lo[base]);
#endif
#pragma unroll
			for (int m = 0; m < 2; m++) {
				mma16(s[j + m], w.qa[ks], bh[2 * m], bh[2 * m + 1]);
#if DTYPE == DT_F32
				mma16(s[j + m], w.qa[ks], bl[2 * m], bl[2 * m + 1]);
				mma16(s[j + m], w.ql[ks], bh[2 * m], bh[2 * m + 1]);
#endif
			}
		}
	}
	// A tile every one of whose keys every row of the warp sees (the rows
	// exist, the keys exist, and causal, the last key is at or before the
	// first row's position) needs no mask.
	if (i0 + 16 <= n && key0 + PR_PT <= a.Nk && (!a.causal || key0 + PR_PT - 1 <= a.Nk - n + i0)) return;
#pragma unroll
	for (int j = 0; j < PR_PT / 8; j++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int i = i0 + g + 8 * (e >> 1), key = key0 + 8 * j + 2 * t + (e & 1);
			int pos = a.Nk - n + i; // the probe row's position among the keys
			bool ok = i < n && key < a.Nk && (!a.causal || key <= pos);
			s[j][e] = ok ? s[j][e] : PR_NEG_INF;
		}
}

// PR_TILES is the number of consecutive key tiles one block walks (its
// Q fragments stay in registers; the next tile's keys load during the
// current tile's math).
#define PR_TILES 8

// pr_walk runs body(tt, sc) for each key tile tt of the block (blockIdx.x
// · PR_TILES …) with sc the raw dot products of the warp's rows; block
// (tile group, head, chunk) of PR_WARPS warps. Every body call is followed
// by a __syncthreads. 16-bit keys that pr_vec accepts load with cp.async
// (no registers held across the math); other 16-bit keys load after the
// body; float32 keys (two halves) through registers, during the math.
template <typename Body>
__device__ __forceinline__ void pr_walk(const PlanArgs& a, const View& q, const View& k, const ProbeArgs& p, PrTile* tile, Body body) {
	int head = blockIdx.y, chunk = blockIdx.z;
	int b = head / a.Hq, h = head % a.Hq, kh = h / (a.Hq / a.Hkv);
	int i0 = chunk * PR_RC + 16 * (threadIdx.x >> 5);
	int t0 = blockIdx.x * PR_TILES, t1 = min(t0 + PR_TILES, p.tiles);
	PrRows w;
	pr_rows(w, a, q, b, h, p.n, i0);
#if DTYPE == DT_F32
	PrFetch f;
	pr_fetch(f, k, b, kh, t0 * PR_PT);
	pr_store(tile[0], f);
	__syncthreads();
	for (int tt = t0; tt < t1; tt++) {
		int cur = (tt - t0) & 1;
		if (tt + 1 < t1) pr_fetch(f, k, b, kh, (tt + 1) * PR_PT);
		float sc[PR_PT / 8][4];
		pr_logits(w, tile[cur], a, p.n, i0, tt * PR_PT, sc);
		body(tt, sc);
		if (tt + 1 < t1) pr_store(tile[cur ^ 1], f);
		__syncthreads();
	}
#else
	const bool vec = pr_vec(k);
	if (vec) {
		pr_async(tile[0], k, b, kh, t0 * PR_PT);
		asm volatile("cp.async.wait_group 0;\n" ::: "memory");
	} else {
		pr_load(tile[0], k, b, kh, t0 * PR_PT);
	}
	__syncthreads();
	for (int tt = t0; tt < t1; tt++) {
		int cur = (tt - t0) & 1;
		// tile[cur ^ 1] was last read before the previous iteration's
		// __syncthreads.
		if (vec && tt + 1 < t1) pr_async(tile[cur ^ 1], k, b, kh, (tt + 1) * PR_PT);
		float sc[PR_PT / 8][4];
		pr_logits(w, tile[cur], a, p.n, i0, tt * PR_PT, sc);
		body(tt, sc);
		if (tt + 1 < t1) {
			if (vec) {
				asm volatile("cp.async.wait_group 0;\n" ::: "memory");
			} else {
				pr_load(tile[cur ^ 1], k, b, kh, (tt + 1) * PR_PT);
			}
		}
		__syncthreads();
	}
#endif
}

// The probe kernels take dynamic shared memory: two key tiles (the Go side's
// probeSharedBytes), and probe_lines its merged strips after them.

// probe_stats: block (tile, head, chunk), PR_WARPS warps: each probe row's
// maximum m_t of a·λ in the tile and s_t = Σ 2^(a·λ − m_t) (0 and −∞ for a
// tile the row sees no key of). Per row and tile: 16 keys a thread in
// float32 (a running sum of pairs), then two butterfly steps.
extern "C" __global__ void __launch_bounds__(PR_WARPS * 32, PR_MINB) probe_stats(PlanArgs a, View q, View k, ProbeArgs p) {
	extern __shared__ __align__(16) unsigned char pr_smem[];
	PrTile* tile = (PrTile*)pr_smem;
	int head = blockIdx.y, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
	int i0 = blockIdx.z * PR_RC + 16 * (threadIdx.x >> 5);
	const float lam = a.scale * PR_LOG2E;
	pr_walk(a, q, k, p, tile, [&](int tt, float (&sc)[PR_PT / 8][4]) {
#pragma unroll
		for (int half = 0; half < 2; half++) {
			float mx = PR_NEG_INF;
#pragma unroll
			for (int j = 0; j < PR_PT / 8; j++) mx = fmaxf(mx, fmaxf(sc[j][2 * half], sc[j][2 * half + 1]));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
			// λ > 0 (the scale is positive), so the maximum of a·λ is mx·λ.
			const float m2 = mx * lam;
			float sum = 0.0f;
			if (mx != PR_NEG_INF) {
#pragma unroll
				for (int j = 0; j < PR_PT / 8; j++) sum += pr_ex2(fmaf(sc[j][2 * half], lam, -m2)) + pr_ex2(fmaf(sc[j][2 * half + 1], lam, -m2));
			}
			sum += __shfl_xor_sync(0xffffffffu, sum, 1);
			sum += __shfl_xor_sync(0xffffffffu, sum, 2);
			int i = i0 + g + 8 * half;
			if (t4 == 0 && i < p.n) {
				long long x = ((long long)head * p.n + i) * p.tiles + tt;
				p.m[x] = m2;
				p.s[x] = sum;
			}
		}
	});
}

// probe_norm: one warp per probe row: m the row maximum of the m_t, S =
// Σ_t s_t·2^(m_t − m) in float64, and the bias β = m + log2 S rounded to
// float32 (0 for a row that sees no key: its dot products are all −∞).
extern "C" __global__ void probe_norm(ProbeArgs p) {
	long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	int l = threadIdx.x & 31;
	if (row >= (long long)p.G * p.n) return;
	const float* m = p.m + row * p.tiles;
	const float* s = p.s + row * p.tiles;
	float mx = PR_NEG_INF;
	for (int t = l; t < p.tiles; t += 32) mx = fmaxf(mx, m[t]);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	if (mx == PR_NEG_INF) {
		if (l == 0) p.bias[row] = 0.0f;
		return;
	}
	double part = 0.0;
	for (int t = l; t < p.tiles; t += 32)
		if (m[t] != PR_NEG_INF) part += (double)s[t] * exp2((double)m[t] - (double)mx);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
	if (l == 0) p.bias[row] = (float)((double)mx + log2(part));
}

// pr_rs is one reduce-scatter step over lane bit m: of v[0 … 2HV), the
// lane keeps the upper half when its bit is set (else the lower), adds the
// partner lane's copy of it, and leaves the sums in v[0 … HV).
template <int HV>
__device__ __forceinline__ void pr_rs(float* v, int m, bool up) {
#pragma unroll
	for (int i = 0; i < HV; i++) {
		const float send = up ? v[i] : v[i + HV], keep = up ? v[i + HV] : v[i];
		v[i] = keep + __shfl_xor_sync(0xffffffffu, send, m);
	}
}

// probe_lines' shared layout. A warp's 16 rows fold into a merged strip of
// 8 rows: row g + 8 of column c lies on the diagonal of row g and column
// c − 8, so a thread adds its two halves' elements (g, c) and (g + 8,
// c + 8) and stores the sum at strip row g, column c + 8 (c from −8: the
// strip is PR_PT + 8 wide). A diagonal of the 16 rows is then a diagonal of
// the strip, at most 8 elements. Rows are PR_DS floats apart (≡ 24 mod 32:
// the 64-bit stores of a half-warp hit distinct banks), the columns past
// PR_PT + 8 stay zero, and so does a lead of 8 floats before warp 0's
// strip: a diagonal's reads outside the strip (columns −7 … −1 and
// PR_PT + 8 … PR_PT + 14) land on zeros of the row or the one before.
#define PR_DS (PR_PT + 24)                         // strip row stride, floats
#define PR_NDW (PR_PT + 15)                        // diagonals of one warp's 16 rows
#define PR_DM_FLOATS (8 + PR_WARPS * 8 * PR_DS)    // the zero lead and the strips

// probe_lines: block (tile, head, chunk): the probabilities P = 2^(a·λ −
// β) of the chunk's rows in the tile, then their column sums (vp) and
// diagonal sums (sp; window index w = r − j + PR_PT − 1 for chunk row r
// and tile key j). Per warp (16 rows), in float32: a column adds the
// thread's two rows, then a three-step butterfly that leaves each lane two
// columns (reduce-scatter: depth 4); a diagonal adds the thread's two
// halves' elements, then its ≤ 8 strip elements in two chains (depth 6).
// The warps' partials are added in float64, in warp order, after the
// tile's __syncthreads (double-buffered by tile parity, so one barrier a
// tile): at the start of the next tile, and after the walk for the last.
extern "C" __global__ void __launch_bounds__(PR_WARPS * 32, PR_MINB) probe_lines(PlanArgs a, View q, View k, ProbeArgs p) {
	extern __shared__ __align__(16) unsigned char pr_smem[];
	PrTile* tile = (PrTile*)pr_smem;
	float* dm = (float*)(pr_smem + 2 * sizeof(PrTile));
	__shared__ __align__(8) float vsum[2][PR_WARPS][PR_PT];
	__shared__ float dpart[2][PR_WARPS][PR_NDW];
	const int head = blockIdx.y, chunk = blockIdx.z, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
	const int i0 = chunk * PR_RC + 16 * warp, t0 = blockIdx.x * PR_TILES, t1 = min(t0 + PR_TILES, p.tiles);
	for (int x = tid; x < PR_DM_FLOATS; x += blockDim.x) dm[x] = 0.0f; // pr_walk's first barrier orders these
	const float lam = a.scale * PR_LOG2E;
	float bias[2];
#pragma unroll
	for (int half = 0; half < 2; half++) {
		int i = i0 + g + 8 * half;
		bias[half] = i < p.n ? p.bias[(long long)head * p.n + i] : 0.0f;
	}
	float* strip = dm + 8 + warp * 8 * PR_DS;
	const long long hc = (long long)head * p.chunks + chunk;
	// combine adds tile tt's warp partials and stores the chunk's sums.
	auto combine = [&](int tt) {
		const int par = (tt - t0) & 1;
		for (int u = tid; u < PR_WIN + PR_PT; u += blockDim.x) {
			double s = 0.0;
			if (u < PR_WIN) {
				// Warp x's diagonal u − 16x, for 0 ≤ u − 16x < PR_NDW.
				const int over = u - (PR_NDW - 1), xlo = over > 0 ? (over + 15) / 16 : 0, xhi = min(PR_WARPS - 1, u / 16);
				for (int x = xlo; x <= xhi; x++) s += (double)dpart[par][x][u - 16 * x];
				p.sp[(hc * p.tiles + tt) * PR_WIN + u] = s;
			} else {
				const int c = u - PR_WIN, j = tt * PR_PT + c;
#pragma unroll
				for (int x = 0; x < PR_WARPS; x++) s += (double)vsum[par][x][c];
				if (j < a.Nk) p.vp[hc * a.Nk + j] = s;
			}
		}
	};
	pr_walk(a, q, k, p, tile, [&](int tt, float (&sc)[PR_PT / 8][4]) {
		if (tt > t0) combine(tt - 1);
		const int par = (tt - t0) & 1;
		float pv[PR_PT / 8][4];
#pragma unroll
		for (int j = 0; j < PR_PT / 8; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) pv[j][e] = pr_ex2(fmaf(sc[j][e], lam, -bias[e >> 1]));
		// Diagonals: the merged strip (see PR_DS), then lane l's diagonals
		// l, l + 32, … of the warp's 16 rows.
#pragma unroll
		for (int jj = 0; jj <= PR_PT / 8; jj++) {
			float2 d;
			d.x = (jj >= 1 ? pv[jj - 1][0] : 0.0f) + (jj < PR_PT / 8 ? pv[jj][2] : 0.0f);
			d.y = (jj >= 1 ? pv[jj - 1][1] : 0.0f) + (jj < PR_PT / 8 ? pv[jj][3] : 0.0f);
			*(float2*)&strip[g * PR_DS + 8 * jj + 2 * t4] = d;
		}
		__syncwarp();
#pragma unroll
		for (int w = lane; w < PR_NDW; w += 32) {
			// Strip row r meets the diagonal at column r − w + PR_PT + 7.
			const float* x = strip + PR_PT + 7 - w;
			float e0 = 0.0f, e1 = 0.0f;
#pragma unroll
			for (int r = 0; r < 8; r += 2) {
				e0 += x[r * (PR_DS + 1)];
				e1 += x[(r + 1) * (PR_DS + 1)];
			}
			dpart[par][warp][w] = e0 + e1;
		}
		// Columns: the thread's two rows, then reduce-scatter over the 8
		// lanes of one t4 (lane bits 4, 3, 2: g's bits 2, 1, 0), leaving
		// lane (g, t4) column pair index g·NV/8 + i of the NV = PR_PT/4.
		float v[PR_PT / 4];
#pragma unroll
		for (int j = 0; j < PR_PT / 8; j++)
#pragma unroll
			for (int e = 0; e < 2; e++) v[2 * j + e] = pv[j][e] + pv[j][2 + e];
		pr_rs<PR_PT / 8>(v, 16, (lane & 16) != 0);
		pr_rs<PR_PT / 16>(v, 8, (lane & 8) != 0);
		pr_rs<PR_PT / 32>(v, 4, (lane & 4) != 0);
#pragma unroll
		for (int i = 0; i < PR_PT / 32; i++) {
			const int idx = g * (PR_PT / 32) + i;
			vsum[par][warp][8 * (idx >> 1) + 2 * t4 + (idx & 1)] = v[i];
		}
		__syncwarp(); // the strip is rewritten next tile (after pr_walk's barrier too)
	});
	// pr_walk's last barrier follows the last tile's body.
	combine(t1 - 1);
}

// probe_combine: one thread per (head, key) then (head, offset): the
// vertical sum over chunks, and the slash sum over chunks and the tiles
// that meet the diagonal, in increasing order.
extern "C" __global__ void probe_combine(PlanArgs a, ProbeArgs p) {
	long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	long long nv = (long long)p.G * a.Nk, no = 2ll * a.Nk - 1;
	if (x < nv) {
		int head = x / a.Nk, j = x % a.Nk;
		double v = 0.0;
		for (int c = 0; c < p.chunks; c++) v += p.vp[((long long)head * p.chunks + c) * a.Nk + j];
		p.v[x] = p.mean ? v / (double)p.n : v;
		return;
	}
	x -= nv;
	if (x >= (long long)p.G * no) return;
	int head = x / no, d = (int)(x % no) - (a.Nk - 1);
	double s = 0.0;
	for (int c = 0; c < p.chunks; c++) {
		// Chunk row r sits at position pc + r; it meets the diagonal at key
		// pc + r − d, in tile t at window index d − pc + PR_PT·t + PR_PT − 1.
		int pc = a.Nk - p.n + c * PR_RC;
		int base = d - pc + PR_PT - 1;
		int tlo = max(0, (-base + PR_PT - 1) / PR_PT), thi = min(p.tiles - 1, (PR_WIN - 1 - base) >= 0 ? (PR_WIN - 1 - base) / PR_PT : -1);
		for (int t = tlo; t <= thi; t++) {
			int wi = base + PR_PT * t;
			if (wi < 0 || wi >= PR_WIN) continue;
			s += p.sp[(((long long)head * p.chunks + c) * p.tiles + t) * PR_WIN + wi];
		}
	}
	p.sl[x] = p.mean ? s / (double)p.n : s;
}

#include "select64.cuh"
