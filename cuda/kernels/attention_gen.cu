// Block-sparse attention with gathered key rows, for plans the plain
// kernels cannot run (mma.sync, sm_80 and newer): PSA's pooled pyramid
// levels, S2O's token orders, two-pass state resumption and early stop.
//
// One CTA computes one plan row (one query block of one batch and head).
// Every 64-key tile is described by a slot table in shared memory: for each
// of its 64 key slots the K and V row to read (a token of the input, or an
// entry of the pooled pyramid), the key's token for causal masking and a
// logit bias. The loads gather rows by that table with cp.async, so no
// permuted or pooled copy of the inputs is ever made per row.
//
// Compile-time configuration (set by the Go side with -D):
//   HEAD_DIM  64 or 128 (inputs with other head dims are zero-padded)
//   BLOCK_Q   query rows per CTA = the plan's BlockQ (64 or 128)
//   IS_BF16   1 for bfloat16 inputs, 0 for float16
//   LEVELS    1: entries carry levels (PSA §3, Alg. 1). A level-h entry
//             reads its block's 2^(h-1)-pooled keys and values from the
//             pyramid with logit bias log2(tokens pooled) in log2 units,
//             (h−1) for a full group; level 0 skips. The row's slots are
//             packed: pooled entries share tiles. Natural order, no stop.
//   GATHER    1: token orders (S2O §3.2): query rows by the plan's query
//             order, key rows by the row's key order; causal masking by
//             token.
//   STATE     1: save each query's online-softmax state (m, ℓ, acc) instead
//             of the output (the Init pass); 2: start from the saved state
//             (the pass that resumes it, S2O §3.3); 0: neither.
//   STOP      1: the monotone-gain early stop (S2O §3.2): after an entry
//             whose gain Δℓ < τ·ℓ for every query of the block, the row ends.
//   MT        16-row MMA atoms per warp (1 or 2; 2 shares each K and V
//             fragment between two atoms)
//   OUT16     1 to write the output in the input type, else float32

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
#ifndef MT
#define MT 1
#endif
#if LEVELS && (GATHER || STOP)
#error LEVELS takes the natural order and no stop rule
#endif

#define KT 64             // key slots per tile
#define NWARPS (BLOCK_Q / (16 * MT))
#define NTHREADS (NWARPS * 32)
#define CPR (HEAD_DIM / 8) // 16-byte chunks per row
#define RB (HEAD_DIM * 2)  // bytes per tile row
#define ROWS_PER_PASS (NTHREADS / CPR)
#define NTAB 3        // slot tables: tiles t, t+1 and t+2 in flight

// load_gather copies ROWS rows into the swizzled tile at s (chunk c of row
// r at chunk c ^ (r & 7)); rows[r] is the row's first element, or null for
// a zero row (dummy is any valid address).
template <int ROWS>
__device__ __forceinline__ void load_gather(u32 s, const u16* const* rows, const u16* dummy, int tid) {
	const int r0 = tid / CPR, c = tid % CPR;
#pragma unroll
	for (int k = 0; k < ROWS / ROWS_PER_PASS; k++) {
		const int r = r0 + k * ROWS_PER_PASS;
		const u16* src = rows[r];
		cp_async16(s + r * RB + ((c ^ (r & 7)) << 4), src ? src + c * 8 : dummy, src ? 16 : 0);
	}
}

extern "C" __global__ void __launch_bounds__(NTHREADS, (MT == 2 ? 2 : 1)) attn_fwd(const GenParams g) {
	const Params& p = g.p;
	// Dynamic shared memory: Q, two stages of a K and a V tile, and under
	// LEVELS the staged entry list, the entries' slot offsets and levels.
	extern __shared__ __attribute__((aligned(128))) u16 smem[];
	__shared__ const u16* s_krow[NTAB][KT];
	__shared__ const u16* s_vrow[NTAB][KT];
	__shared__ int s_tok[NTAB][KT];
	__shared__ float s_bias[NTAB][KT];
	__shared__ const u16* s_qrow[BLOCK_Q];
	__shared__ int s_qtok[BLOCK_Q];
	__shared__ int s_wsum[NWARPS];
	__shared__ unsigned int s_cnt[16];
	const u32 sQ = smem_addr(smem);
	const u32 sK0 = sQ + BLOCK_Q * RB; // stage st: K at sK0 + st·2·KT·RB, V after it
#if LEVELS
	int* s_kv = reinterpret_cast<int*>(reinterpret_cast<char*>(smem) + (BLOCK_Q + 4 * KT) * RB);
	int* s_pref = s_kv + MAX_LIST;                                              // MAX_LIST + 1 slot offsets
	unsigned char* s_lvl = reinterpret_cast<unsigned char*>(s_pref + MAX_LIST + 4); // MAX_LIST levels
#endif

	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int qb = p.q_blocks - 1 - blockIdx.x; // the last (longest, causal) blocks first
	const int bh = blockIdx.y;
	const int b = bh / p.Hq, h = bh % p.Hq, kvh = h / (p.Hq / p.Hkv);
	const int prow = bh * p.q_blocks + qb;
	const int e0 = p.row_start[prow], ne = p.row_start[prow + 1] - e0;
	const int q0 = qb * BLOCK_Q;
	const int off = p.Nk - p.Nq; // queries are the last Nq of the Nk tokens
	const u16* gq = p.q + b * p.q_sb + h * p.q_sh;
	const u16* gk = p.k + b * p.k_sb + kvh * p.k_sh;
	const u16* gv = p.v + b * p.v_sb + kvh * p.v_sh;
#if LEVELS
	for (int i = tid; i < ne; i += NTHREADS) s_kv[i] = p.kv_block[e0 + i]; // the host keeps ne ≤ MAX_LIST
#endif
	for (int r = tid; r < BLOCK_Q; r += NTHREADS) {
		int tok = -1;
		if (q0 + r < p.Nq) tok = (GATHER && g.q_order) ? g.q_order[(long long)bh * p.Nq + q0 + r] : q0 + r;
		s_qtok[r] = tok;
		s_qrow[r] = tok >= 0 ? gq + (long long)tok * p.q_sn : nullptr;
	}
	if (tid < 16) s_cnt[tid] = 0;
	// The row's key order (natural: the tokens themselves).
	const int* korder = nullptr;
	int klen = p.Nk;
#if GATHER
	if (g.row_kv) {
		const int o = g.row_kv[prow];
		if (o >= 0) korder = g.kv_order + g.kv_start[o], klen = g.kv_start[o + 1] - g.kv_start[o];
	}
#endif
	__syncthreads();

#if LEVELS
	// Slot offsets: entry i holds slots [s_pref[i], s_pref[i+1]): its
	// block's tokens at level 1, ⌈tokens/2^(h-1)⌉ pooled rows at level h,
	// none at level 0. Each thread sums a run of entries; a block scan
	// places the runs. Entries are counted here by level (the host weighs
	// a pooled entry by the share of its block's keys it scores).
	{
		const int per = (ne + NTHREADS - 1) / NTHREADS;
		const int lo = imin(tid * per, ne), hi = imin(lo + per, ne);
		auto width = [&](int i) -> int {
			const int lv = s_lvl[i], kb = s_kv[i];
			const int n = imin(p.block_k, p.Nk - kb * p.block_k);
			return lv == 0 ? 0 : (n + (1 << (lv - 1)) - 1) >> (lv - 1);
		};
		int sum = 0;
		for (int i = lo; i < hi; i++) {
			const int lv = g.level[e0 + i];
			s_lvl[i] = (unsigned char)lv;
			sum += width(i);
			if (lv == 1) atomicAdd(&s_cnt[0], 1u);
			else if (lv > 1) atomicAdd(&s_cnt[1 + 2 * (lv - 2) + (s_kv[i] == g.k_blocks - 1)], 1u);
		}
		const int x = warp_scan(sum, lane);
		if (lane == 31) s_wsum[warp] = x;
		__syncthreads();
		int run = x - sum;
		for (int w = 0; w < warp; w++) run += s_wsum[w];
		for (int i = lo; i < hi; i++) s_pref[i] = run, run += width(i);
		if (tid == NTHREADS - 1) s_pref[ne] = run;
		__syncthreads();
	}
	const int total = s_pref[ne];
	const int ntiles = (total + KT - 1) / KT;
#else
	const int sub = p.block_k / KT;
	const int ntiles = ne * sub;
#endif

	// fill writes table tb for tile t (tid < KT, one slot each).
	auto fill = [&](int tb, int t) {
		if (tid >= KT) return;
		const u16* kr = nullptr;
		const u16* vr = nullptr;
		int tok = TOK_NONE;
		float bias = 0.f;
#if LEVELS
		const int s = t * KT + tid;
		if (s < total) {
			int lo = 0, hi = ne; // s_pref[lo] ≤ s < s_pref[hi]
			while (hi - lo > 1) {
				const int mid = (lo + hi) >> 1;
				if (s_pref[mid] <= s) lo = mid;
				else hi = mid;
			}
			const int o = s - s_pref[lo], lv = s_lvl[lo], kb = s_kv[lo];
			if (lv == 1) {
				tok = kb * p.block_k + o;
				kr = gk + (long long)tok * p.k_sn, vr = gv + (long long)tok * p.v_sn;
			} else {
				const long long row = g.lvl_row[lv] + ((long long)(b * p.Hkv + kvh) * g.k_blocks + kb) * g.lvl_width[lv] + o;
				kr = g.pk + row * HEAD_DIM, vr = g.pv + row * HEAD_DIM;
				const int n = imin(p.block_k, p.Nk - kb * p.block_k);
				const int cnt = imin(1 << (lv - 1), n - (o << (lv - 1)));
				// PSA §3: a pooled key stands for cnt tokens, bias ln cnt
				// (log2 cnt in the log2 units used here; exact for powers of 2).
				bias = (cnt == (1 << (lv - 1))) ? (float)(lv - 1) : lg2((float)cnt);
				tok = TOK_ANY;
			}
		}
#else
		if (t < ntiles) {
			const int i = t / sub;
			const int kb = p.kv_block[e0 + i];
			const int pos = kb * p.block_k + (t % sub) * KT + tid;
			if (pos < klen) {
				tok = korder ? korder[pos] : pos;
				kr = gk + (long long)tok * p.k_sn, vr = gv + (long long)tok * p.v_sn;
			}
		}
#endif
		s_krow[tb][tid] = kr, s_vrow[tb][tid] = vr, s_tok[tb][tid] = tok, s_bias[tb][tid] = bias;
	};
	auto load_kv = [&](int st, int tb) {
		const u32 sk = sK0 + st * (2 * KT * RB);
		load_gather<KT>(sk, s_krow[tb], gk, tid);
		load_gather<KT>(sk + KT * RB, s_vrow[tb], gv, tid);
	};

	fill(0, 0);
	fill(1, 1);
	__syncthreads();
	load_gather<BLOCK_Q>(sQ, s_qrow, gq, tid);
	load_kv(0, 0);
	cp_commit();
	load_kv(1, 1);
	cp_commit();

	// Online-softmax state of this thread's rows: r and r+8 of each of its
	// warp's MT 16-row atoms (index 2·mt + hf), in log2 units; ℓ and O are
	// partial over this thread's columns until the quad reduction at the end.
	const int wrow0 = warp * 16 * MT;
	int qt[2 * MT];
	float m[2 * MT], l[2 * MT];
	float acc[MT][HEAD_DIM / 8][4];
#pragma unroll
	for (int i = 0; i < 2 * MT; i++) {
		qt[i] = s_qtok[wrow0 + (i >> 1) * 16 + (lane >> 2) + 8 * (i & 1)];
		m[i] = NEG_INF, l[i] = 0.f;
	}
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.f;
#if STATE == 2
	// S2O §3.3: resume the state the Init pass left for each query token.
#pragma unroll
	for (int i = 0; i < 2 * MT; i++) {
		if (qt[i] < 0) continue;
		const long long at = (long long)bh * p.Nq + qt[i];
		m[i] = g.st_m[at];
		l[i] = (lane & 3) == 0 ? g.st_l[at] : 0.f; // the quad's sum, held once
		const float* a = g.st_acc + at * p.Dv;
		const int mt = i >> 1, hf = i & 1;
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) {
			const int col = j * 8 + 2 * (lane & 3);
			acc[mt][j][2 * hf] = col < p.Dv ? a[col] : 0.f;
			acc[mt][j][2 * hf + 1] = col + 1 < p.Dv ? a[col + 1] : 0.f;
		}
	}
#endif
#if STOP
	float lb[2 * MT], ds[2 * MT]; // ℓ before the current entry (rescaled with it), and the entry's gain Δℓ
#pragma unroll
	for (int i = 0; i < 2 * MT; i++) lb[i] = l[i], ds[i] = 0.f;
	const int after = g.row_after ? g.row_after[prow] : g.after;
	u32 stopped = 0;
#endif
#if MT == 1
	u32 qf[HEAD_DIM / 16][4]; // Q stays in registers with one atom a warp
#endif
	const int l7 = lane & 7;
	const u32 q_off = (wrow0 + (lane & 15)) * RB + (((lane >> 4) ^ l7) << 4);
	const u32 k_off = (((lane >> 4) << 3) + l7) * RB + ((((lane >> 3) & 1) ^ l7) << 4);
	const u32 v_off = (l7 + (((lane >> 3) & 1) << 3)) * RB + (((lane >> 4) ^ l7) << 4);
	u32 n_qk = 0;

	for (int t = 0; t < ntiles; t++) {
		const int st = t & 1, tb = t % NTAB;
		fill((t + 2) % NTAB, t + 2); // its table was last read by tile t − 1
		cp_wait_1();
		__syncthreads(); // tile t is in; table t + 2 is written
#if MT == 1
		if (t == 0) {
#pragma unroll
			for (int kk = 0; kk < HEAD_DIM / 16; kk++) ldsm_x4(sQ + (q_off ^ (kk << 5)), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
		}
#endif
		const u32 sK = sK0 + st * (2 * KT * RB), sV = sK + KT * RB;

		// S = Q·Kᵀ for this warp's MT×16 rows and the tile's 64 slots; each
		// K fragment serves every atom of the warp.
		float s[MT][KT / 8][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
#pragma unroll
			for (int j = 0; j < KT / 8; j++) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.f;
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

		// Logits in log2 units with each slot's bias; empty slots and,
		// under causal masking, keys after the query's token are −∞.
#pragma unroll
		for (int j = 0; j < KT / 8; j++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int c = j * 8 + 2 * (lane & 3) + e;
				const int kt = s_tok[tb][c];
				const float bias = s_bias[tb][c];
#pragma unroll
				for (int i = 0; i < 2 * MT; i++) {
					const bool masked = kt == TOK_NONE || (p.causal && kt > qt[i] + off);
					float& x = s[i >> 1][j][2 * (i & 1) + e];
					x = masked ? NEG_INF : fma_(x, p.scale_log2, bias);
				}
			}
		// Online softmax (FlashAttention-2 recurrence).
		float alphas[2 * MT];
		bool rescale = false;
#pragma unroll
		for (int i = 0; i < 2 * MT; i++) {
			const int mt = i >> 1, hf = i & 1;
			float mloc = NEG_INF;
#pragma unroll
			for (int j = 0; j < KT / 8; j++) mloc = fmax_(mloc, fmax_(s[mt][j][2 * hf], s[mt][j][2 * hf + 1]));
			mloc = fmax_(mloc, shfl_xor(mloc, 1));
			mloc = fmax_(mloc, shfl_xor(mloc, 2));
			const float mnew = fmax_(m[i], mloc);
			const float muse = mnew == NEG_INF ? 0.f : mnew;
			const float alpha = ex2(m[i] - muse);
			float sum = 0.f;
#pragma unroll
			for (int j = 0; j < KT / 8; j++) {
				const float p0 = ex2(s[mt][j][2 * hf] - muse), p1 = ex2(s[mt][j][2 * hf + 1] - muse);
				s[mt][j][2 * hf] = p0, s[mt][j][2 * hf + 1] = p1;
				sum += p0 + p1;
			}
			l[i] = l[i] * alpha + sum;
			m[i] = mnew;
			alphas[i] = alpha;
			rescale |= alpha != 1.f;
#if STOP
			lb[i] *= alpha;
			ds[i] = ds[i] * alpha + sum;
#endif
		}
		if (any_sync(rescale)) {
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int j = 0; j < HEAD_DIM / 8; j++) {
					acc[mt][j][0] *= alphas[2 * mt], acc[mt][j][1] *= alphas[2 * mt];
					acc[mt][j][2] *= alphas[2 * mt + 1], acc[mt][j][3] *= alphas[2 * mt + 1];
				}
		}
		// O += P̃·V; each V fragment serves every atom of the warp.
		u32 pf[MT][KT / 16][4];
#pragma unroll
		for (int mt = 0; mt < MT; mt++) pack_tile(s[mt], pf[mt]);
#pragma unroll
		for (int kk = 0; kk < KT / 16; kk++) {
#pragma unroll
			for (int dp = 0; dp < HEAD_DIM / 16; dp++) {
				u32 b0, b1, b2, b3;
				ldsm_x4_t(sV + (v_off ^ (dp << 5)) + kk * 16 * RB, b0, b1, b2, b3);
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					mma16816(acc[mt][2 * dp], pf[mt][kk], b0, b1);
					mma16816(acc[mt][2 * dp + 1], pf[mt][kk], b2, b3);
				}
			}
		}

#if !LEVELS
		if (t % sub == 0) n_qk++;
#endif
		bool stop_now = false;
#if STOP
		if (t % sub == sub - 1) {
			// S2O §3.2: the row ends after this entry when every query of
			// the block gained less than τ·ℓ. A row that has seen no key
			// yet has no evidence for a stop.
			bool small = true;
#pragma unroll
			for (int i = 0; i < 2 * MT; i++) {
				float gain = ds[i], lold = lb[i];
				gain += shfl_xor(gain, 1), gain += shfl_xor(gain, 2);
				lold += shfl_xor(lold, 1), lold += shfl_xor(lold, 2);
				if (qt[i] >= 0 && (m[i] == NEG_INF || !(gain < g.tau * lold))) small = false;
				lb[i] = l[i], ds[i] = 0.f;
			}
			stop_now = __syncthreads_and(small) && t / sub >= after;
		}
#endif
		__syncthreads(); // every warp is done with stage st and table tb
		if (stop_now) {
#if STOP
			stopped = 1;
#endif
			break;
		}
		load_kv(st, (t + 2) % NTAB);
		cp_commit();
	}
	cp_wait_all(); // no copy outlives the block

#pragma unroll
	for (int i = 0; i < 2 * MT; i++) {
		const int mt = i >> 1, hf = i & 1;
		float lsum = l[i];
		lsum += shfl_xor(lsum, 1);
		lsum += shfl_xor(lsum, 2);
		if (qt[i] < 0) continue;
		const long long at = (long long)bh * p.Nq + qt[i];
#if STATE == 1
		// Leave the state for the pass that resumes it.
		if ((lane & 3) == 0) g.st_m[at] = m[i], g.st_l[at] = lsum;
		float* a = g.st_acc + at * p.Dv;
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) {
			const int col = j * 8 + 2 * (lane & 3);
			if (col < p.Dv) a[col] = acc[mt][j][2 * hf];
			if (col + 1 < p.Dv) a[col + 1] = acc[mt][j][2 * hf + 1];
		}
#else
		const float inv = lsum > 0.f ? 1.f / lsum : 0.f; // no visible key: zeros
#if OUT16
		u16* o = reinterpret_cast<u16*>(p.o) + b * p.o_sb + h * p.o_sh + (long long)qt[i] * p.o_sn;
#else
		float* o = p.o + b * p.o_sb + h * p.o_sh + (long long)qt[i] * p.o_sn;
#endif
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) {
			const int col = j * 8 + 2 * (lane & 3);
			const float x0 = acc[mt][j][2 * hf] * inv, x1 = acc[mt][j][2 * hf + 1] * inv;
#if OUT16
			const u32 w = pack2(x0, x1);
			if (col < p.Dv) o[col] = (u16)(w & 0xffff);
			if (col + 1 < p.Dv) o[col + 1] = (u16)(w >> 16);
#else
			if (col < p.Dv) o[col] = x0;
			if (col + 1 < p.Dv) o[col + 1] = x1;
#endif
		}
#endif
	}

	if (tid == 0) {
#if LEVELS
		if (s_cnt[0]) atomic_add_u64(&p.counters[0], (u64)s_cnt[0]), atomic_add_u64(&p.counters[1], (u64)s_cnt[0]);
#else
		atomic_add_u64(&p.counters[0], (u64)n_qk);
		atomic_add_u64(&p.counters[1], (u64)n_qk);
#endif
#if STOP
		if (stopped) atomic_add_u64(&p.counters[5], 1ull);
#endif
	}
#if LEVELS
	if (tid >= 1 && tid < 15 && s_cnt[tid]) atomic_add_u64(&p.counters[5 + tid], (u64)s_cnt[tid]);
#endif
}
