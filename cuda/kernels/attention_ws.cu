// Warp-specialized block-sparse FlashAttention forward for Hopper (sm_90a),
// after FlashAttention-3 (Shah et al. 2024): §3.1's producer/consumer
// split and §3.2's overlap of each tile's softmax with the tensor-core work
// of its neighbours.
//
// The grid is persistent: each CTA of 384 threads takes the plan's rows
// (128-row query blocks of one batch and head) in launch order, its block
// index first. Where rows differ in length, it draws the next from a
// ticket counter in global memory, so that CTAs that drew short rows take
// more of them; where they are all alike, it takes them gridDim.x apart
// (measured 3% faster for dense non-causal plans). It walks each row's
// CSR list of KV blocks:
//   - warpgroup 0 is the producer. Its registers go to the consumers
//     (setmaxnreg), and one thread issues every copy: a row's Q, then each
//     listed K and V tile, through the bulk tensor copy engine (TMA) into
//     STAGES shared-memory slots, each completing on a full barrier and
//     refilled once the consumers release it on its empty barrier. It
//     runs ahead across rows: the next row's Q and first tiles load while
//     the consumers finish and store the current one;
//   - warpgroups 1 and 2 are the consumers, 64 query rows each: S = Q·Kᵀ
//     from shared memory by wgmma, the online softmax in registers, and
//     O += P̃·V with P̃ from registers; while the softmax of tile j runs, the
//     tensor cores finish S_j and P̃_{j-1}·V_{j-1}.
// Every copy and every wait is on an mbarrier; the only CTA-wide barrier is
// the one after set-up. Dense attention is the plan that lists every
// visible block. Only the producer reads the plan (from global memory);
// it hands each row and each tile's first key to the consumers in shared
// memory, published by the same mbarriers as the data.
//
// Compile-time configuration (set by the Go side with -D):
//   HEAD_DIM  64 or 128 (inputs with other head dims are zero-padded)
//   KT        keys per tile (64 or 128); the plan's BlockK is a multiple
//   STAGES    K and V tile slots each (2 to 4, as shared memory allows)
//   DYNAMIC   1 to draw rows from the ticket counter, 0 to take them
//             gridDim.x apart (plans whose rows are all alike: the
//             atomic's mere presence costs those 3-4%)
//   PINGPONG  1 to make the two consumer warpgroups take turns issuing
//             their MMAs (FlashAttention-3 §3.1), so that one's softmax
//             runs while the other's MMAs do
//   IS_BF16   1 for bfloat16 inputs, 0 for float16
//   OUT16     1 to write the output in the input type, else float32
//   TMA_OUT   1 to stage each row's output in shared memory and store it
//             with TMA (where WSParams.tma_out says the output's map is
//             valid), so that the consumers go on to the next row at once
//   FILTER    1 to apply the plan's λ filter (SpargeAttn §3.4) with one
//             decision per consumer warpgroup, the plan's row group of 64
//             rows, and tiles of one whole KV block (KT = BlockK): a
//             warpgroup whose 64 rows all have max(m_local − m) < λ on a
//             tile does not issue that tile's P̃·V MMA
//
// Shared memory holds Q (128 rows), STAGES K tiles and STAGES V tiles, each
// in the 128-byte-swizzled layout that TMA writes and wgmma reads (rows of
// 64 elements, 16-byte chunk c of row r at c ^ (r & 7); a 128-wide head
// dimension is two such column blocks), then under TMA_OUT the output
// staging buffer: per consumer warpgroup 64 rows in column blocks of 128
// bytes, in the same swizzle.

#ifndef STAGES
#define STAGES 2
#endif
#ifndef OUT16
#define OUT16 0
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#ifndef DYNAMIC
#define DYNAMIC 1
#endif
#ifndef TMA_OUT
#define TMA_OUT 0
#endif
#ifndef FILTER
#define FILTER 0
#endif
#if OUT16
#define OUT_BYTES 2
#else
#define OUT_BYTES 4
#endif
#define OCOLS (128 / OUT_BYTES) // output columns per 128-byte staging row
#define BLOCK_Q 128
#define NTHREADS 384
#define RB (HEAD_DIM * 2) // bytes per tile row
#define CBLK (HEAD_DIM / 64) // 64-column blocks of a tile
#define CONSUMER_THREADS 256
// Registers per thread after setmaxnreg. The launch gives each thread 168
// (65536 / 384, rounded down to a multiple of 8) and setmaxnreg.inc only
// takes what setmaxnreg.dec gave back in the same CTA, so a larger split
// waits forever.
#define PRODUCER_REGS 32
#define CONSUMER_REGS 232
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * CONSUMER_THREADS <= 168 * NTHREADS, "setmaxnreg split exceeds the CTA's registers");

// TMap is an encoded CUtensorMap (cuda/driver.TensorMap).
struct __align__(64) TMap {
	u64 w[16];
};

// WSParams mirrors cuda.wsParams: the tensor maps of Q, K and V (4-D:
// columns, tokens, heads, batch, or columns, heads, tokens, batch, the
// dimensions in order of increasing stride) and of the output (columns,
// tokens, heads, batch), then the common parameters, then per input map 1
// when tokens are its dimension 1, 0 when heads are, then 1 when the
// output's map is valid.
struct WSParams {
	TMap tq, tk, tv, to;
	Params p;
	int tok1[3];
	int tma_out;
};

// tma_load copies the box at (c0, c1, c2, c3) of map into shared memory at
// dst, completing the bytes on bar.
__device__ __forceinline__ void tma_load4(u32 dst, const TMap* map, u32 bar, int c0, int c1, int c2, int c3) {
	asm volatile(
	    "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
	    "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
	    : "memory");
}
// tma_load copies rows [row, row + box) of columns [col, col + 64) of
// head h of batch b.
__device__ __forceinline__ void tma_load(u32 dst, const TMap* map, int tok1, u32 bar, int col, int row, int h, int b) {
	if (tok1)
		tma_load4(dst, map, bar, col, row, h, b);
	else
		tma_load4(dst, map, bar, col, h, row, b);
}

// tma_store4 copies the box at (c0, c1, c2, c3) of map from shared memory
// at src, in the calling thread's bulk group.
__device__ __forceinline__ void tma_store4(const TMap* map, u32 src, int c0, int c1, int c2, int c3) {
	asm volatile(
	    "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(reinterpret_cast<u64>(map)),
	    "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
	    : "memory");
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 1) attn_fwd(const __grid_constant__ WSParams w) {
	const Params& p = w.p;
	extern __shared__ __attribute__((aligned(128))) u16 smem[];
	// Barriers: Q full, Q empty, then per slot K full, K empty, V full,
	// V empty.
	__shared__ __attribute__((aligned(8))) u64 bars[2 + 4 * STAGES];
	// The schedule, handed from the producer to the consumers so that they
	// never wait on global memory: the current row (batch, head, first
	// query, whether it has a tile, or -1 when no row is left), published
	// with its Q, and per K slot
	// the tile's first key, its KV list entry, and whether it is the row's
	// last tile, published with the K tile.
	__shared__ int s_row[4];
	__shared__ int s_tile[STAGES][3];
	// Swizzle atoms must sit on 1024-byte boundaries.
	const u32 pad = ((smem_addr(smem) + 1023) & ~1023u) - smem_addr(smem);
	const u32 sQ = smem_addr(smem) + pad;
	const u32 sK = sQ + BLOCK_Q * RB;
	const u32 sV = sK + STAGES * KT * RB;
	const u32 sO = sV + STAGES * KT * RB; // TMA_OUT's staging buffer
	const u32 bar0 = smem_addr(bars);
	const u32 bar_q = bar0, bar_q_empty = bar0 + 8;
#define FULL_K(s) (bar0 + 8 * (2 + (s)))
#define EMPTY_K(s) (bar0 + 8 * (2 + STAGES + (s)))
#define FULL_V(s) (bar0 + 8 * (2 + 2 * STAGES + (s)))
#define EMPTY_V(s) (bar0 + 8 * (2 + 3 * STAGES + (s)))

	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int off = p.Nk - p.Nq; // queries are the last Nq of the Nk tokens
	const int sub = p.block_k / KT;
	const int items = p.B * p.Hq * p.q_blocks;

	// The current row: batch b, query head h (KV head kvh), query block
	// from q0 (last row qlast), KV list entries [e0, e0 + ntiles / sub).
	int b = 0, h = 0, kvh = 0, q0 = 0, qlast = 0, e0 = 0, ntiles = 0;
	auto set_item = [&](int it) {
		// Head by head, each head's last query block first (under causal
		// masking the longest); or the host's longest-first order.
		int bh = it / p.q_blocks, qb = p.q_blocks - 1 - it % p.q_blocks;
		if (p.order) {
			const int r = p.order[it];
			bh = r / p.q_blocks, qb = r % p.q_blocks;
		}
		b = bh / p.Hq, h = bh % p.Hq, kvh = h / (p.Hq / p.Hkv);
		const int prow = bh * p.q_blocks + qb;
		e0 = p.row_start[prow];
		ntiles = (p.row_start[prow + 1] - e0) * sub;
		q0 = qb * BLOCK_Q;
		qlast = imin(q0 + BLOCK_Q, p.Nq) - 1;
	};

	if (tid == 0) {
		mbar_init(bar_q, 1);
		mbar_init(bar_q_empty, CONSUMER_THREADS);
		for (int s = 0; s < STAGES; s++) {
			mbar_init(FULL_K(s), 1);
			mbar_init(FULL_V(s), 1);
			mbar_init(EMPTY_K(s), CONSUMER_THREADS);
			mbar_init(EMPTY_V(s), CONSUMER_THREADS);
		}
		asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
	}
	__syncthreads();

	// tile_start returns the first key of tile t, or -1 when the tile holds
	// no key any query of this block may see (past Nk, or all in the
	// future). The producer skips those.
	auto tile_start = [&](int t) -> int {
		int kb = p.kv_block[e0 + t / sub];
		int k0 = kb * p.block_k + (t % sub) * KT;
		if (k0 >= p.Nk || (p.causal && k0 > qlast + off)) return -1;
		return k0;
	};
	auto next_tile = [&](int t) -> int {
		while (t < ntiles && tile_start(t) < 0) t++;
		return t;
	};

	if (warp < 4) {
		// Producer warpgroup: keep PRODUCER_REGS registers, give the rest away.
		asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS) : "memory");
		if (warp == 0 && lane == 0) {
			int j = 0, li = 0; // tiles and rows loaded so far
			for (int it = blockIdx.x;; li++) {
				// Read the row's schedule while the consumers finish the last.
				int t = 0;
				if (it < items) {
					set_item(it);
					t = next_tile(0);
				}
				// Q's slot is free once the consumers issued the last S MMA of
				// the previous row and it retired.
				mbar_wait(bar_q_empty, (li & 1) ^ 1);
				if (it >= items) {
					s_row[3] = -1;
					mbar_arrive(bar_q); // releases s_row: no row is left
					break;
				}
				s_row[0] = b, s_row[1] = h, s_row[2] = q0, s_row[3] = t < ntiles;
				mbar_expect(bar_q, BLOCK_Q * RB); // releases s_row with Q
#pragma unroll
				for (int c = 0; c < CBLK; c++) tma_load(sQ + c * (BLOCK_Q * 128), &w.tq, w.tok1[0], bar_q, c * 64, q0, h, b);
				while (t < ntiles) {
					const int s = j % STAGES;
					const u32 ph = ((j / STAGES) & 1) ^ 1; // a fresh barrier's "previous" phase is complete
					const int k0 = tile_start(t), tn = next_tile(t + 1);
					mbar_wait(EMPTY_K(s), ph);
					s_tile[s][0] = k0, s_tile[s][1] = e0 + t / sub, s_tile[s][2] = tn >= ntiles;
					mbar_expect(FULL_K(s), KT * RB); // releases s_tile[s] with K
#pragma unroll
					for (int c = 0; c < CBLK; c++) tma_load(sK + s * (KT * RB) + c * (KT * 128), &w.tk, w.tok1[1], FULL_K(s), c * 64, k0, kvh, b);
					mbar_wait(EMPTY_V(s), ph);
					mbar_expect(FULL_V(s), KT * RB);
#pragma unroll
					for (int c = 0; c < CBLK; c++) tma_load(sV + s * (KT * RB) + c * (KT * 128), &w.tv, w.tok1[2], FULL_V(s), c * 64, k0, kvh, b);
					t = tn, j++;
				}
				// Draw the next row. The consumers are still a few tiles from
				// the end of this one, so the atomic's latency overlaps their
				// work. A launch draws one ticket per row.
#if DYNAMIC
				it = gridDim.x + (int)atomicAdd(p.counters + 4, 1ull);
#else
				it += gridDim.x;
#endif
			}
		}
		return;
	}

	// Consumer warpgroups: CONSUMER_REGS registers each thread.
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS) : "memory");
	const int cw = warp - 4;   // consumer warp, 0..7
	const int wg = cw >> 2;    // consumer warpgroup: rows [64·wg, +64)
	const int wrow0 = cw * 16; // first row of this warp in the block

	float m[2], l[2];
	float acc[HEAD_DIM / 8][4];
	u32 n_qk = 0, n_pv = 0;
	int last_entry = -1;
#if FILTER
	// λ of the current row's head (log2 units); whether the warpgroup's
	// P̃ in pprev takes part in the next P̃·V; active groups of full query
	// blocks and of a ragged last one (the CPU's per-group counts).
	float lam = 0.f;
	bool pv_on = true;
	u32 n_grp[2] = {0, 0};
#endif

	u32 pprev[KT / 16][4] = {};
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
#if FILTER
		// A skipped product still commits its (empty) group, so that the
		// waits count groups as without the filter.
		if (pv_on)
#endif
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
	// release arrives on an empty barrier once this thread's MMAs that
	// read the slot have retired. Every consumer thread arrives: a branch
	// around the arrive (one lane per warp) makes ptxas serialize the MMAs
	// in flight across it (C7513).
	auto release = [&](u32 bar) { mbar_arrive(bar); };
	// softmax masks and exponentiates S of tile t in place, updates m and
	// ℓ, and returns the O rescale factors. It runs while the previous
	// P̃V MMA is in flight, so it must define none of that MMA's input
	// registers (O and P̃): ptxas would serialize the MMAs (C7513). S is
	// safe to overwrite: its MMA retired, and the next S MMA writes it
	// without reading it (wgmma_ss_*_first). P̃ is packed from S only
	// after the P̃V MMA retired (pack_p), as in FlashAttention-3.
	auto softmax = [&](int k0, int entry, float (&alphas)[2]) -> bool {
		const bool need_mask = (k0 + KT > p.Nk) || (p.causal && k0 + KT - 1 > q0 + wg * 64 + off);
		float (&x)[KT / 8][4] = s;
		if (need_mask) mask_tile(x, k0, q0 + wrow0, lane, p.Nk, p.causal, off);
#if FILTER
		float mloc[2];
		const bool rescale = online_softmax(x, m, l, alphas, p.scale_log2, mloc);
		// SpargeAttn §3.4: the warpgroup's 64 rows (one row group) skip
		// this tile's P̃·V when max over them of (m_local − m) < λ; rows
		// past Nq or with no visible key yet take no part.
		float gap = NEG_INF;
#pragma unroll
		for (int hf = 0; hf < 2; hf++)
			if (q0 + wrow0 + (lane >> 2) + 8 * hf < p.Nq && m[hf] != NEG_INF) gap = fmax_(gap, mloc[hf] - m[hf]);
		pv_on = bar_or(5 + wg, 128, !(gap < lam));
		if (pv_on && (cw & 3) == 0 && lane == 0 && q0 + wg * 64 < p.Nq)
			n_grp[(q0 / BLOCK_Q == p.q_blocks - 1) && (p.Nq % BLOCK_Q != 0)]++;
#else
		const bool rescale = online_softmax(x, m, l, alphas, p.scale_log2);
#endif
		if (entry != last_entry) {
			n_qk++;
			n_pv++;
			last_entry = entry;
		}
		return rescale;
	};
	// pack_p rounds the exponentials in S to P̃, the A operand of the next
	// P̃V MMA.
	auto pack_p = [&]() { pack_tile(s, pprev); };
	auto rescale_o = [&](bool rescale, const float (&alphas)[2]) {
		if (any_sync(rescale)) {
#pragma unroll
			for (int jj = 0; jj < HEAD_DIM / 8; jj++) {
				acc[jj][0] *= alphas[0], acc[jj][1] *= alphas[0];
				acc[jj][2] *= alphas[1], acc[jj][3] *= alphas[1];
			}
		}
	};

#if TMA_OUT
	// store_staged normalizes the warpgroup's 64 rows of O by ℓ, writes
	// them to its staging buffer and has one thread store them with TMA,
	// which clips rows past Nq and columns past Dv. The buffer is reused
	// once the previous row's copy has read it.
	auto store_staged = [&](int ob, int oh, int oq0) {
		const bool issuer = (cw & 3) == 0 && lane == 0;
		const u32 buf = sO + wg * (64 * HEAD_DIM * OUT_BYTES);
		if (issuer) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
		asm volatile("bar.sync %0, 128;\n" ::"r"(3 + wg) : "memory");
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			float lsum = l[hf];
			lsum += shfl_xor(lsum, 1);
			lsum += shfl_xor(lsum, 2);
			const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
			const int r = (cw & 3) * 16 + (lane >> 2) + 8 * hf; // row in the warpgroup's 64
#pragma unroll
			for (int j = 0; j < HEAD_DIM / 8; j++) {
				const int col = j * 8 + 2 * (lane & 3);
				const int byte = (col % OCOLS) * OUT_BYTES;
				const u32 a = buf + (col / OCOLS) * (64 * 128) + r * 128 + ((((byte >> 4) ^ (r & 7))) << 4) + (byte & 15);
				const float x0 = acc[j][2 * hf] * inv, x1 = acc[j][2 * hf + 1] * inv;
#if OUT16
				asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(pack2(x0, x1)) : "memory");
#else
				asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(a), "f"(x0), "f"(x1) : "memory");
#endif
			}
		}
		// The generic-proxy writes must be visible to the copy engine.
		asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
		asm volatile("bar.sync %0, 128;\n" ::"r"(3 + wg) : "memory");
		if (issuer) {
			const int row = oq0 + wg * 64;
			if (row < p.Nq) {
#pragma unroll
				for (int c = 0; c < HEAD_DIM / OCOLS; c++)
					if (c * OCOLS < p.Dv) tma_store4(&w.to, buf + c * (64 * 128), c * OCOLS, row, oh, ob);
			}
			asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
		}
	};
#endif

	// Turn-taking (PINGPONG): warpgroup w waits on named barrier 1 + w
	// before it issues MMAs and arrives on the other's after; warpgroup 1
	// lets warpgroup 0 go first. Both walk the same tiles, so the turns
	// pair up, and warpgroup 0 takes one last turn at the end for the
	// hand-over that nobody awaits.
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
	int jb = 0; // tiles consumed so far
	for (int li = 0;; li++) {
		m[0] = m[1] = NEG_INF, l[0] = l[1] = 0.f;
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
		mbar_wait(bar_q, li & 1);
		if (s_row[3] < 0) break;
		b = s_row[0], h = s_row[1], q0 = s_row[2];
#if FILTER
		lam = p.head_lambda_log2 ? p.head_lambda_log2[h] : p.lambda_log2;
#endif
		if (s_row[3]) {
			// The row's first tile: S only.
			mbar_wait(FULL_K(jb % STAGES), (jb / STAGES) & 1);
			int k0 = s_tile[jb % STAGES][0], entry = s_tile[jb % STAGES][1];
			bool last = s_tile[jb % STAGES][2];
			my_turn();
			wg_fence();
			issue_s(jb % STAGES);
			hand_over();
			wg_wait0();
			reg_fence(s);
			release(EMPTY_K(jb % STAGES));
			{
				float alphas[2];
				softmax(k0, entry, alphas);
				pack_p();
			}
			int j = jb + 1;
			// Steady state: S_j and P̃_{j-1}·V_{j-1} in flight, softmax_j.
			for (; !last; j++) {
				const int slot = j % STAGES, prev = (j - 1) % STAGES;
				mbar_wait(FULL_K(slot), (j / STAGES) & 1);
				k0 = s_tile[slot][0], entry = s_tile[slot][1], last = s_tile[slot][2];
				mbar_wait(FULL_V(prev), ((j - 1) / STAGES) & 1);
				reg_fence(acc);
				reg_fence(pprev);
				my_turn();
				wg_fence();
				issue_s(slot);
				issue_pv(prev);
				hand_over();
				wg_wait1(); // S_j is done; P̃_{j-1}·V_{j-1} may still run
				reg_fence(s);
				release(EMPTY_K(slot));
				float alphas[2];
				bool resc = softmax(k0, entry, alphas);
				wg_wait0(); // O and P̃_{j-1} are free again
				reg_fence(acc);
				reg_fence(pprev);
				release(EMPTY_V(prev));
				rescale_o(resc, alphas);
				pack_p();
			}
			// Every S MMA of the row retired: Q's slot may take the next row.
			release(bar_q_empty);
			// The last tile's P̃·V.
			const int prev = (j - 1) % STAGES;
			mbar_wait(FULL_V(prev), ((j - 1) / STAGES) & 1);
			reg_fence(acc);
			reg_fence(pprev);
			my_turn();
			wg_fence();
			issue_pv(prev);
			hand_over();
			wg_wait0();
			reg_fence(acc);
			release(EMPTY_V(prev));
			jb = j;
		} else {
			release(bar_q_empty);
		}
#if TMA_OUT
		if (w.tma_out) {
			store_staged(b, h, q0);
			continue;
		}
#endif
		store_rows(p, acc, l, b, h, q0 + wrow0, lane);
	}
#if TMA_OUT
	if (w.tma_out && (cw & 3) == 0 && lane == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
#if PINGPONG
	if (wg == 0) my_turn(); // warpgroup 1's last hand-over
#endif
	if (cw == 0 && lane == 0) {
		atomic_add_u64(&p.counters[0], (u64)n_qk);
		atomic_add_u64(&p.counters[1], (u64)n_pv);
	}
#if FILTER
	if ((cw & 3) == 0 && lane == 0) {
		if (n_grp[0]) atomic_add_u64(&p.counters[2], (u64)n_grp[0]);
		if (n_grp[1]) atomic_add_u64(&p.counters[3], (u64)n_grp[1]);
	}
#endif
}
