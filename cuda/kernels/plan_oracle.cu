// The oracle planner on the device (package method/oracle): the exact
// block attention mass of every query block, from QKᵀ on the tensor cores,
// then TopCdf over those masses (SpargeAttn §3.2, without prediction).
//
// oracle_mass runs one CTA of eight warps per plan row. Each warp owns 16
// query rows (one m16n8k16 row tile) and holds their Q fragments in
// registers; key tiles are staged in shared memory once for all eight.
// Pass 1 walks the row's visible KV blocks and keeps each row's
// softmax max m and sum l; pass 2 recomputes the logits and adds
// exp(s − m) / l over each KV block's keys, summed over the warp, then over
// the eight warps in a fixed order, so the masses do not change from run to
// run. Two QKᵀ passes and no PV: about 0.6 of a dense pass's tensor work.
//
// The CPU computes logits in float32 with its own summation order, so the
// masses agree to about 1e-6 relative, and a block whose cumulative mass
// lands that close to the CDF threshold may be kept by one side only. With
// float32 inputs each operand is split into bf16 high and low halves and
// three products are summed (the low·low term, about 2⁻¹⁶ relative, is
// dropped).
//
// Compile-time: HEAD_DIM_PAD (the head dim rounded up to 16), DTYPE (one of
// DT_F32, DT_F16, DT_BF16).

#define OR_WARPS 8
#define OR_KSTEPS (HEAD_DIM_PAD / 16)
#if DTYPE == DT_F32 && HEAD_DIM_PAD > 128
#define OR_CHUNK 32 // keys per shared tile: four n8 MMA tiles (hi and lo halves)
#else
#define OR_CHUNK 64 // keys per shared tile: eight n8 MMA tiles
#endif
#define OR_STR (HEAD_DIM_PAD + 8) // tile row stride in 16-bit elements: rows 4 banks apart
#define OR_FLUSH 64               // KV blocks per shared-memory flush of the warp sums
#define OR_NEG_INF __int_as_float(0xff800000)

#include "mma16.cuh"

// OrTile is the shared key tile: OR_CHUNK keys of D elements, 16-bit
// (for float32 inputs, the bf16 high and low halves).
struct OrTile {
	u16 hi[OR_CHUNK * OR_STR];
#if DTYPE == DT_F32
	u16 lo[OR_CHUNK * OR_STR];
#endif
};

// or_load_tile stages keys key0 … key0+OR_CHUNK−1 of KV head kh into t,
// with every thread of the block; keys past N and dims past D are zeros.
// 16-bit inputs whose rows are 16-byte aligned move 8 elements a load.
__device__ __forceinline__ void or_load_tile(OrTile& t, const View& k, int b, int kh, int key0) {
	const int per = HEAD_DIM_PAD / 8; // 8-element pieces per row
#if DTYPE != DT_F32
	const bool vec = (((unsigned long long)k.ptr | (unsigned long long)(k.sb | k.sh | k.sn) * 2) & 15) == 0 && k.D % 8 == 0;
#endif
	for (int i = threadIdx.x; i < OR_CHUNK * per; i += blockDim.x) {
		int r = i / per, d0 = (i % per) * 8, n = key0 + r;
		u32 w[4], l[4];
#if DTYPE != DT_F32
		if (vec && n < k.N && d0 < k.D) {
			const U4 x = *(const U4*)((const u16*)k.ptr + (long long)b * k.sb + (long long)kh * k.sh + (long long)n * k.sn + d0);
			w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
		} else
#endif
		{
#pragma unroll
			for (int e = 0; e < 4; e++) w[e] = pair16(k, b, kh, n, d0 + 2 * e, l[e]);
		}
		*(U4*)&t.hi[r * OR_STR + d0] = U4{w[0], w[1], w[2], w[3]};
#if DTYPE == DT_F32
		*(U4*)&t.lo[r * OR_STR + d0] = U4{l[0], l[1], l[2], l[3]};
#endif
	}
}

// OrRows is one warp's 16 query rows: their Q fragments.
struct OrRows {
	u32 qa[OR_KSTEPS][4];
#if DTYPE == DT_F32
	u32 ql[OR_KSTEPS][4];
#endif
	int row0; // first query row of the tile
	int live; // whether any row of the tile is a real query of the block
};

// or_logits fills s with the scaled logits of this warp's rows against the
// tile's keys from key0 (−∞ where masked): s[j][e] is row row0 + g +
// 8·(e/2), key key0 + 8j + 2t + e%2, with g = lane/4 and t = lane%4.
__device__ __forceinline__ void or_logits(const OrRows& w, const OrTile& tile, int nk, int key0, int qend, int off, int causal, float scale, float (&s)[OR_CHUNK / 8][4]) {
	int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
	for (int j = 0; j < OR_CHUNK / 8; j++) {
		s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
		const int base = (8 * j + g) * OR_STR + 2 * t;
#pragma unroll
		for (int ks = 0; ks < OR_KSTEPS; ks++) {
			u32 b0 = *(const u32*)&tile.hi[base + 16 * ks], b1 = *(const u32*)&tile.hi[base + 16 * ks + 8];
			mma16(s[j], w.qa[ks], b0, b1);
#if DTYPE == DT_F32
			u32 l0 = *(const u32*)&tile.lo[base + 16 * ks], l1 = *(const u32*)&tile.lo[base + 16 * ks + 8];
			mma16(s[j], w.qa[ks], l0, l1);
			mma16(s[j], w.ql[ks], b0, b1);
#endif
		}
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int row = w.row0 + g + 8 * (e >> 1), key = key0 + 8 * j + 2 * t + (e & 1);
			bool ok = row < qend && key < nk && (!causal || key <= row + off);
			s[j][e] = ok ? s[j][e] * scale : OR_NEG_INF;
		}
	}
}

// oracle_mass writes mass[r·stride + kb], the mean softmax mass the queries
// of plan row r put on KV block kb, for every visible kb. The eight warps
// step through the key tiles together, each tile staged once in shared
// memory for all of them.
extern "C" __global__ void __launch_bounds__(OR_WARPS * 32) oracle_mass(PlanArgs a, View q, View k, float* mass) {
	__shared__ __align__(16) OrTile tile;
	__shared__ float red[OR_WARPS][OR_FLUSH];
	int r = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3, g = lane >> 2;
	int qb = r % a.q_blocks, bh = r / a.q_blocks, b = bh / a.Hq, h = bh % a.Hq;
	int kh = h / (a.Hq / a.Hkv), off = a.Nk - a.Nq;
	int qlo = qb * a.bq, qend = min(qlo + a.bq, a.Nq);
	int nvis = visible_blocks(a, qb);
	OrRows w;
	w.row0 = qlo + 16 * warp;
	w.live = 16 * warp < a.bq && w.row0 < qend;
	// Rows past qend load as zeros and are masked in or_logits.
#pragma unroll
	for (int ks = 0; ks < OR_KSTEPS; ks++) {
		int d0 = 16 * ks + 2 * t;
		u32 l[4];
		w.qa[ks][0] = pair16(q, b, h, w.live ? w.row0 + g : q.N, d0, l[0]);
		w.qa[ks][1] = pair16(q, b, h, w.live ? w.row0 + g + 8 : q.N, d0, l[1]);
		w.qa[ks][2] = pair16(q, b, h, w.live ? w.row0 + g : q.N, d0 + 8, l[2]);
		w.qa[ks][3] = pair16(q, b, h, w.live ? w.row0 + g + 8 : q.N, d0 + 8, l[3]);
#if DTYPE == DT_F32
		for (int i = 0; i < 4; i++) w.ql[ks][i] = l[i];
#endif
	}
	float s[OR_CHUNK / 8][4];
	// Pass 1: each row's max m and Σexp(s − m).
	float m[2] = {OR_NEG_INF, OR_NEG_INF}, l[2] = {0.0f, 0.0f};
	for (int kb = 0; kb < nvis; kb++) {
		int kend = min((kb + 1) * a.bk, a.Nk);
		for (int key0 = kb * a.bk; key0 < kend; key0 += OR_CHUNK) {
			__syncthreads(); // every warp is done with the previous tile
			or_load_tile(tile, k, b, kh, key0);
			__syncthreads();
			if (!w.live) continue;
			or_logits(w, tile, a.Nk, key0, qend, off, a.causal, a.scale, s);
#pragma unroll
			for (int half = 0; half < 2; half++) {
				float cm = m[half];
#pragma unroll
				for (int j = 0; j < OR_CHUNK / 8; j++) cm = fmaxf(cm, fmaxf(s[j][2 * half], s[j][2 * half + 1]));
				if (cm == OR_NEG_INF) continue;
				float acc = l[half] * expf(m[half] - cm);
#pragma unroll
				for (int j = 0; j < OR_CHUNK / 8; j++) acc += expf(s[j][2 * half] - cm) + expf(s[j][2 * half + 1] - cm);
				m[half] = cm;
				l[half] = acc;
			}
		}
	}
	// The four lanes of a quad hold the same rows: combine them.
#pragma unroll
	for (int half = 0; half < 2; half++) {
#pragma unroll
		for (int o = 1; o <= 2; o <<= 1) {
			float om = __shfl_xor_sync(0xffffffffu, m[half], o), ol = __shfl_xor_sync(0xffffffffu, l[half], o);
			float nm = fmaxf(m[half], om);
			if (nm != OR_NEG_INF) l[half] = l[half] * expf(m[half] - nm) + ol * expf(om - nm);
			m[half] = nm;
		}
	}
	float inv[2];
	for (int half = 0; half < 2; half++) inv[half] = l[half] > 0.0f ? 1.0f / l[half] : 0.0f;
	// Pass 2: Σ exp(s − m)/l over each KV block's keys, warp by warp, then
	// the warps in a fixed order.
	float inv_nq = 1.0f / (float)(qend - qlo);
	float* out = mass + (long long)r * a.stride;
	for (int base = 0; base < nvis; base += OR_FLUSH) {
		int top = min(base + OR_FLUSH, nvis);
		for (int kb = base; kb < top; kb++) {
			float p = 0.0f;
			int kend = min((kb + 1) * a.bk, a.Nk);
			for (int key0 = kb * a.bk; key0 < kend; key0 += OR_CHUNK) {
				__syncthreads();
				or_load_tile(tile, k, b, kh, key0);
				__syncthreads();
				if (!w.live) continue;
				or_logits(w, tile, a.Nk, key0, qend, off, a.causal, a.scale, s);
#pragma unroll
				for (int j = 0; j < OR_CHUNK / 8; j++) {
#pragma unroll
					for (int e = 0; e < 4; e++) {
						float x = s[j][e];
						if (x != OR_NEG_INF) p += expf(x - m[e >> 1]) * inv[e >> 1];
					}
				}
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) p += __shfl_xor_sync(0xffffffffu, p, o);
			if (lane == 0) red[warp][kb - base] = p;
		}
		__syncthreads();
		for (int i = threadIdx.x; i < top - base; i += blockDim.x) {
			float sum = 0.0f;
#pragma unroll
			for (int x = 0; x < OR_WARPS; x++) sum += red[x][i];
			out[base + i] = sum * inv_nq;
		}
	}
}

// oracle_select keeps, per plan row, the fewest visible KV blocks whose
// masses reach cdf, taken in decreasing mass (ties by ascending block, as
// the CPU's stable sort), and lists them in ascending order. The boundary
// mass t is the largest value with Σ{mass ≥ t} ≥ cdf, found by bisection
// over the float bit patterns; blocks above t are kept, then blocks equal
// to t in block order until the sum reaches cdf.
extern "C" __global__ void __launch_bounds__(256) oracle_select(PlanArgs a, const float* mass, double cdf) {
	__shared__ double part[8];
	__shared__ u32 bound;
	__shared__ int keepAll, tiesNeeded, count[8];
	int r = blockIdx.x, qb = r % a.q_blocks, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	int nvis = visible_blocks(a, qb);
	const float* m = mass + (long long)r * a.stride;
	// above(x) is Σ{mass ≥ x}, reduced in a fixed order.
	auto above = [&](float x, bool strict) -> double {
		double s = 0.0;
		for (int i = tid; i < nvis; i += blockDim.x) {
			float v = m[i];
			if (strict ? v > x : v >= x) s += (double)v;
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0) part[warp] = s;
		__syncthreads();
		double total = 0.0;
		for (int x = 0; x < 8; x++) total += part[x];
		__syncthreads();
		return total;
	};
	if (tid == 0) {
		keepAll = 0;
		bound = 0;
		tiesNeeded = 0;
	}
	__syncthreads();
	if (above(0.0f, false) < cdf) {
		if (tid == 0) keepAll = 1;
	}
	__syncthreads();
	if (!keepAll) {
		// Largest bit pattern x with Σ{mass ≥ x} ≥ cdf; masses are ≥ 0, so
		// the order of bit patterns is the order of values.
		u32 lo = 0, hi = 0x7f800000u; // above(lo) ≥ cdf > above(hi)
		while (hi - lo > 1) {
			u32 mid = lo + (hi - lo) / 2;
			if (above(__uint_as_float(mid), false) >= cdf) lo = mid;
			else hi = mid;
		}
		double strict = above(__uint_as_float(lo), true);
		if (tid == 0) {
			bound = lo;
			// Blocks equal to the bound, in block order, until the sum reaches cdf.
			float t = __uint_as_float(lo);
			double c = strict;
			int need = 0;
			for (int i = 0; i < nvis && c < cdf; i++) {
				if (m[i] == t) {
					c += (double)t;
					need++;
				}
			}
			tiesNeeded = need;
		}
	}
	__syncthreads();
	float t = __uint_as_float(bound);
	int* out = a.lists + (long long)r * a.stride;
	int written = 0, ties = 0;
	for (int base = 0; base < nvis; base += blockDim.x) {
		int i = base + tid;
		float v = i < nvis ? m[i] : 0.0f;
		bool tie = i < nvis && !keepAll && v == t;
		// Ties are taken in block order: count the ties before this one.
		u32 tb = __ballot_sync(0xffffffffu, tie);
		if (lane == 0) count[warp] = __popc(tb);
		__syncthreads();
		int tiesBefore = ties;
		for (int x = 0; x < warp; x++) tiesBefore += count[x];
		tiesBefore += __popc(tb & ((1u << lane) - 1));
		int chunkTies = 0;
		for (int x = 0; x < 8; x++) chunkTies += count[x];
		__syncthreads();
		bool keep = i < nvis && (keepAll || v > t || (tie && tiesBefore < tiesNeeded));
		u32 kbits = __ballot_sync(0xffffffffu, keep);
		if (lane == 0) count[warp] = __popc(kbits);
		__syncthreads();
		int pos = written;
		for (int x = 0; x < warp; x++) pos += count[x];
		pos += __popc(kbits & ((1u << lane) - 1));
		if (keep) out[pos] = i;
		int chunkKept = 0;
		for (int x = 0; x < 8; x++) chunkKept += count[x];
		__syncthreads();
		written += chunkKept;
		ties += chunkTies;
	}
	if (tid == 0) a.row_len[r] = written;
}
