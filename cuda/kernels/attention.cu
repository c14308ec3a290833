// Block-sparse FlashAttention forward (FlashAttention-2 tiling) with
// mma.sync tensor-core instructions, for sm_80 and newer.
//
// One CTA computes one query block of one (batch, head): it walks the CSR
// row of KV blocks the plan lists, keeping the online-softmax state in
// registers. Dense attention is the plan that lists every visible block.
//
// Compile-time configuration (set by the Go side with -D):
//   HEAD_DIM  64 or 128 (inputs with other head dims are zero-padded)
//   BLOCK_Q   query rows per CTA = the plan's BlockQ (64 or 128)
//   KT        keys per tile; the plan's BlockK is a multiple of KT
//   MT        16-row MMA atoms per warp (1 or 2); warps = BLOCK_Q / (16·MT)
//   IS_BF16   1 for bfloat16 inputs, 0 for float16
//   FILTER    1 to apply the plan's λ filter (SpargeAttn §3.4), else 0
//   WGMMA     1 for Hopper warpgroup MMA (sm_90a; MT = 1, no filter)
//   STAGES    K/V tile buffers: 1 (K and V loads overlap the other half of
//             the tile's work) or 2 (the next tile loads during this one)
//   SKIP_FUTURE 1 to skip, per warpgroup, causal tiles after all its rows
//             (WGMMA without PIPE)
//   OUT16     1 to write the output in the input type, else float32
//   PIPE      1 to overlap each tile's softmax with the tensor-core work of
//             its neighbours (FlashAttention-3 §3.2; WGMMA only)
//
// No CUDA headers are needed: every special instruction is inline PTX.

#ifndef HEAD_DIM
#error HEAD_DIM must be defined
#endif

#ifndef FILTER
#define FILTER 0
#endif
#ifndef WGMMA
#define WGMMA 0
#endif
#if WGMMA && (MT != 1 || FILTER)
#error WGMMA needs MT = 1 and no filter
#endif
#ifndef MINB
#define MINB 1
#endif
#ifndef STAGES
#define STAGES 1
#endif
#ifndef PIPE
#define PIPE 0
#endif
#ifndef SKIP_FUTURE
#define SKIP_FUTURE 0
#endif
#ifndef OUT16
#define OUT16 0
#endif
#if PIPE
#if !WGMMA
#error PIPE needs WGMMA
#endif
#undef STAGES
#define STAGES 2 // two K and two V tile slots
#endif
#define MAX_LIST 2048 // KV list entries staged in shared memory per row
#define NWARPS (BLOCK_Q / (16 * MT))
#define NTHREADS (NWARPS * 32)
#define CPR (HEAD_DIM / 8) // 16-byte chunks per row

// Swizzled tile layout: 16-byte chunk c of row r sits at chunk c ^ (r & 7),
// so that ldmatrix's eight rows hit eight distinct bank groups.

#define RB (HEAD_DIM * 2)               // bytes per tile row
#define ROWS_PER_PASS (NTHREADS / CPR) // rows one pass of all threads copies (a multiple of 8)

// load_rows copies rows [row0, row0+ROWS) of a head (stride sn elements)
// into the swizzled tile at shared address s, zero-filling rows at or past
// nvalid. Each thread always copies the same chunk column of rows
// r0, r0 + ROWS_PER_PASS, ..., so its swizzle is fixed: one shared offset
// plus immediates.
template <int ROWS>
__device__ __forceinline__ void load_rows(u32 s, const u16* g, long long sn, int row0, int nvalid, int tid) {
	const int r0 = tid / CPR, c = tid % CPR;
#if WGMMA
	// Column blocks of 64 elements, each a [ROWS][64] swizzled tile.
	const u32 dst = s + (c >> 3) * (ROWS * 128) + r0 * 128 + (((c & 7) ^ (r0 & 7)) << 4);
	constexpr int row_bytes = 128;
#else
	const u32 dst = s + r0 * RB + ((c ^ (r0 & 7)) << 4);
	constexpr int row_bytes = RB;
#endif
	const u16* src = g + (long long)(row0 + r0) * sn + c * 8;
	const long long step = (long long)ROWS_PER_PASS * sn;
#pragma unroll
	for (int k = 0; k < ROWS / ROWS_PER_PASS; k++) {
		bool ok = row0 + r0 + k * ROWS_PER_PASS < nvalid;
		cp_async16(dst + k * ROWS_PER_PASS * row_bytes, ok ? src + k * step : g, ok ? 16 : 0);
	}
}

extern "C" __global__ void __launch_bounds__(NTHREADS, (WGMMA ? MINB : (MT == 2 ? 2 : (NTHREADS > 128 ? 1 : 2))))
attn_fwd(const Params p) {
	// Dynamic shared memory: the Q, K and V tiles, then the staged KV list
	// and the λ gaps.
	extern __shared__ __attribute__((aligned(128))) u16 smem[];
#if WGMMA
	// Swizzle atoms must sit on 1024-byte boundaries.
	const u32 pad = ((smem_addr(smem) + 1023) & ~1023u) - smem_addr(smem);
#else
	const u32 pad = 0;
#endif
	const u32 sQ = smem_addr(smem) + pad;
	// STAGES buffers, each a K tile then a V tile.
	const u32 sK0 = sQ + BLOCK_Q * RB;
	u32 sK = sK0, sV = sK0 + KT * RB;
	int* s_kv = reinterpret_cast<int*>(reinterpret_cast<char*>(smem) + pad + (BLOCK_Q + 2 * KT * STAGES) * RB);
#if FILTER
	float* s_gap = reinterpret_cast<float*>(s_kv + MAX_LIST);
#endif

	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	// CTA cta computes rows [cta·BLOCK_Q, +BLOCK_Q) of plan query block
	// cta / split; the last blocks go first, as under causal masking they
	// are the longest.
	int cta = p.q_blocks * p.split - 1 - blockIdx.x;
	int bh = blockIdx.y;
	if (p.order) {
		// Longest plan rows first (the host sorted them), so that the last
		// wave holds the shortest rows.
		const int i = blockIdx.y * gridDim.x + blockIdx.x;
		const int r = p.order[i / p.split];
		bh = r / p.q_blocks;
		cta = (r % p.q_blocks) * p.split + p.split - 1 - i % p.split;
	}
	const int qb = cta / p.split;
	const int b = bh / p.Hq, h = bh % p.Hq, kvh = h / (p.Hq / p.Hkv);
	const int prow = bh * p.q_blocks + qb;
	const int e0 = p.row_start[prow], e1 = p.row_start[prow + 1];
	const int q0 = cta * BLOCK_Q;
	if (q0 >= p.Nq) return; // the second half of a short last block
	// One CTA of a plan block counts its entries: the last one with rows,
	// which under causal masking visits every entry any of them visits.
	const bool counts = cta % p.split == p.split - 1 || q0 + BLOCK_Q >= p.Nq;
	const int qlast = imin(q0 + BLOCK_Q, p.Nq) - 1;
	const int off = p.Nk - p.Nq; // queries are the last Nq of the Nk tokens
	const int sub = p.block_k / KT;
	const int ntiles = (e1 - e0) * sub;

	const u16* gq = p.q + b * p.q_sb + h * p.q_sh;
	const u16* gk = p.k + b * p.k_sb + kvh * p.k_sh;
	const u16* gv = p.v + b * p.v_sb + kvh * p.v_sh;

	// tile_start returns the first key of tile t, or -1 when the tile holds
	// no key any query of this block may see (past Nk, or all in the future).
	const bool staged_list = e1 - e0 <= MAX_LIST;
	if (staged_list)
		for (int i = tid; i < e1 - e0; i += NTHREADS) s_kv[i] = p.kv_block[e0 + i];
	__syncthreads();
	auto tile_start = [&](int t) -> int {
		int kb = staged_list ? s_kv[t / sub] : p.kv_block[e0 + t / sub];
		int k0 = kb * p.block_k + (t % sub) * KT;
		if (k0 >= p.Nk || (p.causal && k0 > qlast + off)) return -1;
		return k0;
	};
	auto next_tile = [&](int t) -> int {
		while (t < ntiles && tile_start(t) < 0) t++;
		return t;
	};

#if !PIPE
	int t = next_tile(0);
	load_rows<BLOCK_Q>(sQ, gq, p.q_sn, q0, p.Nq, tid);
	if (t < ntiles) load_rows<KT>(sK, gk, p.k_sn, tile_start(t), p.Nk, tid);
#if STAGES == 2
	if (t < ntiles) load_rows<KT>(sV, gv, p.v_sn, tile_start(t), p.Nk, tid);
	cp_commit();
	// Tile t1 goes to the second buffer; every iteration commits one group,
	// so "all but the newest group" is always the current tile.
	int t1 = next_tile(t + 1);
	if (t1 < ntiles) {
		const u32 b1 = sK0 + 2 * KT * RB;
		load_rows<KT>(b1, gk, p.k_sn, tile_start(t1), p.Nk, tid);
		load_rows<KT>(b1 + KT * RB, gv, p.v_sn, tile_start(t1), p.Nk, tid);
	}
	int buf = 0;
#endif
	cp_commit();
#endif // !PIPE

	float m[MT][2], l[MT][2];
	float acc[MT][HEAD_DIM / 8][4];
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
		m[mt][0] = m[mt][1] = NEG_INF;
		l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.f;
	}
#if MT == 1
	u32 qf[HEAD_DIM / 16][4];
	bool q_loaded = false;
#endif
	u32 n_qk = 0, n_pv = 0, n_grp = 0;
	int last_entry = -1;
	const int wrow0 = warp * MT * 16; // first row of this warp in the block
	// Per-thread ldmatrix offsets for k-step 0: with r ≡ lane (mod 8) and
	// chunk 2·kk + x, the swizzled offset of step kk is off ^ (kk << 5),
	// and whole 16-row steps are plain additions.
	const int l7 = lane & 7;
	const u32 q_off = (wrow0 + (lane & 15)) * RB + (((lane >> 4) ^ l7) << 4);
	const u32 k_off = (((lane >> 4) << 3) + l7) * RB + ((((lane >> 3) & 1) ^ l7) << 4);
	const u32 v_off = (l7 + (((lane >> 3) & 1) << 3)) * RB + (((lane >> 4) ^ l7) << 4);
	const bool last_partial = (qb == p.q_blocks - 1) && (p.Nq % BLOCK_Q != 0);

#if PIPE
#ifndef PIPE_FENCE
#define PIPE_FENCE 1
#endif
#if PIPE_FENCE
#define PIN(x) reg_fence(x)
#else
#define PIN(x) ((void)0)
#endif
	// FlashAttention-3 §3.2, intra-warpgroup pipelining: while the softmax
	// of tile j runs, the tensor cores finish S_j = Q·K_jᵀ and compute
	// O += P̃_{j-1}·V_{j-1}. K_j sits in K slot j&1 and V_j in V slot j&1;
	// each iteration refills the slots it freed, one tile ahead. The first
	// and last iterations are peeled so that the loop has no branches
	// around the asynchronous MMAs.
	{
		const u32 sKs = sK0, sVs = sK0 + 2 * KT * RB;
		const int wg = warp >> 2;
		int tj = next_tile(0);
		int tj1 = tj < ntiles ? next_tile(tj + 1) : ntiles;
		load_rows<BLOCK_Q>(sQ, gq, p.q_sn, q0, p.Nq, tid);
		if (tj < ntiles) load_rows<KT>(sKs, gk, p.k_sn, tile_start(tj), p.Nk, tid);
		cp_commit();
		if (tj1 < ntiles) load_rows<KT>(sKs + KT * RB, gk, p.k_sn, tile_start(tj1), p.Nk, tid);
		if (tj < ntiles) load_rows<KT>(sVs, gv, p.v_sn, tile_start(tj), p.Nk, tid);
		cp_commit();
		u32 pprev[KT / 16][4] = {};
		float s[1][KT / 8][4] = {};
		auto issue_s = [&](int slot) {
#pragma unroll
			for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
				u64 da = wg_desc(sQ + (kk >> 2) * (BLOCK_Q * 128) + wg * (64 * 128) + (kk & 3) * 32, 16, 1024);
				u64 db = wg_desc(sKs + slot * (KT * RB) + (kk >> 2) * (KT * 128) + (kk & 3) * 32, 16, 1024);
#if KT == 64
				wgmma_ss_n64(s[0], da, db, kk);
#else
				wgmma_ss_n128(s[0], da, db, kk);
#endif
			}
			wg_commit();
		};
		auto issue_pv = [&](int vslot) {
#pragma unroll
			for (int kk = 0; kk < KT / 16; kk++) {
				u64 db = wg_desc(sVs + vslot * (KT * RB) + kk * (16 * 128), KT * 128, 1024);
#if HEAD_DIM == 64
				wgmma_rs_n64(acc[0], pprev[kk], db);
#else
				wgmma_rs_n128(acc[0], pprev[kk], db);
#endif
			}
			wg_commit();
		};
		// softmax masks and exponentiates S for tile t in place, updates m
		// and ℓ, and returns the O rescale factors and P̃ packed in pc.
		auto softmax = [&](int t, float (&alphas)[2], u32 (&pc)[KT / 16][4]) -> bool {
			// S stays untouched (writing an MMA's registers while another
			// MMA is in flight would serialize them): the masked,
			// exponentiated values go to x.
			const int k0 = tile_start(t);
			const bool need_mask = (k0 + KT > p.Nk) || (p.causal && k0 + KT - 1 > q0 + off);
			float x[KT / 8][4];
#pragma unroll
			for (int jj = 0; jj < KT / 8; jj++)
#pragma unroll
				for (int e = 0; e < 4; e++) x[jj][e] = s[0][jj][e];
			if (need_mask) mask_tile(x, k0, q0 + wrow0, lane, p.Nk, p.causal, off);
			const bool rescale = online_softmax(x, m[0], l[0], alphas, p.scale_log2);
			pack_tile(x, pc);
			int entry = e0 + t / sub;
			if (entry != last_entry) {
				n_qk++;
				n_pv++;
				last_entry = entry;
			}
			return rescale;
		};
		auto rescale_o = [&](bool rescale, const float (&alphas)[2]) {
			if (any_sync(rescale)) {
#pragma unroll
				for (int jj = 0; jj < HEAD_DIM / 8; jj++) {
					acc[0][jj][0] *= alphas[0], acc[0][jj][1] *= alphas[0];
					acc[0][jj][2] *= alphas[1], acc[0][jj][3] *= alphas[1];
				}
			}
		};
		// refill loads K of tile t2 into K slot and V of tile t1 into V slot.
		auto refill = [&](int kslot, int t2, int vslot, int t1) {
			__syncthreads(); // every warp is done with the slots
			if (t2 < ntiles) load_rows<KT>(sKs + kslot * (KT * RB), gk, p.k_sn, tile_start(t2), p.Nk, tid);
			if (t1 < ntiles) load_rows<KT>(sVs + vslot * (KT * RB), gv, p.v_sn, tile_start(t1), p.Nk, tid);
			cp_commit();
		};
		if (tj < ntiles) {
			int j = 0;
			// Tile 0: S only.
			cp_wait_1();
			fence_proxy_async();
			__syncthreads();
			wg_fence();
			issue_s(0);
			wg_wait0();
			PIN(s[0]);
			{
				float alphas[2];
				u32 pc[KT / 16][4];
				softmax(tj, alphas, pc);
#pragma unroll
				for (int kk = 0; kk < KT / 16; kk++)
#pragma unroll
					for (int e = 0; e < 4; e++) pprev[kk][e] = pc[kk][e];
			}
			int tj2 = tj1 < ntiles ? next_tile(tj1 + 1) : ntiles;
			refill(0, tj2, 1, tj1);
			tj = tj1, tj1 = tj2, j = 1;
			// Steady state: S_j and P̃_{j-1}·V_{j-1} in flight, softmax_j.
			while (tj < ntiles) {
				const int slot = j & 1;
				cp_wait_1();
				fence_proxy_async();
				__syncthreads();
				PIN(s[0]);
				PIN(acc[0]);
				PIN(pprev);
				wg_fence();
				issue_s(slot);
				issue_pv(slot ^ 1);
				wg_wait1(); // S_j is done; P̃_{j-1}·V_{j-1} may still run
				PIN(s[0]); // reads of S stay below the wait
				float alphas[2];
				u32 pc[KT / 16][4];
				bool resc = softmax(tj, alphas, pc);
				wg_wait0(); // O and P̃_{j-1} are free again
				// P̃_{j-1} stays live to here, so the new P̃ cannot take its
				// registers while the MMA reads them; O is touched only now.
				PIN(acc[0]);
				PIN(pprev);
				rescale_o(resc, alphas);
#pragma unroll
				for (int kk = 0; kk < KT / 16; kk++)
#pragma unroll
					for (int e = 0; e < 4; e++) pprev[kk][e] = pc[kk][e];
				tj2 = tj1 < ntiles ? next_tile(tj1 + 1) : ntiles;
				refill(slot, tj2, slot ^ 1, tj1);
				tj = tj1, tj1 = tj2, j++;
			}
			// The last tile's P̃·V.
			cp_wait_1();
			fence_proxy_async();
			__syncthreads();
			PIN(acc[0]);
			PIN(pprev);
			wg_fence();
			issue_pv((j - 1) & 1);
			wg_wait0();
			PIN(acc[0]);
		}
	}
#else
	while (t < ntiles) {
		const int k0 = tile_start(t);
#if STAGES == 2
		sK = sK0 + buf * (2 * KT * RB), sV = sK + KT * RB;
		cp_wait_1();
#else
		cp_wait_all();
#endif
#if WGMMA
		fence_proxy_async(); // cp.async wrote through the generic proxy; wgmma reads through the async one
#endif
		__syncthreads();
#if STAGES == 1
		load_rows<KT>(sV, gv, p.v_sn, k0, p.Nk, tid);
		cp_commit();
#endif

		// A tile wholly after every row of this warpgroup (the second half
		// of a causal diagonal block for the first warpgroup) adds nothing:
		// its MMAs and softmax are skipped. Exact: masked to −∞ it would
		// give P̃ = 0 and leave m, ℓ and O as they are.
#if WGMMA && SKIP_FUTURE
		const bool dead = p.causal && k0 > q0 + (warp >> 2) * 64 + 63 + off;
#else
		constexpr bool dead = false;
#endif
		u32 pf[MT][KT / 16][4];
		bool active[MT];
		if (!dead) {
		// S = Q·Kᵀ for this warp's MT×16 rows and KT keys.
		float s[MT][KT / 8][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int j = 0; j < KT / 8; j++) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.f;
#if WGMMA
		{
			const int wg = warp >> 2; // warpgroup: 64 query rows
			wg_fence();
#pragma unroll
			for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
				u64 da = wg_desc(sQ + (kk >> 2) * (BLOCK_Q * 128) + wg * (64 * 128) + (kk & 3) * 32, 16, 1024);
				u64 db = wg_desc(sK + (kk >> 2) * (KT * 128) + (kk & 3) * 32, 16, 1024);
#if KT == 64
				wgmma_ss_n64(s[0], da, db, kk);
#else
				wgmma_ss_n128(s[0], da, db, kk);
#endif
			}
			wg_commit();
			wg_wait0();
		}
#else
#if MT == 1
		if (!q_loaded) {
#pragma unroll
			for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
				ldsm_x4(sQ + (q_off ^ (kk << 5)), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
			}
			q_loaded = true;
		}
#endif
#pragma unroll
		for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
			u32 a[MT][4];
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
#if MT == 1
				a[mt][0] = qf[kk][0], a[mt][1] = qf[kk][1], a[mt][2] = qf[kk][2], a[mt][3] = qf[kk][3];
#else
				ldsm_x4(sQ + (q_off ^ (kk << 5)) + mt * 16 * RB, a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
#endif
			}
#pragma unroll
			for (int jp = 0; jp < KT / 16; jp++) {
				u32 b0, b1, b2, b3;
				ldsm_x4(sK + (k_off ^ (kk << 5)) + jp * 16 * RB, b0, b1, b2, b3);
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					mma16816(s[mt][2 * jp], a[mt], b0, b1);
					mma16816(s[mt][2 * jp + 1], a[mt], b2, b3);
				}
			}
		}

#endif // WGMMA

		// Mask keys past Nk and, in blocks on the causal diagonal,
		// token-exact the keys after each query. Logits stay unscaled: the
		// scale to log2 units is fused into the exponent's FFMA below.
		const bool need_mask = (k0 + KT > p.Nk) || (p.causal && k0 + KT - 1 > q0 + off);
		if (need_mask) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++) mask_tile(s[mt], k0, q0 + wrow0 + mt * 16, lane, p.Nk, p.causal, off);
		}

		// Online softmax (FlashAttention-2 recurrence), rows r and r+8.
		float alphas[MT][2];
		bool rescale = false;
#if FILTER
		float gap[MT][2];
#endif
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int hf = 0; hf < 2; hf++) {
				float mloc = NEG_INF;
#pragma unroll
				for (int j = 0; j < KT / 8; j++) mloc = fmax_(mloc, fmax_(s[mt][j][2 * hf], s[mt][j][2 * hf + 1]));
				mloc = fmax_(mloc, shfl_xor(mloc, 1));
				mloc = fmax_(mloc, shfl_xor(mloc, 2));
				mloc *= p.scale_log2; // the scale is positive: max commutes with it
				float mnew = fmax_(m[mt][hf], mloc);
				float muse = mnew == NEG_INF ? 0.f : mnew;
				float alpha = ex2(m[mt][hf] - muse);
				float sum = 0.f;
#pragma unroll
				for (int j = 0; j < KT / 8; j++) {
					float p0 = ex2(fma_(s[mt][j][2 * hf], p.scale_log2, -muse));
					float p1 = ex2(fma_(s[mt][j][2 * hf + 1], p.scale_log2, -muse));
					s[mt][j][2 * hf] = p0, s[mt][j][2 * hf + 1] = p1;
					sum += p0 + p1;
				}
				l[mt][hf] = l[mt][hf] * alpha + sum;
				m[mt][hf] = mnew;
				alphas[mt][hf] = alpha;
				rescale |= alpha != 1.f;
#if FILTER
				int row = q0 + wrow0 + mt * 16 + (lane >> 2) + 8 * hf;
				gap[mt][hf] = (row < p.Nq && mnew != NEG_INF) ? mloc - mnew : NEG_INF;
#endif
			}

		// Rescale O only when some row of the warp raised its max; once the
		// maxima settle, most tiles skip these multiplies (exact either way).
		if (any_sync(rescale)) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int j = 0; j < HEAD_DIM / 8; j++) {
					acc[mt][j][0] *= alphas[mt][0], acc[mt][j][1] *= alphas[mt][0];
					acc[mt][j][2] *= alphas[mt][1], acc[mt][j][3] *= alphas[mt][1];
				}
		}

		// SpargeAttn §3.4: skip P̃V for a row group when max(m_local − m) < λ.
#pragma unroll
		for (int mt = 0; mt < MT; mt++) active[mt] = true;
#if FILTER
		{
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				float g = fmax_(gap[mt][0], gap[mt][1]);
				g = fmax_(g, shfl_xor(g, 4));
				g = fmax_(g, shfl_xor(g, 8));
				g = fmax_(g, shfl_xor(g, 16));
				gap[mt][0] = g;
				if (lane == 0) s_gap[warp * MT + mt] = g;
			}
		}
#endif

#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int kk = 0; kk < KT / 16; kk++) {
				pf[mt][kk][0] = pack2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
				pf[mt][kk][1] = pack2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
				pf[mt][kk][2] = pack2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
				pf[mt][kk][3] = pack2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
			}
		} // !dead

#if STAGES == 1
		cp_wait_all();
#if WGMMA
		fence_proxy_async();
#endif
		__syncthreads(); // V is in; every warp is done with K and wrote its gaps
		int tn = next_tile(t + 1);
		if (tn < ntiles) load_rows<KT>(sK, gk, p.k_sn, tile_start(tn), p.Nk, tid);
		cp_commit();
#elif FILTER
		__syncthreads(); // every warp wrote its gaps
#endif

		int entry = e0 + t / sub;
		if (entry != last_entry) {
			n_qk++;
			if (!FILTER) n_pv++;
			last_entry = entry;
		}
#if FILTER
		{
			const int apg = p.row_group / 16; // atoms per group
#pragma unroll
			for (int mt = 0; mt < MT; mt++) {
				int atom = warp * MT + mt, first = atom - atom % apg;
				float g = NEG_INF;
				for (int a = first; a < first + apg; a++) g = fmax_(g, s_gap[a]);
				active[mt] = !(g < (p.head_lambda_log2 ? p.head_lambda_log2[h] : p.lambda_log2));
				if (active[mt] && atom == first && lane == 0 && q0 + first * 16 < p.Nq) n_grp++;
			}
		}
#endif

		// O += P̃·V
#if WGMMA
		if (!dead) {
			wg_fence();
#pragma unroll
			for (int kk = 0; kk < KT / 16; kk++) {
				u64 db = wg_desc(sV + kk * (16 * 128), KT * 128, 1024);
#if HEAD_DIM == 64
				wgmma_rs_n64(acc[0], pf[0][kk], db);
#else
				wgmma_rs_n128(acc[0], pf[0][kk], db);
#endif
			}
			wg_commit();
			wg_wait0();
		}
#else
#pragma unroll
		for (int kk = 0; kk < KT / 16; kk++) {
#pragma unroll
			for (int dp = 0; dp < HEAD_DIM / 16; dp++) {
				u32 b0, b1, b2, b3;
				ldsm_x4_t(sV + (v_off ^ (dp << 5)) + kk * 16 * RB, b0, b1, b2, b3);
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					if (!active[mt]) continue;
					mma16816(acc[mt][2 * dp], pf[mt][kk], b0, b1);
					mma16816(acc[mt][2 * dp + 1], pf[mt][kk], b2, b3);
				}
			}
		}
#endif // WGMMA
#if STAGES == 2
		__syncthreads(); // every warp is done with this buffer: refill it with tile t + 2
		int t2 = next_tile(t1 + 1);
		if (t2 < ntiles) {
			load_rows<KT>(sK, gk, p.k_sn, tile_start(t2), p.Nk, tid);
			load_rows<KT>(sV, gv, p.v_sn, tile_start(t2), p.Nk, tid);
		}
		cp_commit();
		t = t1, t1 = t2, buf ^= 1;
#else
		t = tn;
#endif
	}

#endif // PIPE
	cp_wait_all(); // no copy outlives the block, even with no tile to compute

	// O /= ℓ and the output rows.
#pragma unroll
	for (int mt = 0; mt < MT; mt++) store_rows(p, acc[mt], l[mt], b, h, q0 + wrow0 + mt * 16, lane);

	if (tid == 0 && counts) {
		atomic_add_u64(&p.counters[0], (u64)n_qk);
		atomic_add_u64(&p.counters[1], (u64)n_pv);
	}
	if (n_grp) atomic_add_u64(&p.counters[last_partial ? 3 : 2], (u64)n_grp);
}
