// S2O's stable descending sort of every list on the device (s2o_sort,
// s2o_merge; see plan_s2o.cu, which includes this after its other
// kernels): each chunk of 4096 elements sorted in one CTA, then a longer
// list's sorted runs merged pairwise, level by level, a CTA per 4096
// outputs.

#define SORT_THREADS 256
#define SORT_ITEMS 16                          // elements a thread holds in registers
#define SORT_CHUNK (SORT_THREADS * SORT_ITEMS) // elements a block sorts or merges: cuda.s2oSortChunk
#define SORT_PAD(p) ((p) + ((p) >> 4))         // a chunk position's shared slot: a thread's 16 elements 17 apart, no bank conflicts
#define SORT_SMEM (SORT_PAD(SORT_CHUNK) + 1)   // u64s: the padded chunk, and the slot serial_merge may read past its end
static_assert(SORT_CHUNK == 4096, "SORT_CHUNK: cuda.s2oSortChunk");

// A list element is (desc_key(score) << 32 | token), and every list is
// written in token order (s2o_qscore, s2o_outq, s2o_kscore; s2o_promote
// only lowers keys in place): tokens are distinct, so a stable ascending
// sort on the key (s2o's ranker, ties in index order) is the ascending
// order of the whole u64s, which have no ties. The sort below merges
// on that total order; only its padding ~0 (no element: a token is below
// 2^31) repeats, at the end.

// SortList is one list to sort: its elements b0 (sorted in place by
// s2o_sort's chunks), the second buffer b1 of the merges, the tokens' order
// out, and the length.
struct SortList {
	u64* b0;
	u64* b1;
	int* out;
	int len;
};

// sort_list_of returns list slot of the query lists (keys == 0; slot l =
// (b·Hq + h)·segs + n, the segment's queries) or of the key lists (keys ==
// 1: the ranked part of segment n's key order, its causal prefix, or every
// key outside its window when not causal). Key lists go longest first:
// slot = (segs − 1 − n)·B·Hq + b·Hq + h, the last segments' long prefixes
// on the first blocks.
__device__ __forceinline__ SortList sort_list_of(const S2OArgs& a, int keys, int slot) {
	SortList s;
	if (!keys) {
		int bh = slot / a.segs, n = slot % a.segs;
		long long lo = (long long)bh * a.Nq + (long long)n * a.seg;
		s.b0 = a.qbuf + lo, s.b1 = a.qbuf2 + lo, s.out = a.qorder + lo;
		s.len = min((n + 1) * a.seg, a.Nq) - n * a.seg;
		return s;
	}
	int heads = a.B * a.Hq, bh = slot % heads, n = a.segs - 1 - slot / heads, l = bh * a.segs + n;
	int wlo, whi;
	s2o_window(a, n, wlo, whi);
	long long base = (long long)a.kv_start[l] + (whi - wlo);
	s.b0 = a.kbuf + base, s.b1 = a.kbuf2 + base, s.out = a.kv_order + base;
	s.len = wlo + (a.causal ? 0 : a.Nk - whi);
	return s;
}

// sort16 sorts x ascending in registers: a bitonic network, 80
// compare-exchanges on constant indices.
__device__ __forceinline__ void sort16(u64 (&x)[SORT_ITEMS]) {
#pragma unroll
	for (int k = 2; k <= SORT_ITEMS; k <<= 1) {
#pragma unroll
		for (int j = k >> 1; j > 0; j >>= 1) {
#pragma unroll
			for (int i = 0; i < SORT_ITEMS; i++) {
				int l = i ^ j;
				if (l > i) {
					bool up = (i & k) == 0, sw = up ? x[i] > x[l] : x[i] < x[l];
					u64 lo = sw ? x[l] : x[i], hi = sw ? x[i] : x[l];
					x[i] = lo, x[l] = hi;
				}
			}
		}
	}
}

// merge_path returns how many of the first diag elements of the merge of
// sorted a[0, na) and b[0, nb) come from a, the earlier of equal elements
// from a (ModernGPU's merge path); at(p, i) reads element i of run p (0:
// a, 1: b).
template <typename At> __device__ __forceinline__ int merge_path(At at, int na, int nb, int diag) {
	int lo = max(0, diag - nb), hi = min(diag, na);
	while (lo < hi) {
		int mid = (lo + hi) >> 1;
		if (at(0, mid) <= at(1, diag - 1 - mid)) lo = mid + 1;
		else hi = mid;
	}
	return lo;
}

// merge_path_warp is merge_path over runs a and b in global memory for a
// whole warp: each round its lanes test 32 evenly spaced places of the
// range left and keep the step between the last that takes from a and the
// next, so a range of 2^17 takes 4 rounds of loads, not 17 (the search
// began each s2o_merge block, and one thread's dependent loads held the
// block for microseconds). The test a[i] ≤ b[diag − 1 − i] holds on a
// prefix of the range, so the ballot's count is that prefix's probes.
__device__ __forceinline__ int merge_path_warp(const u64* a, int na, const u64* b, int nb, int diag) {
	int lo = max(0, diag - nb), hi = min(diag, na), lane = threadIdx.x & 31;
	while (lo < hi) { // warp-uniform
		int step = (hi - lo + 31) >> 5, q = lo + lane * step;
		unsigned m = __ballot_sync(0xffffffffu, q < hi && a[q] <= b[diag - 1 - q]);
		int t = __popc(m);
		if (t == 0) hi = lo; // the range's first place takes from b
		else lo += (t - 1) * step + 1, hi = min(lo - 1 + step, hi);
	}
	return lo;
}

// serial_merge puts the next SORT_ITEMS elements of the merge of chunk
// positions [ai, ae) and [bi, be) of s (the earlier of equal elements
// from the first) in x; past both ends, x holds leftovers. One shared load
// a step, branch-free (it may read slot SORT_PAD(ae) or SORT_PAD(be), at
// most SORT_SMEM − 1, and not use it).
__device__ __forceinline__ void serial_merge(const u64* s, int ai, int ae, int bi, int be, u64 (&x)[SORT_ITEMS]) {
	u64 ak = s[SORT_PAD(ai)], bk = s[SORT_PAD(bi)];
#pragma unroll
	for (int i = 0; i < SORT_ITEMS; i++) {
		bool ta = bi >= be || (ai < ae && ak <= bk);
		x[i] = ta ? ak : bk;
		ai += ta, bi += !ta;
		u64 nk = s[SORT_PAD(ta ? ai : bi)];
		ak = ta ? nk : ak, bk = ta ? bk : nk;
	}
}

// store_chunk writes chunk positions [0, cnt) of s, coalesced, from list
// position o: the tokens (low words) to out when final, else the elements
// to dst.
__device__ __forceinline__ void store_chunk(const u64* s, int cnt, bool final, int* out, u64* dst, int o) {
	for (int p = threadIdx.x; p < cnt; p += SORT_THREADS) {
		u64 e = s[SORT_PAD(p)];
		if (final) out[o + p] = (int)(u32)e;
		else dst[o + p] = e;
	}
}

// s2o_sort sorts chunk c of list slot (sort_list_of), blockIdx.x = slot ·
// cmax + c, cmax the most chunks of SORT_CHUNK elements a list has: the
// block loads the chunk (~0 past the list's end, which sorts last), each
// thread sorts its SORT_ITEMS elements in registers (sort16), and runs of
// 16, 32, … merge pairwise in shared memory (merge_path, serial_merge)
// until one run holds the chunk's elements. A list of one chunk is then
// sorted: its tokens go to out; a longer one's sorted chunks go back to
// b0 in place, for s2o_merge. Chunks past a list's end exit.
extern "C" __global__ void __launch_bounds__(SORT_THREADS, 4) s2o_sort(S2OArgs a, int keys, int cmax) {
	__shared__ u64 s[SORT_SMEM];
	int slot = blockIdx.x / cmax, c = blockIdx.x % cmax, tid = threadIdx.x;
	SortList L = sort_list_of(a, keys, slot);
	int o = c * SORT_CHUNK;
	if (o >= L.len) return; // block-uniform
	int cnt = min(SORT_CHUNK, L.len - o);
#pragma unroll
	for (int i = 0; i < SORT_ITEMS; i++) {
		int p = i * SORT_THREADS + tid;
		s[SORT_PAD(p)] = p < cnt ? L.b0[o + p] : ~0ull;
	}
	__syncthreads();
	u64 x[SORT_ITEMS];
	const int mine = tid * SORT_ITEMS;
#pragma unroll
	for (int i = 0; i < SORT_ITEMS; i++) x[i] = s[SORT_PAD(mine + i)];
	sort16(x);
	// Runs of `run` are sorted; while the elements span more than one,
	// merge pairs. A thread whose pair is all padding keeps its x (~0s).
	for (int run = SORT_ITEMS; run < cnt; run <<= 1) {
		__syncthreads(); // every thread has read the last level's runs
#pragma unroll
		for (int i = 0; i < SORT_ITEMS; i++) s[SORT_PAD(mine + i)] = x[i];
		__syncthreads();
		int lo = mine & ~(2 * run - 1); // the pair's first position; run ≤ 2048, so the pair lies in the chunk
		if (lo < cnt) {
			int diag = mine - lo;
			int ai = merge_path([&](int p, int i) { return s[SORT_PAD(lo + p * run + i)]; }, run, run, diag);
			serial_merge(s, lo + ai, lo + run, lo + run + diag - ai, lo + 2 * run, x);
		}
	}
	__syncthreads();
#pragma unroll
	for (int i = 0; i < SORT_ITEMS; i++) s[SORT_PAD(mine + i)] = x[i];
	__syncthreads();
	store_chunk(s, cnt, L.len <= SORT_CHUNK, L.out, L.b0, o);
}

// s2o_merge is merge level `level` of the lists longer than one chunk
// (s2o_sort's slots and grid): runs of R = SORT_CHUNK·2^level sorted
// elements, in b0 at even levels and b1 at odd ones, merge pairwise into
// the other buffer, a block per output chunk c of SORT_CHUNK elements
// (the last run of an odd count merges with none: a copy). Two warps
// find the chunk's first and last places on the pair's merge path in
// global memory (merge_path_warp); the block loads those parts of both
// runs into shared memory, each thread merges its SORT_ITEMS outputs
// (merge_path, serial_merge), and the chunk is stored coalesced. At a
// list's last level (one run after it) the tokens go to out. Lists of
// 2^level chunks or fewer, and chunks past a list's end, exit.
extern "C" __global__ void __launch_bounds__(SORT_THREADS, 4) s2o_merge(S2OArgs a, int keys, int cmax, int level) {
	__shared__ u64 s[SORT_SMEM];
	__shared__ int split[2];
	int slot = blockIdx.x / cmax, c = blockIdx.x % cmax, tid = threadIdx.x;
	SortList L = sort_list_of(a, keys, slot);
	int nc = (L.len + SORT_CHUNK - 1) / SORT_CHUNK;
	if (c >= nc || nc <= (1 << level)) return; // block-uniform
	const u64* src = level & 1 ? L.b1 : L.b0;
	u64* dst = level & 1 ? L.b0 : L.b1;
	long long run = (long long)SORT_CHUNK << level, o = (long long)c * SORT_CHUNK;
	long long ps = o - o % (2 * run); // the pair's first position
	int aS = (int)ps, aE = (int)min(ps + run, (long long)L.len), bS = aE, bE = (int)min(ps + 2 * run, (long long)L.len);
	int na = aE - aS, nb = bE - bS;
	int d0 = (int)(o - ps), d1 = min(d0 + SORT_CHUNK, na + nb);
	if (tid < 64) { // warp 0 finds d0's place, warp 1 d1's
		int w = tid >> 5, at = merge_path_warp(src + aS, na, src + bS, nb, w ? d1 : d0);
		if ((tid & 31) == 0) split[w] = at;
	}
	__syncthreads();
	int a0 = split[0], ma = split[1] - a0, b0 = d0 - a0, cnt = d1 - d0, mb = cnt - ma;
	for (int p = tid; p < cnt; p += SORT_THREADS) s[SORT_PAD(p)] = p < ma ? src[aS + a0 + p] : src[bS + b0 + p - ma];
	__syncthreads();
	u64 x[SORT_ITEMS];
	const int mine = tid * SORT_ITEMS;
	if (mine < cnt) {
		int ai = merge_path([&](int p, int i) { return s[SORT_PAD(p * ma + i)]; }, ma, mb, mine);
		serial_merge(s, ai, ma, ma + mine - ai, cnt, x);
	}
	__syncthreads();
	if (mine < cnt) {
#pragma unroll
		for (int i = 0; i < SORT_ITEMS; i++)
			if (mine + i < cnt) s[SORT_PAD(mine + i)] = x[i];
	}
	__syncthreads();
	store_chunk(s, cnt, nc <= (2 << level), L.out, dst, (int)o);
}
