// The radix selections over 64-bit keys that the MInference
// (plan_minference.cu) and FlexPrefill (plan_flexprefill.cu) planners
// share, included by probe.cuh after the probe kernels.

// Selections in one block (blockDim.x a multiple of 32, at most 1024):
// items 0 … n−1 with 64-bit keys (0: not a candidate), ranked like the CPU
// planners' stable sorts: larger keys first, equal keys by smaller index.
// A Cut takes the items with key > T and the first `ties` items (by index)
// with key T. The searches are radix descents, 8 bits a pass; each thread
// loads SEL_U items before it counts them, so that the loads overlap.
#define SEL_U 4

struct Cut {
	u64 T;     // items with key > T are taken
	int ties;  // and the first `ties` items (by index) with key T
	int count; // items taken in all
};

// SelShared is a selection's shared memory.
struct SelShared {
	u32 cnt[256];
	u64 fs[256];
	u64 red[32];
	u64 prefix, above;
	int krem, count;
	u64 ft;
};

// block_sum_u64: every thread gets the block's sum of x.
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

// sel_hist fills sh.cnt (and, with fixed, sh.fs) with the digit at shift
// of the candidates whose higher digits equal prefix. Lanes with the same
// digit add once (warp-aggregated); the fixed values (< 2^62) go in three
// exact 32-bit partial sums. A warp with nothing to count skips.
template <bool fixed, typename KeyFn, typename FixFn>
__device__ __forceinline__ void sel_hist(KeyFn key, FixFn fx, int n, int shift, u64 prefix, SelShared& sh) {
	int tid = threadIdx.x;
	for (int x = tid; x < 256; x += blockDim.x) {
		sh.cnt[x] = 0;
		if (fixed) sh.fs[x] = 0;
	}
	__syncthreads();
	const int stride = blockDim.x * SEL_U;
	for (int base = 0; base < n; base += stride) {
		u64 kk[SEL_U];
#pragma unroll
		for (int u = 0; u < SEL_U; u++) {
			int i = base + u * blockDim.x + tid;
			kk[u] = i < n ? key(i) : 0;
		}
#pragma unroll
		for (int u = 0; u < SEL_U; u++) {
			if (base + u * (int)blockDim.x >= n) break; // uniform
			int i = base + u * blockDim.x + tid;
			bool in = kk[u] != 0 && (shift == 56 || (kk[u] >> (shift + 8)) == prefix);
			if (!__any_sync(0xffffffffu, in)) continue;
			int dg = in ? (int)((kk[u] >> shift) & 255) : 256;
			u32 peers = __match_any_sync(0xffffffffu, dg);
			bool leader = in && (threadIdx.x & 31) == __ffs(peers) - 1;
			if (fixed) {
				u64 v = in ? fx(i) : 0;
				u32 lo = __reduce_add_sync(peers, (u32)(v & 0x3fffff));
				u32 mid = __reduce_add_sync(peers, (u32)((v >> 22) & 0x3fffff));
				u32 hi = __reduce_add_sync(peers, (u32)(v >> 44));
				if (leader) atomicAdd((unsigned long long*)&sh.fs[dg], (unsigned long long)lo + ((unsigned long long)mid << 22) + ((unsigned long long)hi << 44));
			}
			if (leader) atomicAdd(&sh.cnt[dg], (u32)__popc(peers));
		}
	}
	__syncthreads();
}

// sel_scan: warp 0 walks the digits from 255 down, lane l owning digits
// 255 − 8l … 248 − 8l, and stops at the first digit d where the running
// total (counts, or fixed sums when fixed) plus d's reaches the crossing:
// count ≥ krem, or sum > G − above. It sets sh.prefix and sh.krem (counts:
// the items still wanted among digit d) or sh.above and sh.count (sums:
// the total and number of the items above digit d).
template <bool fixed>
__device__ __forceinline__ void sel_scan(u64 prefix, u64 G, SelShared& sh) {
	if (threadIdx.x >= 32) return;
	int l = threadIdx.x;
	u64 v[8], c[8], tot = 0, ctot = 0;
#pragma unroll
	for (int u = 0; u < 8; u++) {
		int dg = 255 - 8 * l - u;
		c[u] = sh.cnt[dg];
		v[u] = fixed ? sh.fs[dg] : c[u];
		tot += v[u];
		ctot += c[u];
	}
	u64 pre = tot, cpre = ctot;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		u64 y = __shfl_up_sync(0xffffffffu, pre, o), cy = __shfl_up_sync(0xffffffffu, cpre, o);
		if (l >= o) {
			pre += y;
			cpre += cy;
		}
	}
	pre -= tot;
	cpre -= ctot;
	u64 need = fixed ? G - sh.above : (u64)sh.krem; // sums: cross when > need; counts: when ≥ need
	int hit = -1;
#pragma unroll
	for (int u = 0; u < 8; u++) {
		bool cross = fixed ? pre + v[u] > need : pre + v[u] >= need;
		if (hit < 0 && cross) hit = u;
		if (hit < 0) {
			pre += v[u];
			cpre += c[u];
		}
	}
	u32 bal = __ballot_sync(0xffffffffu, hit >= 0);
	if (bal != 0 && l == __ffs(bal) - 1) {
		int dg = 255 - 8 * l - hit;
		sh.prefix = (prefix << 8) | (u64)dg;
		if (fixed) {
			sh.above += pre;
			sh.count += (int)cpre;
		} else {
			sh.krem = (int)(need - pre);
		}
	}
	__syncwarp();
}

// topk_cut finds the cut of the kwant largest candidates.
template <typename KeyFn>
__device__ Cut topk_cut(KeyFn key, int n, int kwant, SelShared& sh) {
	int tid = threadIdx.x;
	u64 cand = 0;
	for (int i = tid; i < n; i += blockDim.x) cand += key(i) != 0;
	cand = block_sum_u64(cand, sh.red);
	Cut c;
	c.count = (int)min((long long)kwant, (long long)cand);
	if (c.count <= 0) {
		c.count = 0;
		c.T = ~0ull;
		c.ties = 0;
		return c;
	}
	if (tid == 0) {
		sh.prefix = 0;
		sh.krem = c.count;
	}
	__syncthreads();
	auto nofx = [](int) -> u64 { return 0; };
	for (int shift = 56; shift >= 0; shift -= 8) {
		u64 prefix = sh.prefix;
		sel_hist<false>(key, nofx, n, shift, prefix, sh);
		sel_scan<false>(prefix, 0, sh);
		__syncthreads();
	}
	c.T = sh.prefix;
	c.ties = sh.krem;
	__syncthreads();
	return c;
}

// cover_cut finds the cut of the largest candidates whose cumulative
// fixed-point value fx (0 for non-candidates) stays within G: the items
// before the first one whose running sum exceeds G, in the ranked order.
// When the sum of all stays within G, every candidate is taken.
template <typename KeyFn, typename FixFn>
__device__ Cut cover_cut(KeyFn key, FixFn fx, int n, u64 G, SelShared& sh) {
	int tid = threadIdx.x;
	u64 tot = 0, ncand = 0;
	for (int i = tid; i < n; i += blockDim.x) {
		if (key(i) != 0) {
			tot += fx(i);
			ncand++;
		}
	}
	tot = block_sum_u64(tot, sh.red);
	ncand = block_sum_u64(ncand, sh.red);
	Cut c;
	if (tot <= G) {
		c.T = 0;
		c.ties = 0;
		c.count = (int)ncand;
		return c;
	}
	if (tid == 0) {
		sh.prefix = 0;
		sh.above = 0;
		sh.count = 0;
		sh.ft = 0;
	}
	__syncthreads();
	for (int shift = 56; shift >= 0; shift -= 8) {
		u64 prefix = sh.prefix;
		sel_hist<true>(key, fx, n, shift, prefix, sh);
		sel_scan<true>(prefix, G, sh);
		__syncthreads();
	}
	c.T = sh.prefix;
	u64 A = sh.above;
	int C = sh.count;
	// The items with key T share one value; its fixed value is positive,
	// as the crossing lies among them.
	for (int i = tid; i < n; i += blockDim.x)
		if (key(i) == c.T) {
			atomicMax((unsigned long long*)&sh.ft, (unsigned long long)fx(i));
			break;
		}
	__syncthreads();
	u64 ft = sh.ft;
	__syncthreads();
	c.ties = ft == 0 ? 0 : (int)((G - A) / ft);
	c.count = C + c.ties;
	return c;
}

// block_prefix gives each thread of warp w the number of items of the
// warps before it (wpre) and of all nw warps (tot), from the per-warp
// counts wcnt[0 … nw); every lane of every warp must call it.
__device__ __forceinline__ void block_prefix(const int* wcnt, int nw, int w, int& wpre, int& tot) {
	const int l = threadIdx.x & 31, c = l < nw ? wcnt[l] : 0;
	int inc = c;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		const int y = __shfl_up_sync(0xffffffffu, inc, o);
		if (l >= o) inc += y;
	}
	wpre = __shfl_sync(0xffffffffu, inc - c, w);
	tot = __shfl_sync(0xffffffffu, inc, 31);
}

// cut_mark calls mark(i, selected, before) for every item, in index
// chunks; before is the number of selected items with a smaller index.
template <typename KeyFn, typename MarkFn>
__device__ void cut_mark(KeyFn key, int n, Cut c, MarkFn mark) {
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31, nw = blockDim.x >> 5;
	__shared__ int eq_w[32], sel_w[32];
	int carry_eq = 0, carry_sel = 0;
	for (int base = 0; base < n; base += blockDim.x) {
		int i = base + tid;
		u64 kk = i < n ? key(i) : 0;
		bool cand = i < n && c.count > 0 && kk != 0;
		bool gt = cand && kk > c.T, eq = cand && kk == c.T;
		u32 beq = __ballot_sync(0xffffffffu, eq);
		if (l == 0) eq_w[w] = __popc(beq);
		__syncthreads();
		int pre_eq, tot_eq;
		block_prefix(eq_w, nw, w, pre_eq, tot_eq);
		int before_eq = carry_eq + pre_eq + __popc(beq & ((1u << l) - 1));
		bool sel = gt || (eq && before_eq < c.ties);
		u32 bsel = __ballot_sync(0xffffffffu, sel);
		if (l == 0) sel_w[w] = __popc(bsel);
		__syncthreads();
		int pre_sel, tot_sel;
		block_prefix(sel_w, nw, w, pre_sel, tot_sel);
		int before_sel = carry_sel + pre_sel + __popc(bsel & ((1u << l) - 1));
		if (i < n) mark(i, sel, before_sel);
		carry_eq += tot_eq;
		carry_sel += tot_sel;
		__syncthreads();
	}
}
