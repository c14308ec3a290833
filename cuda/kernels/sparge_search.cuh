// sparge_rows_search and its radix select (select_last): SpargeAttn's
// prediction for rows of cuda.spargeSearchMin key blocks and more, where
// a sort of the row costs most. Included at the end of plan_sparge.cu,
// whose definitions it uses: SpargeHead, mass, NL, SD, SR and
// SEARCH_THREADS.

// xstep is one butterfly of a transposing reduction: lanes l and l ^ 2S
// each keep S of their 2S sums (the upper ones where bit 2S of l is set)
// and add the partner's copy of those. A template, so that v stays in
// registers (a loop over S left it in local memory).
template <int S> __device__ __forceinline__ void xstep(double* v, int lane) {
	bool up = lane & (2 * S);
#pragma unroll
	for (int t = 0; t < S; t++) {
		double send = up ? v[t] : v[t + S], keep = up ? v[t + S] : v[t];
		v[t] = add64(keep, __shfl_xor_sync(0xffffffffu, send, 2 * S));
	}
}

// warp_sum_mass is the sum over the warp's lanes of x < 2^60 (a lane's
// masses: at most 2^15 of 2^44 each), exact: three 20-bit chunks, each
// summed by one warp reduction without overflow.
__device__ __forceinline__ u64 warp_sum_mass(u64 x) {
	u64 a = __reduce_add_sync(0xffffffffu, (u32)(x & 0xfffffu)), b = __reduce_add_sync(0xffffffffu, (u32)(x >> 20 & 0xfffffu)),
	    c = __reduce_add_sync(0xffffffffu, (u32)(x >> 40));
	return a + (b << 20) + (c << 40);
}

// mass_of_key is mass(p) of a sort key (bits(p) + 1, p in [0, 1]) by
// integer arithmetic, exactly: p·2^44 = significand·2^(e − 1031) for
// biased exponent e (p ≤ 1: a right shift of at least 8), and 0 for a
// subnormal p. It replaces a float64 multiply and a float64-to-integer
// conversion (a slow instruction on the device) per entry and search step.
__device__ __forceinline__ u64 mass_of_key(u64 key) {
	u64 b = key - 1;
	int e = (int)(b >> 52), sh = 1031 - e;
	if (e == 0 || sh >= 64) return 0;
	return ((b & 0xfffffffffffffULL) | (1ULL << 52)) >> sh;
}

// The sort keys of a row's candidates: key = bits(P̂) + 1 (non-negative
// doubles order as their bits), 0 for a block that is not a candidate. The
// row's order is key descending, ties by block index ascending.

#define HP 33 // a digit's column stride in select_last's histograms (banks)

// KEY_ONE is the sort key of probability 1, e^0: the row's largest key.
#define KEY_ONE 0x3ff0000000000001ULL

// select_last returns kstar, the key of the row's last kept entry: the
// largest x whose keys ≥ x reach the quota, TopCdf's mass thr when
// by_mass (compared as __ull2double_rn of the exact fixed-point sum, as
// sparge.Mask compares the cumulative mass), else top-k's count quota.
// A most-significant-digit radix select, 4 bits a pass: each lane adds its
// entries under the current prefix to its own column of hm (mass) and hc
// (count) by digit, lanes 0..15 sum one digit each, and a suffix scan over
// the digits picks the largest digit whose keys, with those above the
// prefix, still reach the quota. The criterion is monotone in x and the
// sums are exact integers, so kstar is the binary search's (and the
// CPU's crossing entry's) key. A digit that holds one entry ends the
// search with that entry's key. The search starts at the digit of the
// highest bit in which some key differs from KEY_ONE (diff: the OR of key ^
// KEY_ONE over the keys), every higher digit being KEY_ONE's in all of them.
// On return *mgt and *cgt are the mass and count of the keys > kstar. hm
// and hc are this warp's 16·HP entries.
__device__ u64 select_last(const u64* key, int n, bool by_mass, double thr, int quota, u64 diff, u64* hm, u16* hc, u64* mgt, int* cgt) {
	const unsigned full = 0xffffffffu;
	int lane = threadIdx.x & 31;
	int top = diff ? (63 - __clzll(diff)) & ~3 : 0;
	u64 prefix = top == 60 ? 0 : KEY_ONE & (~0ULL << (top + 4)), am = 0; // am, ac: the keys above the prefix's range
	int ac = 0;
	for (int shift = top; shift >= 0; shift -= 4) {
#pragma unroll
		for (int q = 0; q < 16; q++) hm[q * HP + lane] = 0, hc[q * HP + lane] = 0;
		u64 high = shift == 60 ? 0 : ~0ULL << (shift + 4); // the prefix's bits
		for (int j = lane; j < n; j += 32) {
			u64 v = key[j];
			if (v != 0 && (v & high) == prefix) {
				int q = (int)(v >> shift) & 15;
				if (by_mass) hm[q * HP + lane] += mass_of_key(v);
				hc[q * HP + lane] += 1;
			}
		}
		__syncwarp();
		u64 bm = 0;
		int bc = 0;
		if (lane < 16)
			for (int l = 0; l < 32; l++) bm += hm[lane * HP + l], bc += hc[lane * HP + l];
		u64 sm = bm; // lane q: Σ over digits ≥ q
		int sc = bc;
#pragma unroll
		for (int o = 1; o < 16; o <<= 1) {
			u64 ym = __shfl_down_sync(full, sm, o);
			int yc = __shfl_down_sync(full, sc, o);
			if (lane + o < 16) sm += ym, sc += yc;
		}
		bool reach = lane < 16 && (by_mass ? __ull2double_rn(am + sm) >= thr : ac + sc >= quota);
		unsigned r = __ballot_sync(full, reach);
		int qs = r ? 31 - __clz(r) : 0; // digit 0 reaches: the prefix's keys did
		am += __shfl_sync(full, sm - bm, qs), ac += __shfl_sync(full, sc - bc, qs);
		int one = __shfl_sync(full, bc, qs) == 1;
		prefix |= (u64)qs << shift;
		__syncwarp(); // the columns are read before the next pass clears them
		if (one && shift > 0) {
			u64 mask = ~0ULL << shift, found = 0;
			for (int j = lane; j < n; j += 32) {
				u64 v = key[j];
				if (v != 0 && (v & mask) == prefix) found = v;
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) {
				u64 y = __shfl_xor_sync(full, found, o);
				found = y > found ? y : found;
			}
			prefix = found;
			break;
		}
	}
	*mgt = am, *cgt = ac;
	return prefix;
}

// SORTED_MAX is the longest row select_sorted takes: 4 entries a lane.
#define SORTED_MAX 128

// before: entry (ka, ia) comes before (kb, ib) in the row's order, key
// descending, ties by block index ascending.
__device__ __forceinline__ bool before(u64 ka, int ia, u64 kb, int ib) { return ka > kb || (ka == kb && ia < ib); }

// select_sorted is select_last for rows of at most SORTED_MAX entries: the
// row's (key, index) pairs are sorted in registers by a bitonic network
// (position p = 4·lane + r; partners 4 apart or more are in other lanes and
// exchanged by shuffles), then the cumulative masses (or counts) of the
// sorted entries give the crossing position c, the first whose cumulative
// mass reaches thr (top-k: c = quota − 1), as sparge.Mask finds it; kstar
// is its key, *cgt the position of kstar's first entry (the count of keys
// > kstar) and *mgt the mass ahead of it. The same kstar, *mgt and *cgt as
// select_last (see there): the last kept key is the crossing entry's.
__device__ u64 select_sorted(const u64* key, int n, bool by_mass, double thr, int quota, u64* mgt, int* cgt) {
	const unsigned full = 0xffffffffu;
	int lane = threadIdx.x & 31;
	u64 kk[4];
	int ii[4];
#pragma unroll
	for (int r = 0; r < 4; r++) {
		int p = 4 * lane + r;
		kk[r] = p < n ? key[p] : 0, ii[r] = p;
	}
#pragma unroll
	for (int k = 2; k <= SORTED_MAX; k <<= 1) {
#pragma unroll
		for (int j = k >> 1; j > 0; j >>= 1) {
			if (j >= 4) { // partner lane ^ j/4, same r
				bool lo = (lane & (j >> 2)) == 0;
#pragma unroll
				for (int r = 0; r < 4; r++) {
					u64 ko = __shfl_xor_sync(full, kk[r], j >> 2);
					int io = __shfl_xor_sync(full, ii[r], j >> 2);
					bool dir = ((4 * lane + r) & k) == 0; // this pair's block runs in the row's order
					bool b = before(kk[r], ii[r], ko, io);
					if (b != (lo == dir)) kk[r] = ko, ii[r] = io; // the lower position keeps the earlier entry when dir
				}
			} else { // partners r and r ^ j in this lane
#pragma unroll
				for (int r = 0; r < 4; r++) {
					if (r & j) continue;
					int h = r | j;
					bool dir = ((4 * lane + r) & k) == 0;
					if (dir ? before(kk[h], ii[h], kk[r], ii[r]) : before(kk[r], ii[r], kk[h], ii[h])) {
						u64 tk = kk[r];
						int ti = ii[r];
						kk[r] = kk[h], ii[r] = ii[h], kk[h] = tk, ii[h] = ti;
					}
				}
			}
		}
	}
	// Cumulative masses (exact integers) in the sorted order.
	u64 cum[4], run = 0;
#pragma unroll
	for (int r = 0; r < 4; r++) {
		run += by_mass && kk[r] ? mass_of_key(kk[r]) : 0;
		cum[r] = run;
	}
	u64 incl = run;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		u64 y = __shfl_up_sync(full, incl, o);
		if (lane >= o) incl += y;
	}
	u64 base = incl - run;
	int c = 0x7fffffff;
#pragma unroll
	for (int r = 3; r >= 0; r--) {
		int p = 4 * lane + r;
		bool hit = by_mass ? kk[r] != 0 && __ull2double_rn(base + cum[r]) >= thr : p == quota - 1;
		if (hit) c = p;
	}
	c = (int)__reduce_min_sync(full, (unsigned)c);
	if (c == 0x7fffffff) c = 0; // unreachable: the whole mass reaches τ·total < total, and 1 ≤ quota ≤ candidates
	int cr = c & 3;
	u64 mine = cr == 0 ? kk[0] : cr == 1 ? kk[1] : cr == 2 ? kk[2] : kk[3];
	u64 kstar = __shfl_sync(full, mine, c >> 2);
	int f = 0x7fffffff;
#pragma unroll
	for (int r = 3; r >= 0; r--)
		if (kk[r] == kstar) f = 4 * lane + r;
	f = (int)__reduce_min_sync(full, (unsigned)f);
	int fr = f & 3;
	u64 ahead = base + (fr == 1 ? cum[0] : fr == 2 ? cum[1] : fr == 3 ? cum[2] : 0); // the mass at positions < f, from f's lane
	*mgt = by_mass ? __shfl_sync(full, ahead, f >> 2) : 0;
	*cgt = f;
	return kstar;
}

// sparge_rows_search is sparge_rows for long rows (cuda.spargeSearchMin
// key blocks and more), where the bitonic sort's log² steps cost most:
// the kept blocks are found by a radix select of the key of the last kept
// entry (select_last), ties at it in block-index order (the CPU's stable
// sort), so the plans are the same. Dynamic shared memory: key[SR][kpad]
// (u64: the compressed logits as bits, then the sort keys), kpad =
// KBlocks, then select_last's histograms, hist[SR][16·HP] (u64) and
// cnts[SR][16·HP] (u16): cuda.spargeSearchRowBytes a row with the keys.
// SEARCH_THREADS threads (cuda.spargeSearchThreads: 128 for rows of at
// most SORTED_MAX key blocks, else 256): in the logits, a warp takes 16/SR
// key blocks at a time against all SR rows (SR up to 8); then a warp per
// row.
//
// Block order: blocks run in one wave at 8K, so each SM's share decides
// the time. Ranked by work, heaviest (latest causal rows) first, ranks go
// to blocks in rounds of sms (the device's SMs), every other round
// reversed: if the hardware places block i on SM i mod sms, each SM gets
// ranks r and 2·sms − 1 − r, heavy with light. Any order gives the same
// plan.
extern "C" __global__ void __launch_bounds__(SEARCH_THREADS)
    sparge_rows_search(PlanArgs a, const double* qm, const double* qsim, const double* kmt, const double* ksim, const SpargeHead* heads,
                int sink, int kpad, int sms) {
	extern __shared__ __align__(16) unsigned char dyn[];
	__shared__ int s_row[SR], s_vis[SR], s_diag[SR], s_qj[SR], s_judge[SR], s_sel[SR], s_h[SR];
	__shared__ double s_theta[SR];
	const int NW = SEARCH_THREADS / 32, KB = 16 / SR;
	int nkb = (a.Nk + a.bk - 1) / a.bk;
	u64* keys = (u64*)dyn;
	u64* hist = keys + (long long)SR * kpad; // select_last's, per row
	u16* cnts = (u16*)(hist + SR * 16 * HP);
	int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	int G = a.Hq / a.Hkv, per = a.q_blocks * G, nblk = (per + SR - 1) / SR;
	int nbkv = a.B * a.Hkv, S = sms > 0 ? sms : gridDim.x;
	int rnd = blockIdx.x / S, pos = blockIdx.x % S, len = min(S, (int)gridDim.x - rnd * S);
	int rank = rnd * S + (rnd & 1 ? len - 1 - pos : pos);
	int bkv = rank % nbkv;                // b·Hkv + kvh
	int blk = nblk - 1 - rank / nbkv;     // late (long) causal rows first
	int b = bkv / a.Hkv, kvh = bkv % a.Hkv;

	// Phase A: the rows' geometry and judge.
	if (tid < SR) {
		int m = tid, i = blk * SR + m;
		int row = -1, vis = 0, diag = -1, qj = 0, judge = 0, sel = 0, h = 0;
		double theta = 0;
		if (i < per) {
			int qb = i / G;
			h = kvh * G + i % G;
			row = (b * a.Hq + h) * a.q_blocks + qb;
			vis = visible_blocks(a, qb);
			if (a.causal && vis > 0) diag = max(0, qb * a.bq + (a.Nk - a.Nq)) / a.bk;
			theta = heads[h].theta;
			judge = theta > 0;
			qj = judge && qsim[row] < theta; // Eq. 5: a non-self-similar query row is computed in full
			sel = !(heads[h].cdf >= 1 || heads[h].topk >= 1); // τ = 1 or top-k 1 keeps every candidate
		}
		s_row[m] = row, s_vis[m] = vis, s_diag[m] = diag, s_qj[m] = qj, s_judge[m] = judge, s_sel[m] = sel, s_h[m] = h, s_theta[m] = theta;
	}
	__syncthreads();
	int maxvis = 0;
	bool logits = false; // some row needs the compressed logits
#pragma unroll
	for (int m = 0; m < SR; m++) {
		maxvis = max(maxvis, s_vis[m]);
		logits = logits || (s_vis[m] > 0 && !s_qj[m]);
	}

	// Phase B: logits of every (row, visible block). Lane l holds the rows'
	// q̄[d] and a key block's k̄[d] for d ≡ l (mod 32) and forms the lane
	// partials of 16 dot products (KB key blocks × SR rows); a transposing
	// butterfly reduces them together.
	const double* kcol = kmt + (long long)bkv * nkb * SD;
	if (logits) {
		double qr[SR][NL];
#pragma unroll
		for (int m = 0; m < SR; m++) {
			int i = blk * SR + m;
			long long row = i < per ? (long long)(b * a.Hq + kvh * G + i % G) * a.q_blocks + i / G : -1;
#pragma unroll
			for (int c = 0; c < NL; c++) {
				int d = lane + 32 * c;
				qr[m][c] = row >= 0 && d < SD ? qm[row * SD + d] : 0.0;
			}
		}
		for (int j0 = warp * KB; j0 < maxvis; j0 += NW * KB) {
			double v[16];
#pragma unroll
			for (int g = 0; g < KB; g++) {
				int j = j0 + g;
				double kv[NL];
#pragma unroll
				for (int c = 0; c < NL; c++) {
					int d = lane + 32 * c;
					kv[c] = j < maxvis && d < SD ? kcol[(long long)j * SD + d] : 0.0;
				}
#pragma unroll
				for (int m = 0; m < SR; m++) {
					double p = 0;
#pragma unroll
					for (int c = 0; c < NL; c++) p = add64(p, mul64(qr[m][c], kv[c]));
					v[g * SR + m] = p;
				}
			}
			// Butterflies 16, 8, 4, 2 each hand half the sums to the
			// partner lane (16 → 1 per lane), then 1 as in warp_sum:
			// lanes 2k and 2k + 1 hold dot k.
			xstep<8>(v, lane);
			xstep<4>(v, lane);
			xstep<2>(v, lane);
			xstep<1>(v, lane);
			v[0] = add64(v[0], __shfl_xor_sync(0xffffffffu, v[0], 1));
			int kd = lane >> 1, j = j0 + kd / SR, m = kd % SR;
			if (!(lane & 1) && j < maxvis) keys[m * kpad + j] = (u64)__double_as_longlong(v[0]);
		}
	}
	__syncthreads();

	// Phase C, a warp per row: the candidates, the compressed softmax
	// e^(Ŝ − max Ŝ) as sort keys and its fixed-point total, the last kept
	// entry, and the row's list.
	const double* ks = ksim + (long long)bkv * nkb;
	for (int m = warp; m < SR; m += NW) {
		int row = s_row[m];
		if (row < 0) continue;
		int vis = s_vis[m], qj = s_qj[m], judge = s_judge[m];
		double theta = s_theta[m];
		u64* key = keys + m * kpad;
		bool sel = false; // select among the candidates (else keep all)
		u64 kstar = 0, mstar = 0, mgt = 0;
		int quota = 0; // top-k: ties at kstar kept
		double thr = 0, cdf = 0;
		if (vis > 0 && !qj) {
			double top = -__longlong_as_double(0x7ff0000000000000LL);
			int nc = 0;
#pragma unroll 4
			for (int j = lane; j < vis; j += 32) {
				bool fix = judge && ks[j] < theta; // Eq. 5: a non-self-similar key column is always computed
				if (!fix) {
					top = fmax(top, __longlong_as_double((long long)key[j]));
					nc++;
				}
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) top = fmax(top, __shfl_xor_sync(0xffffffffu, top, o));
			int ncand = __reduce_add_sync(0xffffffffu, nc);
			u64 tot = 0, diff = 0; // diff: the bits in which some key differs from KEY_ONE
#pragma unroll 4
			for (int j = lane; j < vis; j += 32) {
				bool fix = judge && ks[j] < theta;
				u64 kv = 0;
				if (!fix) {
					double pr = exp64_canon(add64(__longlong_as_double((long long)key[j]), -top));
					tot += mass(pr);
					kv = (u64)__double_as_longlong(pr) + 1;
					diff |= kv ^ KEY_ONE;
				}
				key[j] = kv;
			}
			u64 total = warp_sum_mass(tot);
			diff = (u64)__reduce_or_sync(0xffffffffu, (u32)(diff >> 32)) << 32 | __reduce_or_sync(0xffffffffu, (u32)diff);
			__syncwarp();
			const SpargeHead hp = heads[s_h[m]];
			cdf = hp.cdf;
			sel = s_sel[m] && ncand > 0;
			if (sel) {
				// kstar: the key of the last kept entry in the row's order,
				// the largest x whose keys ≥ x reach the quota: TopCdf's
				// mass τ·total (sparge.Mask's crossing block is the first
				// whose cumulative mass reaches it), or top-k's count.
				int n = 0;
				if (cdf > 0)
					thr = mul64(cdf, __ull2double_rn(total));
				else
					n = max(1, min(ncand, (int)ceil(mul64(hp.topk, (double)vis))));
				int cgt;
				if (vis <= SORTED_MAX)
					kstar = select_sorted(key, vis, cdf > 0, thr, n, &mgt, &cgt);
				else
					kstar = select_last(key, vis, cdf > 0, thr, n, diff, hist + m * 16 * HP, cnts + m * 16 * HP, &mgt, &cgt);
				quota = n - cgt;
				mstar = mass_of_key(kstar);
			}
		}
		// The list: entries ahead of kstar, ties at kstar in index order
		// while TopCdf's mass before them is below τ·total (top-k: while
		// the count is short), fix blocks, diagonal and sink blocks.
		int* out = a.lists + (long long)row * a.stride;
		int n = 0, ties = 0;
		int diag = s_diag[m];
		for (int c0 = 0; c0 < vis; c0 += 32) {
			int j = c0 + lane;
			bool f = false, tie = false;
			if (j < vis) {
				if (qj) {
					f = true;
				} else {
					u64 kv = key[j];
					tie = sel && kv == kstar;
					f = kv == 0 || !sel || kv > kstar || (diag >= 0 && j >= diag) || (sink && j == 0);
				}
			}
			unsigned tb = __ballot_sync(0xffffffffu, tie);
			if (tie) {
				u64 r = ties + __popc(tb & ((1u << lane) - 1));
				f = f || (cdf > 0 ? __ull2double_rn(mgt + r * mstar) < thr : (long long)r < quota);
			}
			ties += __popc(tb);
			unsigned bal = __ballot_sync(0xffffffffu, f);
			if (f) out[n + __popc(bal & ((1u << lane) - 1))] = j;
			n += __popc(bal);
		}
		if (lane == 0) a.row_len[row] = n;
	}
}
