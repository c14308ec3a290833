// The gathering kernel for Hopper (sm_90a), warp-specialized after
// FlashAttention-3 (Shah et al. 2024, §3.1-3.2) as attention_ws.cu is:
// the plans attention_gen.cu runs with mma.sync (PSA's pooled pyramid
// levels, S2O's token orders, two-pass states and the early stop), with
// wgmma on 128-row query blocks.
//
// The grid is persistent, as attention_ws.cu's: each CTA of 384 threads
// takes plan rows (one 128-row query block of one batch and head each) in
// launch order (Params.order, the host's longest first within each head,
// or head by head with each head's last block first), its block index
// first and then one ticket a row from a counter in global memory.
//   - warpgroup 0 is the producer. It sets up each row on its own: the
//     row's plan entries (under LEVELS those with slots, stably by level,
//     so that most tiles hold one level, and their slot offsets, a prefix
//     sum over the entries' pooled widths) and its query rows (by the query
//     order, S2O §3.2). Then, per KT-key tile, each producer thread works
//     out the sources of its four K and V rows (a token of the input, by
//     the row's key order, read a tile ahead; or an entry of the pooled
//     pyramid), in registers, before it waits for the tile's stage itself;
//     after the wait it only issues its cp.async copies (two 128-byte
//     lines a row, eight threads a row) into STAGES shared-memory slots,
//     in the 128-byte-swizzled layout wgmma reads, and publishes its slot's
//     key token for causal masking and logit bias (PSA §3), and per tile
//     whether its slots share one bias. K and V have barriers of their
//     own, as in attention_ws.cu: each slot completes on a full mbarrier
//     and is refilled once the consumers release it on its empty one, a
//     K slot once the tile's S and softmax are done with it, a P̃·V before
//     its V slot (with one barrier a stage, a tile waited for both, and
//     at 2 stages the next tile's copies began only as the consumers
//     reached it). It runs ahead across rows: the next row's set-up, Q
//     (once the consumers release Q's slot after their last S MMA) and
//     first tiles load while the consumers finish and store the current
//     row.
//   - warpgroups 1 and 2 are the consumers, 64 query rows each: S = Q·Kᵀ
//     by wgmma from shared memory, the slots' masks and biases where the
//     producer's per-tile summary says some slot needs one (a bias all the
//     tile's slots share goes into the softmax's exponents instead), the
//     online softmax in registers, and O += P̃·V with P̃ from registers, S_j and
//     P̃_{j-1}·V_{j-1} in flight together (FlashAttention-3 §3.2).
// The early stop (STOP) takes no meeting of the consumer warpgroups, no
// barrier and no per-tile handshake with the producer (BENCHMARKS.md,
// "S2O's early stop without a meeting"):
//   - Each consumer warp posts its vote on tile j (every query of its 16
//     rows gained less than τ·ℓ) in s_vote, as one word tagged with the
//     vote's number, while tile j+1's MMAs run (after it issued them,
//     before softmax_{j+1}); the row's stop after tile j is read after
//     softmax_{j+1}. A warp whose own vote failed knows the answer (no
//     stop) and reads nothing; a warp whose vote passed waits for the seven
//     other words to carry the vote's tag, which they do by then but for a
//     warp still in its MMAs' shadow. Tile j+1's S (already computed) is
//     then dropped, with the m and ℓ it changed. The turns keep every warp
//     within two votes of another's read, so four words a warp (by vote
//     number mod 4) never overwrite a vote still to be read. The words are
//     written and read by shared-memory atomics, so the race checker sees
//     them as the synchronization they are.
//   - The consumers that stop after tile js write (row sequence number mod
//     256, STOP_BIT, js) to s_ctl before they release tile js + 1's K slot
//     (whose S they drop). A producer thread reads s_ctl after each wait for
//     a free K slot and skips the rest of the row from tile js + 1 + STAGES
//     on: that wait acquired the release of tile js + 1's K, so every
//     producer thread sees the stop there, and tiles before it are issued
//     whatever a thread saw. The consumers so know which tiles were issued,
//     and drain (release unread) tile js + 1's V and tiles js + 2 to
//     js + STAGES; a V the producer issues once it has seen the stop only
//     zero-fills its slot, so that the drain waits on no load.
//
// Compile-time configuration (set by the Go side with -D):
//   HEAD_DIM  64 or 128 (inputs with other head dims are zero-padded)
//   IS_BF16   1 for bfloat16 inputs, 0 for float16
//   LEVELS, GATHER, STATE, STOP, OUT16: as in attention_gen.cu
//   KT        keys per tile: 64, or 128 in 2 stages for plans whose blocks
//             are a multiple of 128 keys wide or (LEVELS) whose slots
//             pack into 128-slot tiles
//   STAGES    K/V tile slots (2 to 4)
//   ONE_TILE  1 when the plan's blocks are KT keys wide (no LEVELS): each
//             entry is one tile, so the entry counters and the producer's
//             t / sub fold away (1-4% off S2O's stopped rows on the H200,
//             BENCHMARKS.md, "Session 34")
//   PINGPONG  1 to make the consumer warpgroups take turns issuing MMAs
// The copies arrive on the full barriers as they land
// (cp.async.mbarrier) and the consumers fence after each wait; a producer
// that waited, fenced and arrived itself measured 2-6% slower on an H100
// (BENCHMARKS.md) and was dropped with the one-row-a-CTA grid.

#ifndef LEVELS
#define LEVELS 0
#endif
#ifndef GATHER
#define GATHER 0
#endif
#ifndef STATE
#define STATE 0
#endif
#ifndef STOP
#define STOP 0
#endif
#ifndef OUT16
#define OUT16 0
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef ONE_TILE
#define ONE_TILE 0
#endif
#ifndef PINGPONG
#define PINGPONG 1
#endif
#if LEVELS && (GATHER || STOP)
#error LEVELS takes the natural order and no stop rule
#endif
#if STOP && !PINGPONG
#error STOP orders its votes by the turn-taking barriers
#endif

#define BLOCK_Q 128
#ifndef KT
#define KT 64 // key slots per tile
#endif
#if KT != 64 && KT != 128
#error KT is 64 or 128
#endif
#define NTHREADS 384
#define PRODUCER_THREADS 128
#define CONSUMER_THREADS 256
#define CPR (HEAD_DIM / 8)                  // 16-byte chunks per row
#define RB (HEAD_DIM * 2)                   // bytes per tile row
#define ROWS_PER_PASS (PRODUCER_THREADS / CPR) // rows one producer pass copies (Q)
#define CPASS (CPR / 8)                     // 128-byte lines per K/V row
#define RSTEP (PRODUCER_THREADS / 8)        // rows between a producer thread's K/V rows
#define RPT (KT / RSTEP)                    // K/V rows a producer thread copies a tile
static_assert(RPT <= 8, "a producer thread publishes one slot of the tile");
// Registers per thread after setmaxnreg (the launch gives 168 each: 65536
// / 384 rounded down to a multiple of 8). The producer computes the slot
// tables, so it keeps more than attention_ws.cu's.
// At KT 128 each producer thread copies eight rows a tile, whose sources
// spill at 40 registers.
#if KT == 128
#define PRODUCER_REGS 56
#define CONSUMER_REGS 224
#else
#define PRODUCER_REGS 40
#define CONSUMER_REGS 232
#endif
static_assert(PRODUCER_REGS * PRODUCER_THREADS + CONSUMER_REGS * CONSUMER_THREADS <= 168 * NTHREADS, "setmaxnreg split exceeds the CTA's registers");
// Named barriers: 1 and 2 the consumers' turns, 6 the producer's (its
// row set-up).
#define BAR_PRODUCER 6
#define STOP_BIT (1u << 23) // in s_ctl: the consumers stopped the row

// mbar_arrive_cp makes bar's phase wait for this thread's cp.async copies
// issued so far as well (one more pending arrival, made when they land).
__device__ __forceinline__ void mbar_arrive_cp(u32 bar) {
	asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ int warp_max(int x) {
	int r;
	asm volatile("redux.sync.max.s32 %0, %1, 0xffffffff;\n" : "=r"(r) : "r"(x));
	return r;
}
__device__ __forceinline__ int ld_volatile(const int* p) {
	int r;
	asm volatile("ld.volatile.shared.s32 %0, [%1];\n" : "=r"(r) : "r"(smem_addr(p)) : "memory");
	return r;
}
__device__ __forceinline__ unsigned int ld_volatile_u(const unsigned int* p) {
	return (unsigned int)ld_volatile(reinterpret_cast<const int*>(p));
}

// gather_rows copies ROWS rows into the swizzled tile at s: 16-byte chunk
// c of row r at column block c / 8 (ROWS·128 bytes each), row r, chunk
// (c % 8) ^ (r % 8), as TMA's 128-byte swizzle writes and wgmma reads.
// rows[r] is the row's first element, or null for a row of zeros (dummy
// is any valid address). pt is the producer thread.
template <int ROWS>
__device__ __forceinline__ void gather_rows(u32 s, const u16* const* rows, const u16* dummy, int pt) {
	const int r0 = pt / CPR, c = pt % CPR;
	const u32 col = (c >> 3) * (ROWS * 128);
#pragma unroll
	for (int k = 0; k < ROWS / ROWS_PER_PASS; k++) {
		const int r = r0 + k * ROWS_PER_PASS;
		const u16* src = rows[r];
		cp_async16(s + col + r * 128 + (((c & 7) ^ (r & 7)) << 4), src ? src + c * 8 : dummy, src ? 16 : 0);
	}
}

// softmax_tile is online_softmax (common.cuh) that also returns each
// row's sum of this tile's exponentials (the gain the stop rule weighs),
// with x already scaled when scale is 1, on logits x·scale + tb (tb the
// tile's common bias; −0 adds nothing and folds away at compile time).
__device__ __forceinline__ bool softmax_tile(float (&x)[KT / 8][4], float (&m)[2], float (&l)[2], float (&alphas)[2], float (&sums)[2], float scale, float tb) {
	bool rescale = false;
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float mloc = NEG_INF;
#pragma unroll
		for (int j = 0; j < KT / 8; j++) mloc = fmax_(mloc, fmax_(x[j][2 * hf], x[j][2 * hf + 1]));
		mloc = fmax_(mloc, shfl_xor(mloc, 1));
		mloc = fmax_(mloc, shfl_xor(mloc, 2));
		mloc = mloc * scale + tb;
		const float mnew = fmax_(m[hf], mloc);
		const float muse = mnew == NEG_INF ? 0.f : mnew;
		const float alpha = ex2(m[hf] - muse);
		const float nb = tb - muse;
		float sum = 0.f;
#pragma unroll
		for (int j = 0; j < KT / 8; j++) {
			const float p0 = ex2(fma_(x[j][2 * hf], scale, nb));
			const float p1 = ex2(fma_(x[j][2 * hf + 1], scale, nb));
			x[j][2 * hf] = p0, x[j][2 * hf + 1] = p1;
			sum += p0 + p1;
		}
		l[hf] = l[hf] * alpha + sum;
		m[hf] = mnew;
		alphas[hf] = alpha;
		sums[hf] = sum;
		rescale |= alpha != 1.f;
	}
	return rescale;
}

// I2 is a pair of ints read with one 8-byte shared load.
struct alignas(8) I2 {
	int x, y;
};

// bar_sync is named barrier id over n threads.
__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }

extern "C" __global__ void __launch_bounds__(NTHREADS, 1) attn_fwd(const GenParams g) {
	const Params& p = g.p;
	// Dynamic shared memory, realigned to 1024 bytes for the swizzle: Q,
	// STAGES K tiles, STAGES V tiles, then the row's staged plan entries
	// and, under LEVELS, their slot offsets and levels (the producer's).
	extern __shared__ __attribute__((aligned(128))) u16 smem[];
	// Barriers: Q full, Q empty, then per stage K full, K empty, V full
	// and V empty.
	__shared__ __attribute__((aligned(8))) u64 bars[2 + 4 * STAGES];
	// Per stage what the consumers read: each slot's token and (LEVELS)
	// bias, and per producer warp the largest token of the slots it
	// covers (KT / 4 each, or under LEVELS 32 each for warps below KT / 32)
	// and (LEVELS, warps below KT / 32) its slots' common bias, NaN if they
	// differ.
	__shared__ __attribute__((aligned(16))) int s_tok[STAGES][KT]; // read in pairs
	__shared__ __attribute__((aligned(16))) float s_bias[STAGES][KT];
	__shared__ int s_tmax[STAGES][PRODUCER_THREADS / 32];
#if LEVELS
	__shared__ __attribute__((aligned(KT / 8))) float s_bw[STAGES][KT / 32]; // read at once
	__shared__ u32 s_src[2][KT]; // the producer's: each slot's source, by tile parity
	// The producer's per (level − 1, thread) entry counts, then positions.
	__shared__ __attribute__((aligned(16))) int s_lc[8 * PRODUCER_THREADS];
#endif
	__shared__ const u16* s_qrow[BLOCK_Q];
	// Per row, by the parity of its sequence number (published with Q):
	// its query tokens, and its batch·head, tiles (−1: no row is left) and
	// entries before the stop rule applies.
	__shared__ int s_qtok[2][BLOCK_Q];
	__shared__ int s_rinfo[2][3];
	__shared__ int s_wsum[PRODUCER_THREADS / 32];
	__shared__ unsigned int s_cnt[16];
	__shared__ int s_next;          // the producer's next row
	__shared__ unsigned int s_ctl;  // STOP: row stopped (seq mod 256) << 24 | STOP_BIT | its last tile
	__shared__ unsigned int s_vote[4][8]; // STOP: consumer warp w's vote v in [v mod 4][w]: (v + 1) << 1 | passed
	const u32 pad = ((smem_addr(smem) + 1023) & ~1023u) - smem_addr(smem);
	const u32 sQ = smem_addr(smem) + pad;
	const u32 sK = sQ + BLOCK_Q * RB;
	const u32 sV = sK + STAGES * KT * RB;
	int* s_kv = reinterpret_cast<int*>(reinterpret_cast<char*>(smem) + pad + (BLOCK_Q + 2 * STAGES * KT) * RB);
#if LEVELS
	int* s_pref = s_kv + MAX_LIST;                                                  // MAX_LIST + 1 slot offsets
	unsigned char* s_lvl = reinterpret_cast<unsigned char*>(s_pref + MAX_LIST + 4); // MAX_LIST levels
#endif
	const u32 bar_q = smem_addr(bars), bar_qe = bar_q + 8;
#define FULL_K(s) (bar_q + 8 * (2 + (s)))
#define EMPTY_K(s) (bar_q + 8 * (2 + STAGES + (s)))
#define FULL_V(s) (bar_q + 8 * (2 + 2 * STAGES + (s)))
#define EMPTY_V(s) (bar_q + 8 * (2 + 3 * STAGES + (s)))

	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int off = p.Nk - p.Nq; // queries are the last Nq of the Nk tokens
	const int items = p.B * p.Hq * p.q_blocks;
#if LEVELS || ONE_TILE
	const int sub = 1;
#else
	const int sub = p.block_k / KT;
#endif

	if (tid == 0) {
		mbar_init(bar_q, PRODUCER_THREADS);
		mbar_init(bar_qe, CONSUMER_THREADS);
		for (int s = 0; s < STAGES; s++) {
			mbar_init(FULL_K(s), PRODUCER_THREADS);
			mbar_init(EMPTY_K(s), CONSUMER_THREADS);
			mbar_init(FULL_V(s), PRODUCER_THREADS);
			mbar_init(EMPTY_V(s), CONSUMER_THREADS);
		}
		asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
		s_ctl = 0;
	}
	if (tid < 16) s_cnt[tid] = 0;
	if (tid < 32) (&s_vote[0][0])[tid] = 0; // no vote carries tag 0
	__syncthreads();

	if (warp < 4) {
		// Producer warpgroup.
		asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS) : "memory");
		const int pt = tid;
		int j = 0;  // tiles issued, over all rows
		int li = 0; // rows taken
		for (int it = blockIdx.x;; li++) {
			const int rb = li & 1, seq = li + 1;
			// Every thread is done with the last row's tables, and s_next
			// holds this row's ticket.
			bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
			if (li > 0) it = s_next;
			if (it >= items) break;
			// Head by head, each head's last query block first (under causal
			// masking the longest); or the host's longest-first order.
			int bh = it / p.q_blocks, qb = p.q_blocks - 1 - it % p.q_blocks;
			if (p.order) {
				const int r = p.order[it];
				bh = r / p.q_blocks, qb = r % p.q_blocks;
			}
			const int b = bh / p.Hq, h = bh % p.Hq, kvh = h / (p.Hq / p.Hkv);
			const int prow = bh * p.q_blocks + qb;
			const int e0 = p.row_start[prow];
			int ne = p.row_start[prow + 1] - e0; // the host keeps ne ≤ MAX_LIST
			const int q0 = qb * BLOCK_Q;
			const u16* gq = p.q + b * p.q_sb + h * p.q_sh;
			const u16* gk = p.k + b * p.k_sb + kvh * p.k_sh;
			const u16* gv = p.v + b * p.v_sb + kvh * p.v_sh;
			{
				int tok = -1;
				if (q0 + pt < p.Nq) tok = (GATHER && g.q_order) ? g.q_order[(long long)bh * p.Nq + q0 + pt] : q0 + pt;
				s_qtok[rb][pt] = tok;
				s_qrow[pt] = tok >= 0 ? gq + (long long)tok * p.q_sn : nullptr;
			}
#if LEVELS
			// The entries with slots (levels 1 to 8), stably by level: each
			// thread counts a run of entries by level, an exclusive scan in
			// (level, thread) order places the runs, and each thread moves
			// its run there. ne becomes their number. s_pref holds the
			// staged entries (block << 4 | level) until the offsets.
			{
				const int per = (ne + PRODUCER_THREADS - 1) / PRODUCER_THREADS;
				const int lo = imin(pt * per, ne), hi = imin(lo + per, ne);
				int* const lc = s_lc + pt; // lc[(lv − 1)·PRODUCER_THREADS]
#pragma unroll
				for (int v = 0; v < 8; v++) lc[v * PRODUCER_THREADS] = 0;
				for (int i = lo; i < hi; i++) {
					const int kb = p.kv_block[e0 + i], lv = g.level[e0 + i];
					s_pref[i] = kb << 4 | lv;
					if (lv == 1) atomicAdd(&s_cnt[0], 1u);
					else if (lv > 1) atomicAdd(&s_cnt[1 + 2 * (lv - 2) + (kb == g.k_blocks - 1)], 1u);
					if (lv > 0) lc[(lv - 1) * PRODUCER_THREADS]++;
				}
				bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
				const int4* const c4 = reinterpret_cast<const int4*>(s_lc + 8 * pt);
				int sum = 0;
#pragma unroll
				for (int k = 0; k < 2; k++) {
					const int4 c = c4[k];
					sum += c.x + c.y + c.z + c.w;
				}
				const int x = warp_scan(sum, lane);
				if (lane == 31) s_wsum[warp] = x;
				bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
				int run = x - sum;
				ne = 0;
#pragma unroll
				for (int w = 0; w < PRODUCER_THREADS / 32; w++) run += w < warp ? s_wsum[w] : 0, ne += s_wsum[w];
#pragma unroll
				for (int k = 0; k < 8; k++) {
					const int c = s_lc[8 * pt + k];
					s_lc[8 * pt + k] = run, run += c;
				}
				bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
				for (int i = lo; i < hi; i++) {
					const int c = s_pref[i], lv = c & 15;
					if (lv == 0) continue;
					const int at = lc[(lv - 1) * PRODUCER_THREADS]++;
					s_kv[at] = c >> 4, s_lvl[at] = (unsigned char)lv;
				}
				bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
			}
			// Slot offsets, as in attention_gen.cu: entry i holds slots
			// [s_pref[i], s_pref[i+1]): its block's tokens at level 1,
			// ⌈tokens/2^(h-1)⌉ pooled rows at level h. Each thread sums a run
			// of entries; a scan over the producer's threads places the runs.
			{
				const int per = (ne + PRODUCER_THREADS - 1) / PRODUCER_THREADS;
				const int lo = imin(pt * per, ne), hi = imin(lo + per, ne);
				auto width = [&](int i) -> int {
					const int lv = s_lvl[i], kb = s_kv[i];
					const int n = imin(p.block_k, p.Nk - kb * p.block_k);
					return (n + (1 << (lv - 1)) - 1) >> (lv - 1);
				};
				int sum = 0;
				for (int i = lo; i < hi; i++) sum += width(i);
				const int x = warp_scan(sum, lane);
				if (lane == 31) s_wsum[warp] = x;
				bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
				int run = x - sum;
				for (int w = 0; w < warp; w++) run += s_wsum[w];
				for (int i = lo; i < hi; i++) s_pref[i] = run, run += width(i);
				if (pt == PRODUCER_THREADS - 1) s_pref[ne] = run;
			}
#else
			for (int i = pt; i < ne; i += PRODUCER_THREADS) s_kv[i] = p.kv_block[e0 + i];
#endif
			bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
#if LEVELS
			const int total = s_pref[ne];
			const int ntiles = (total + KT - 1) / KT;
#else
			const int ntiles = ne * sub;
#endif
			if (pt == 0) {
#if STOP
				atomicExch(&s_ctl, (unsigned int)(seq & 0xff) << 24); // not stopped
#endif
				s_rinfo[rb][0] = bh, s_rinfo[rb][1] = ntiles;
				s_rinfo[rb][2] = STOP ? (g.row_after ? g.row_after[prow] : g.after) : 0;
			}
			// Q's slot is free once the consumers' last S MMA of the previous
			// row retired; the arrivals publish the row's tokens and info.
			mbar_wait(bar_qe, rb ^ 1);
			gather_rows<BLOCK_Q>(sQ, s_qrow, gq, pt);
			mbar_arrive_cp(bar_q);
			mbar_arrive(bar_q);
			// Each producer thread copies 16-byte chunks lc and lc + 8 (one
			// 128-byte line each) of the tile's rows lr + 16k, k < RPT, of K
			// and V: eight threads a row, four rows a warp a copy, whole lines.
			// It works out its rows' sources before it waits for the stage
			// (their tokens a tile ahead), so that only the copies follow the
			// wait; lanes lc < RPT publish the token of slot lr + 16·lc
			// (under LEVELS thread pt < KT the token and bias of slot pt).
			const int lr = pt >> 3, lc = pt & 7;
			const u32 dst0 = lr * 128 + ((lc ^ (lr & 7)) << 4);
			const char* const kbase = reinterpret_cast<const char*>(gk) + lc * 16;
			const char* const vbase = reinterpret_cast<const char*>(gv) + lc * 16;
			const u32 ksb = (u32)p.k_sn * 2, vsb = (u32)p.v_sn * 2; // bytes a token
#if LEVELS
			const char* const pkb = reinterpret_cast<const char*>(g.pk) + lc * 16;
			const char* const pvb = reinterpret_cast<const char*>(g.pv) + lc * 16;
			const long long prow0 = (long long)(b * p.Hkv + kvh) * g.k_blocks;
			int ent = 0; // the entry of this thread's slot in the last tile
#else
			const char* const pkb = nullptr;
			const char* const pvb = nullptr;
			// The row's key order (natural: the tokens themselves).
			const int* korder = nullptr;
			int klen = p.Nk;
#if GATHER
			if (g.row_kv) {
				const int o = g.row_kv[prow];
				if (o >= 0) korder = g.kv_order + g.kv_start[o], klen = g.kv_start[o + 1] - g.kv_start[o];
			}
#endif
			// fetch reads this thread's rows' key tokens of tile t, a tile
			// ahead, so that the order's latency hides behind the wait.
			auto fetch = [&](int t, int (&tk)[RPT]) {
				const bool in = t < ntiles;
				const int base = in ? s_kv[t / sub] * p.block_k + (t % sub) * KT + lr : 0;
#pragma unroll
				for (int k = 0; k < RPT; k++) {
					const int pos = base + k * RSTEP;
					tk[k] = (!in || pos >= klen) ? TOK_NONE : (korder ? korder[pos] : pos);
				}
			};
			int tnext[RPT];
			fetch(0, tnext);
#endif
			// copy_rows issues this thread's copies of its RPT rows of one
			// tile into the slot at dst: from base, a token's row every sb
			// bytes, or (LEVELS, where bit k of pooled is set) from pbase, a
			// pooled row every HEAD_DIM · 2 bytes.
			auto copy_rows = [&](u32 dst, const char* base, const char* pbase, u32 sb, const u32 (&idx)[RPT], u32 valid, u32 pooled) {
#pragma unroll
				for (int k = 0; k < RPT; k++) {
					const int bytes = (valid >> k) & 1 ? 16 : 0;
#if LEVELS
					const bool pl = (pooled >> k) & 1;
					const char* r = (pl ? pbase : base) + (unsigned long long)idx[k] * (pl ? (u32)(HEAD_DIM * 2) : sb);
#else
					(void)pbase, (void)pooled;
					const char* r = base + (unsigned long long)idx[k] * sb;
#endif
#pragma unroll
					for (int m = 0; m < CPASS; m++) cp_async16(dst + k * (RSTEP * 128) + m * (KT * 128), r + m * 128, bytes);
				}
			};
#if STOP
			// stopped_at is the tile after which the consumers stopped row
			// seq, or −1 while they have not.
			auto stopped_at = [&](int sq) -> int {
				const unsigned int c = ld_volatile_u(&s_ctl);
				return ((c >> 24) == (unsigned int)(sq & 0xff) && (c & STOP_BIT)) ? (int)(c & (STOP_BIT - 1)) : -1;
			};
#endif
			for (int t = 0; t < ntiles; t++, j++) {
				const int s = j % STAGES;
				const u32 ph = ((j / STAGES) & 1) ^ 1; // a fresh barrier's "previous" phase is complete
				// Per row: the source's index (a token, or under LEVELS a pooled
				// row where bit k of pooled is set) and whether it has one.
				u32 idx[RPT];
				u32 valid = 0, pooled = 0;
				int mytok = TOK_NONE, tmax = TOK_ANY;
				float mybias = 0.f;
#if LEVELS
				// The slot tables take a search per slot (and pooled rows their
				// biases), so threads pt < KT work out one slot each, as a code
				// (bit 31: a pooled row; ~0: none) in a table the copying threads
				// read before the wait; the table alternates by tile.
				{
					const int sl = t * KT + pt;
					u32 code = ~0u;
					if (pt < KT && sl < total) {
						// The slot's entry: s_pref[lo] ≤ sl < s_pref[lo+1]. Slots
						// move KT a tile, so the entry is the last tile's or one of
						// the next few (a level-1 to 4 entry is 8 to 64 slots
						// wide): step, and bisect only beyond, below ent + KT + 1
						// (every entry is at least one slot wide).
						int lo = ent;
#pragma unroll
						for (int st = 0; st < 3; st++)
							if (s_pref[lo + 1] <= sl) lo++;
						if (s_pref[lo + 1] <= sl) {
							int hi = imin(ne, ent + KT + 1); // s_pref[lo] ≤ sl < s_pref[hi]
							while (hi - lo > 1) {
								const int mid = (lo + hi) >> 1;
								if (s_pref[mid] <= sl) lo = mid;
								else hi = mid;
							}
						}
						ent = lo;
						const int o = sl - s_pref[lo], lv = s_lvl[lo], kb = s_kv[lo];
						if (lv == 1) {
							mytok = kb * p.block_k + o;
							code = (u32)mytok;
						} else {
							code = (u32)(g.lvl_row[lv] + (prow0 + kb) * g.lvl_width[lv] + o) | 0x80000000u;
							const int n = imin(p.block_k, p.Nk - kb * p.block_k);
							const int cnt = imin(1 << (lv - 1), n - (o << (lv - 1)));
							// PSA §3: a pooled key stands for cnt tokens, bias ln cnt
							// (log2 cnt in the log2 units used here).
							mybias = (cnt == (1 << (lv - 1))) ? (float)(lv - 1) : lg2((float)cnt);
							mytok = TOK_ANY;
						}
					}
					if (pt < KT) s_src[t & 1][pt] = code;
					else mytok = TOK_ANY; // no slot: neutral in the maximum
					tmax = mytok;
					bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
#pragma unroll
					for (int k = 0; k < RPT; k++) {
						const u32 c = s_src[t & 1][lr + k * RSTEP];
						idx[k] = c & 0x7fffffffu;
						valid |= (u32)(c != ~0u) << k;
						pooled |= (c >> 31 & (u32)(c != ~0u)) << k;
					}
				}
#else
#pragma unroll
				for (int k = 0; k < RPT; k++) {
					const int tok = tnext[k];
					const bool v = tok != TOK_NONE;
					idx[k] = v ? (u32)tok : 0u;
					valid |= (u32)v << k;
					if (k == lc) mytok = tok;
					tmax = tok > tmax ? tok : tmax;
				}
				fetch(t + 1, tnext);
#endif
				tmax = warp_max(tmax);
#if LEVELS
				// The warp's slots' common bias, or NaN.
				int same;
				(void)__match_all_sync(0xffffffffu, __float_as_int(mybias), &same);
				const float wb = same ? mybias : __int_as_float(0x7fc00000);
#endif
				// K first, on its own barriers: the consumers release a K slot
				// once the tile's S and softmax are done with it, a P̃·V ahead of
				// its V slot, so that a tile's K loads a step earlier than a
				// shared stage would let it (with two stages, a whole tile).
				mbar_wait(EMPTY_K(s), ph);
#if STOP
				// The consumers stopped this row after tile js: skip tiles from
				// js + 1 + STAGES on (every producer thread sees the stop there:
				// the consumers write it before they release tile js + 1's K).
				{
					const int js = stopped_at(seq);
					if (js >= 0 && t >= js + 1 + STAGES) break;
				}
#endif
				copy_rows(sK + s * (KT * RB) + dst0, kbase, pkb, ksb, idx, valid, pooled);
#if LEVELS
				if (pt < KT) s_tok[s][pt] = mytok, s_bias[s][pt] = mybias;
#else
				if (lc < RPT) s_tok[s][lr + lc * RSTEP] = mytok;
#endif
				if (lane == 0) {
					s_tmax[s][warp] = tmax;
#if LEVELS
					if (warp < KT / 32) s_bw[s][warp] = wb;
#endif
				}
				mbar_arrive_cp(FULL_K(s));
				mbar_arrive(FULL_K(s)); // publishes the slot tokens and biases
				mbar_wait(EMPTY_V(s), ph);
#if STOP
				// The wait may have acquired the stop (the consumers write it
				// before they release tile js's V, whose slot this is at js +
				// STAGES): a V from tile js + 1 on is drained unread, so its
				// copies only zero-fill and the drain waits on no load.
				{
					const int jv = stopped_at(seq);
					if (jv >= 0 && t > jv) valid = 0;
				}
#endif
				copy_rows(sV + s * (KT * RB) + dst0, vbase, pvb, vsb, idx, valid, pooled);
				mbar_arrive_cp(FULL_V(s));
				mbar_arrive(FULL_V(s));
			}
			// Draw the next row while the consumers finish this one. A launch
			// draws one ticket per row.
			if (pt == 0) s_next = gridDim.x + (int)atomicAdd(g.tickets, 1ull);
		}
		// No row is left: tell the consumers once they took the last row.
		const int rb = li & 1;
		mbar_wait(bar_qe, rb ^ 1);
		if (pt == 0) s_rinfo[rb][1] = -1;
		mbar_arrive(bar_q);
		cp_wait_all(); // no copy outlives the block
#if LEVELS
		bar_sync(BAR_PRODUCER, PRODUCER_THREADS);
		if (pt == 0) {
			if (s_cnt[0]) atomic_add_u64(&p.counters[0], (u64)s_cnt[0]), atomic_add_u64(&p.counters[1], (u64)s_cnt[0]);
			for (int i = 1; i < 15; i++)
				if (s_cnt[i]) atomic_add_u64(&p.counters[5 + i], (u64)s_cnt[i]);
		}
#endif
		return;
	}

	// Consumer warpgroups.
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS) : "memory");
	const int cw = warp - 4;   // consumer warp, 0..7
	const int wg = cw >> 2;    // consumer warpgroup: rows [64·wg, +64)
	const int wrow0 = cw * 16; // first row of this warp in the block
	// The current row's sequence number, and this thread's rows (r and r+8
	// of its warp's 16, in the accumulator layout): their query tokens and
	// the last key token each may see.
	int seq = 0, ntiles = 0, qt[2], qlim[2], qmin = 0;
	u64 n_blk = 0, n_stop = 0; // entries computed, rows stopped

	float m[2], l[2];
	float acc[HEAD_DIM / 8][4];
#if STOP
	float lb[2], ds[2]; // ℓ before the current entry (rescaled with it), and the entry's gain Δℓ
	int after = 0;
	int sj = 0, ent = 0; // tiles of the current entry folded so far, and entries finished
	int nv = 0;          // votes posted, over all rows (their words go by nv mod 4)
	const u32 vaddr = smem_addr(&s_vote[0][cw]);
#endif

	u32 pprev[KT / 16][4];
	float s[KT / 8][4];
	auto issue_s = [&](int slot) {
#pragma unroll
		for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
			u64 da = wg_desc(sQ + (kk >> 2) * (BLOCK_Q * 128) + wg * (64 * 128) + (kk & 3) * 32, 16, 1024);
			u64 db = wg_desc(sK + slot * (KT * RB) + (kk >> 2) * (KT * 128) + (kk & 3) * 32, 16, 1024);
#if KT == 64
			if (kk == 0)
				wgmma_ss_n64_first(s, da, db);
			else
				wgmma_ss_n64(s, da, db, 1);
#else
			if (kk == 0)
				wgmma_ss_n128_first(s, da, db);
			else
				wgmma_ss_n128(s, da, db, 1);
#endif
		}
		wg_commit();
	};
	auto issue_pv = [&](int slot) {
#pragma unroll
		for (int kk = 0; kk < KT / 16; kk++) {
			u64 db = wg_desc(sV + slot * (KT * RB) + kk * (16 * 128), KT * 128, 1024);
#if HEAD_DIM == 64
			wgmma_rs_n64(acc, pprev[kk], db);
#else
			wgmma_rs_n128(acc, pprev[kk], db);
#endif
		}
		wg_commit();
	};
	// softmax applies the slots' masks and biases to S of the tile in
	// slot, where the producer's summary says some slot of it needs one
	// for this thread's rows (tiles of pooled slots, PSA's, only their
	// biases: they are never masked), then folds it into m and ℓ; a bias
	// all the tile's slots share (and no mask) goes to softmax_tile. It
	// returns whether O needs rescaling by alphas; sums are the tile's
	// gains. Each thread's columns come in adjacent pairs, read at once.
	auto softmax = [&](int slot, float (&alphas)[2], float (&sums)[2]) -> bool {
		int tmax = s_tmax[slot][0];
#pragma unroll
		for (int w = 1; w < PRODUCER_THREADS / 32; w++) tmax = s_tmax[slot][w] > tmax ? s_tmax[slot][w] : tmax;
		const bool mask = tmax == TOK_NONE || tmax > qmin;
#if LEVELS
#if KT == 64
		const F2 bw = *reinterpret_cast<const F2*>(&s_bw[slot][0]);
		const bool uniform = bw.x == bw.y; // false where either is NaN
#else
		const float4 bw = *reinterpret_cast<const float4*>(&s_bw[slot][0]);
		const bool uniform = bw.x == bw.y && bw.z == bw.w && bw.x == bw.z;
#endif
#endif
		float scale = p.scale_log2, tb = -0.f; // tb: the tile's common bias (−0: none)
		if (mask) {
#pragma unroll
			for (int j = 0; j < KT / 8; j++) {
				const int c = j * 8 + 2 * (lane & 3);
				const I2 kt = *reinterpret_cast<const I2*>(&s_tok[slot][c]);
#if LEVELS
				const F2 bias = *reinterpret_cast<const F2*>(&s_bias[slot][c]);
#else
				F2 bias;
				bias.x = bias.y = 0.f;
#endif
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					float& x0 = s[j][2 * hf];
					float& x1 = s[j][2 * hf + 1];
					x0 = (kt.x == TOK_NONE || kt.x > qlim[hf]) ? NEG_INF : fma_(x0, scale, bias.x);
					x1 = (kt.y == TOK_NONE || kt.y > qlim[hf]) ? NEG_INF : fma_(x1, scale, bias.y);
				}
			}
			scale = 1.f;
		}
#if LEVELS
		else if (!uniform) {
#pragma unroll
			for (int j = 0; j < KT / 8; j++) {
				const F2 bias = *reinterpret_cast<const F2*>(&s_bias[slot][j * 8 + 2 * (lane & 3)]);
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					s[j][2 * hf] = fma_(s[j][2 * hf], scale, bias.x);
					s[j][2 * hf + 1] = fma_(s[j][2 * hf + 1], scale, bias.y);
				}
			}
			scale = 1.f;
		} else {
			tb = bw.x;
		}
#endif
		return softmax_tile(s, m, l, alphas, sums, scale, tb);
	};
	auto rescale_o = [&](bool rescale, const float (&alphas)[2]) {
		if (any_sync(rescale)) {
#pragma unroll
			for (int jj = 0; jj < HEAD_DIM / 8; jj++) {
				acc[jj][0] *= alphas[0], acc[jj][1] *= alphas[0];
				acc[jj][2] *= alphas[1], acc[jj][3] *= alphas[1];
			}
		}
	};
	// gain folds tile j's softmax into the stop rule's gains; it returns
	// whether the tile ends an entry, whose vote is then due. post_vote
	// posts this warp's vote on the entry (S2O §3.2): the row ends after it
	// when every query of the block gained less than τ·ℓ. A row that has
	// seen no key yet has no evidence for a stop. post_vote runs in the
	// shadow of the next tile's MMAs, before that tile's softmax changes m
	// and ℓ; it returns the vote's number when this warp's vote passed, and
	// −1 when it failed: the row goes on.
	//
	// Entries are tracked by counters (sj, ent), not by j / sub, a run-time
	// division each tile (BENCHMARKS.md, "The early stop's per-tile
	// instructions"); read_vote(v) is the row's decision on vote v.
	auto gain = [&](const float (&alphas)[2], const float (&sums)[2]) -> bool {
#if STOP
#pragma unroll
#if ONE_TILE
		// Every tile ends its entry, and the last vote reset ds to 0.
		for (int hf = 0; hf < 2; hf++) lb[hf] *= alphas[hf], ds[hf] = sums[hf];
		return true;
#else
		for (int hf = 0; hf < 2; hf++) lb[hf] *= alphas[hf], ds[hf] = ds[hf] * alphas[hf] + sums[hf];
		if (++sj < sub) return false;
		sj = 0;
		return true;
#endif
#else
		return false;
#endif
	};
	auto post_vote = [&]() -> int {
#if STOP
		const int e = ent++;
		bool small = e >= after;
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			// Δℓ < τ·ℓ as Σ(Δℓ_i − τ·ℓ_i) < 0 over the quad's columns.
			float d = fma_(-g.tau, lb[hf], ds[hf]);
			d += shfl_xor(d, 1), d += shfl_xor(d, 2);
			if (qt[hf] >= 0 && (m[hf] == NEG_INF || !(d < 0.f))) small = false;
			lb[hf] = l[hf], ds[hf] = 0.f;
		}
		small = __all_sync(0xffffffffu, small);
		const int v = nv++;
		if (lane == 0) asm volatile("atom.shared.exch.b32 _, [%0], %1;\n" ::"r"(vaddr + (u32)(v & 3) * 32u), "r"((unsigned int)(v + 1) << 1 | (small ? 1u : 0u)) : "memory");
		return small ? v : -1;
#else
		return -1;
#endif
	};
	// read_vote waits for every warp's vote v (this warp's passed) and
	// returns whether all passed. Lanes 0..7 read a warp's word each.
	auto read_vote = [&](int v) -> bool {
#if STOP
		const unsigned int want = (unsigned int)(v + 1) << 1;
		unsigned int w = want | 1u;
		for (;;) {
			if (lane < 8) asm volatile("atom.shared.or.b32 %0, [%1], 0;\n" : "=r"(w) : "r"(vaddr + (u32)(v & 3) * 32u + (u32)(lane - cw) * 4u) : "memory");
			if (__all_sync(0xffffffffu, (w & ~1u) == want)) break;
		}
		return __all_sync(0xffffffffu, (w & 1u) != 0);
#else
		(void)v;
		return false;
#endif
	};

	// Turn-taking (PINGPONG), as in attention_ws.cu: warpgroup w waits on
	// named barrier 1 + w before it issues MMAs and arrives on the other's
	// after; warpgroup 1 lets warpgroup 0 go first, and warpgroup 0 takes
	// one last turn at the end for the hand-over nobody awaits. Both
	// warpgroups walk the same tiles and stop at the same one.
	auto my_turn = [&]() {
#if PINGPONG
		asm volatile("bar.sync %0, 256;\n" ::"r"(1 + wg) : "memory");
#endif
	};
	auto hand_over = [&]() {
#if PINGPONG
		asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - wg) : "memory");
#endif
	};
#if PINGPONG
	if (wg == 1) hand_over();
#endif
	int jb = 0; // tiles consumed (or drained) so far, over all rows
	for (int li = 0;; li++) {
		const int rb = li & 1;
		seq = li + 1;
		mbar_wait(bar_q, rb);
		ntiles = s_rinfo[rb][1];
		if (ntiles < 0) break;
		const int bh = s_rinfo[rb][0];
#if STOP
		after = s_rinfo[rb][2];
#endif
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			qt[hf] = s_qtok[rb][wrow0 + (lane >> 2) + 8 * hf];
			qlim[hf] = (qt[hf] >= 0 && p.causal) ? qt[hf] + off : 0x7fffffff;
		}
		qmin = imin(qlim[0], qlim[1]);
#pragma unroll
		for (int hf = 0; hf < 2; hf++) m[hf] = NEG_INF, l[hf] = 0.f;
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#if STATE == 2
		// S2O §3.3: resume the state the Init pass left for each query token.
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			if (qt[hf] < 0) continue;
			const long long at = (long long)bh * p.Nq + qt[hf];
			m[hf] = g.st_m[at];
			l[hf] = (lane & 3) == 0 ? g.st_l[at] : 0.f; // the quad's sum, held once
			const float* a = g.st_acc + at * p.Dv;
#pragma unroll
			for (int j = 0; j < HEAD_DIM / 8; j++) {
				const int col = j * 8 + 2 * (lane & 3);
				acc[j][2 * hf] = col < p.Dv ? a[col] : 0.f;
				acc[j][2 * hf + 1] = col + 1 < p.Dv ? a[col + 1] : 0.f;
			}
		}
#endif
#if STOP
#pragma unroll
		for (int hf = 0; hf < 2; hf++) lb[hf] = l[hf], ds[hf] = 0.f;
		sj = ent = 0;
#endif
		bool stopped = false;
		int done = 0; // tiles computed
		if (ntiles > 0) {
			// The first tile: S only. Data that cp.async wrote is made
			// visible to the tensor cores' (async proxy) reads by a proxy
			// fence after each wait.
			const int s0 = jb % STAGES;
			mbar_wait(FULL_K(s0), (jb / STAGES) & 1);
			fence_proxy_async();
			my_turn();
			wg_fence();
			issue_s(s0);
			hand_over();
			wg_wait0();
			reg_fence(s);
			bool last = ntiles == 1;
			bool due; // the last tile computed ended an entry: its vote is due
			{
				float alphas[2], sums[2];
				const bool resc = softmax(s0, alphas, sums);
				rescale_o(resc, alphas); // a resumed state may need it
				pack_tile(s, pprev);
				due = gain(alphas, sums);
			}
			// S_0 and its softmax are done with K_0 and its tokens (no stop
			// comes before tile 0's vote is read, on tile 1).
			mbar_arrive(EMPTY_K(s0));
			int j = 1;
			// Steady state: S_j and P̃_{j-1}·V_{j-1} in flight, softmax_j.
			for (; !last; j++) {
				const int gj = jb + j;
				const int slot = gj % STAGES, prev = (gj - 1) % STAGES;
				mbar_wait(FULL_K(slot), (gj / STAGES) & 1);
				mbar_wait(FULL_V(prev), ((gj - 1) / STAGES) & 1);
				fence_proxy_async();
				reg_fence(acc);
				reg_fence(pprev);
				my_turn();
				wg_fence();
				issue_s(slot);
				issue_pv(prev);
				hand_over();
				const int pv = due ? post_vote() : -1; // the vote on tile j − 1
				wg_wait1(); // S_j is done; P̃_{j-1}·V_{j-1} may still run
				reg_fence(s);
				float alphas[2], sums[2];
#if STOP
				const float m0 = m[0], m1 = m[1], l0 = l[0], l1 = l[1];
#endif
				const bool resc = softmax(slot, alphas, sums);
#if STOP
				due = gain(alphas, sums);
				// Did the row end after tile j − 1? Then drop tile j's S and
				// what its softmax changed, and tell the producer.
				if (pv >= 0 && read_vote(pv)) {
					m[0] = m0, m[1] = m1, l[0] = l0, l[1] = l1;
					wg_wait0();
					reg_fence(acc);
					reg_fence(pprev);
					if (cw == 0 && lane == 0) atomicExch(&s_ctl, (unsigned int)(seq & 0xff) << 24 | STOP_BIT | (unsigned int)(j - 1));
					mbar_arrive(EMPTY_V(prev));
					mbar_arrive(EMPTY_K(slot)); // after s_ctl: see the producer's check
					stopped = true;
					break;
				}
#endif
				// S_j and its softmax are done with K_j and its tokens.
				mbar_arrive(EMPTY_K(slot));
				wg_wait0(); // O and P̃_{j-1} are free again
				reg_fence(acc);
				reg_fence(pprev);
				mbar_arrive(EMPTY_V(prev));
				rescale_o(resc, alphas);
				pack_tile(s, pprev);
				last = j + 1 >= ntiles;
			}
			// Every S MMA of the row retired: Q's slot may take the next row.
			mbar_arrive(bar_qe);
			if (!stopped) {
				// The last tile's P̃·V.
				const int prev = (jb + j - 1) % STAGES;
				mbar_wait(FULL_V(prev), ((jb + j - 1) / STAGES) & 1);
				fence_proxy_async();
				reg_fence(acc);
				reg_fence(pprev);
				my_turn();
				wg_fence();
				issue_pv(prev);
				hand_over();
				const int pv = due ? post_vote() : -1;
				wg_wait0();
				reg_fence(acc);
				mbar_arrive(EMPTY_V(prev));
				done = j;
				jb += j;
				// The vote on the last entry counts a stop as well.
				if (pv >= 0) stopped = read_vote(pv);
			}
#if STOP
			else {
				// Tiles 0 .. j − 1 computed, tile j's S dropped; the producer
				// issued the row's tiles before j + STAGES: release unread tile
				// j's V and the tiles past j. (Tile j's vote is dropped with it.)
				done = j;
				jb += j;
				mbar_wait(FULL_V(jb % STAGES), (jb / STAGES) & 1);
				mbar_arrive(EMPTY_V(jb % STAGES));
				jb++;
				for (int t = j + 1; t < imin(ntiles, j + STAGES); t++, jb++) {
					mbar_wait(FULL_K(jb % STAGES), (jb / STAGES) & 1);
					mbar_arrive(EMPTY_K(jb % STAGES));
					mbar_wait(FULL_V(jb % STAGES), (jb / STAGES) & 1);
					mbar_arrive(EMPTY_V(jb % STAGES));
				}
			}
#endif
		} else {
			mbar_arrive(bar_qe);
		}
		const int b = bh / p.Hq, h = bh % p.Hq;

#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			float lsum = l[hf];
			lsum += shfl_xor(lsum, 1);
			lsum += shfl_xor(lsum, 2);
			if (qt[hf] < 0) continue;
			const long long at = (long long)bh * p.Nq + qt[hf];
#if STATE == 1
			// Leave the state for the pass that resumes it.
			if ((lane & 3) == 0) g.st_m[at] = m[hf], g.st_l[at] = lsum;
			float* a = g.st_acc + at * p.Dv;
#pragma unroll
			for (int j = 0; j < HEAD_DIM / 8; j++) {
				const int col = j * 8 + 2 * (lane & 3);
				if (col < p.Dv) a[col] = acc[j][2 * hf];
				if (col + 1 < p.Dv) a[col + 1] = acc[j][2 * hf + 1];
			}
			(void)b, (void)h;
#else
			(void)at;
			const float inv = lsum > 0.f ? 1.f / lsum : 0.f; // no visible key: zeros
#if OUT16
			u16* o = reinterpret_cast<u16*>(p.o) + b * p.o_sb + h * p.o_sh + (long long)qt[hf] * p.o_sn;
#else
			float* o = p.o + b * p.o_sb + h * p.o_sh + (long long)qt[hf] * p.o_sn;
#endif
#pragma unroll
			for (int j = 0; j < HEAD_DIM / 8; j++) {
				const int col = j * 8 + 2 * (lane & 3);
				const float x0 = acc[j][2 * hf] * inv, x1 = acc[j][2 * hf + 1] * inv;
#if OUT16
				const u32 w = pack2(x0, x1);
				if (col + 1 < p.Dv && (p.Dv & 1) == 0) {
					*reinterpret_cast<u32*>(o + col) = w;
				} else {
					if (col < p.Dv) o[col] = (u16)(w & 0xffff);
					if (col + 1 < p.Dv) o[col + 1] = (u16)(w >> 16);
				}
#else
				if (col + 1 < p.Dv && (p.Dv & 1) == 0) {
					F2 f;
					f.x = x0, f.y = x1;
					*reinterpret_cast<F2*>(o + col) = f;
				} else {
					if (col < p.Dv) o[col] = x0;
					if (col + 1 < p.Dv) o[col + 1] = x1;
				}
#endif
			}
#endif
		}
		n_blk += (u64)(done / sub);
		n_stop += stopped;
	}
#if PINGPONG
	if (wg == 0) my_turn(); // warpgroup 1's last hand-over
#endif

	if (cw == 0 && lane == 0) {
#if LEVELS
		(void)n_blk; // the producer counts entries by level
#else
		atomic_add_u64(&p.counters[0], n_blk);
		atomic_add_u64(&p.counters[1], n_blk);
#endif
		if (n_stop) atomic_add_u64(&p.counters[5], n_stop);
	}
}
