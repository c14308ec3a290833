// Quantized block-sparse attention forward for Hopper (sm_90a): INT8 QKᵀ
// and FP8 P̃V (SpargeAttn §3.5 on SageAttention; FP8 P̃ and V as in
// SageAttention2), on the warp-specialized persistent structure of
// attention_ws.cu (FlashAttention-3 §3.1-3.2), which its comments
// describe: a producer warpgroup whose one thread loads every tile into
// STAGES shared-memory slots, and two consumer warpgroups of 64 query rows
// that overlap each tile's softmax with the MMAs of S_j and P̃_{j-1}·V_{j-1}.
//
// What differs:
//   - the operands are quant.cu's: Q and K in INT8 (rows of 128 bytes,
//     128-byte swizzle), V in FP8 e4m3 transposed in 64-key chunks
//     (64-byte swizzle), all laid out in global memory as shared memory
//     takes them, so each tile is one 1-D bulk copy (no tensor maps);
//   - S = Q·Kᵀ is wgmma s32.s8.s8 and turns into float logits in log2 units
//     as δ_Q·δ_K·scale·log2(e)·S, one δ_Q per 16 rows (a consumer warp's)
//     and one δ_K per 64 keys, which the producer hands over with the tile;
//   - the online softmax is the fp32 one of common.cuh. Under PV8, P is
//     scaled by P_SCALE and rounded to e4m3 (pack_p8), and O += P̃·V is
//     wgmma f32.e4m3.e4m3 with fp32 accumulators, the output
//     O·δ_V[channel]/(P_SCALE·ℓ); otherwise (SageAttention's own choice)
//     P̃ and V are 16-bit (the input type) as in attention_ws.cu, V in
//     64-key chunks of two 64-column blocks (128-byte swizzle);
//   - the output is stored from registers.
// Dense attention is the plan that lists every visible block. Plans with
// a λ filter do not run here (nor on attention_ws.cu).
//
// Compile-time configuration (set by the Go side with -D): KT (keys per
// tile, 64 or 128), STAGES (2 to 4), PV8 (FP8 P̃V, else 16-bit), DYNAMIC,
// PINGPONG, IS_BF16 and OUT16
// as in attention_ws.cu; HEAD_DIM is 128 (smaller head dims are padded by
// quant.cu).

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
#ifndef PV8
#define PV8 0
#endif
#define BLOCK_Q 128
#define NTHREADS 384
#define CONSUMER_THREADS 256
#define ROWB 128                // bytes per Q/K row
#if PV8
#define VCHUNK (HEAD_DIM * 64) // bytes per 64-key chunk of V
#else
#define VCHUNK (HEAD_DIM * 128)
#endif
#define PRODUCER_REGS 32
#define CONSUMER_REGS 232
static_assert(HEAD_DIM == 128, "the quantized kernel takes head dims padded to 128");
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * CONSUMER_THREADS <= 168 * NTHREADS, "setmaxnreg split exceeds the CTA's registers");

// Q8Params mirrors cuda.q8Params: the common parameters (q, k and v
// unused), then quant.cu's outputs and the padded token counts.
struct Q8Params {
	Params p;
	const signed char* q8;
	const signed char* k8;
	const unsigned char* v8;
	const float* qs;   // [B, Hq, nq_pad/16]
	const float* ks;   // [B, Hkv, nk_pad/64]
	const float* vmax; // [B, Hkv, 128]: δ_V = vmax/448
	int nq_pad, nk_pad;
};

extern "C" __global__ void __launch_bounds__(NTHREADS, 1) attn_q8(const __grid_constant__ Q8Params w) {
	const Params& p = w.p;
	extern __shared__ __attribute__((aligned(128))) unsigned char smem[];
	__shared__ __attribute__((aligned(8))) u64 bars[2 + 4 * STAGES];
	__shared__ int s_row[4];
	// Per K slot: first key, KV list entry, last-tile flag, δ_K of its
	// first and second 64 keys (float bits).
	__shared__ int s_tile[STAGES][5];
	const u32 pad = ((smem_addr(smem) + 1023) & ~1023u) - smem_addr(smem);
	const u32 sQ = smem_addr(smem) + pad;
	const u32 sK = sQ + BLOCK_Q * ROWB;
	const u32 sV = sK + STAGES * KT * ROWB;
	const u32 bar0 = smem_addr(bars);
	const u32 bar_q = bar0, bar_q_empty = bar0 + 8;
#define FULL_K(s) (bar0 + 8 * (2 + (s)))
#define EMPTY_K(s) (bar0 + 8 * (2 + STAGES + (s)))
#define FULL_V(s) (bar0 + 8 * (2 + 2 * STAGES + (s)))
#define EMPTY_V(s) (bar0 + 8 * (2 + 3 * STAGES + (s)))

	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int off = p.Nk - p.Nq;
	const int sub = p.block_k / KT;
	const int items = p.B * p.Hq * p.q_blocks;

	int b = 0, h = 0, kvh = 0, q0 = 0, qlast = 0, e0 = 0, ntiles = 0;
	auto set_item = [&](int it) {
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
		asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS) : "memory");
		if (warp == 0 && lane == 0) {
			const int kchunks = w.nk_pad / 64;
			int j = 0, li = 0;
			for (int it = blockIdx.x;; li++) {
				int t = 0;
				if (it < items) {
					set_item(it);
					t = next_tile(0);
				}
				mbar_wait(bar_q_empty, (li & 1) ^ 1);
				if (it >= items) {
					s_row[3] = -1;
					mbar_arrive(bar_q);
					break;
				}
				s_row[0] = b, s_row[1] = h, s_row[2] = q0, s_row[3] = t < ntiles;
				mbar_expect(bar_q, BLOCK_Q * ROWB);
				bulk_load(sQ, w.q8 + ((long long)(b * p.Hq + h) * w.nq_pad + q0) * ROWB, BLOCK_Q * ROWB, bar_q);
				const long long kvbase = (long long)(b * p.Hkv + kvh) * kchunks; // in 64-key chunks
				while (t < ntiles) {
					const int s = j % STAGES;
					const u32 ph = ((j / STAGES) & 1) ^ 1;
					const int k0 = tile_start(t), tn = next_tile(t + 1);
					const long long ch = kvbase + k0 / 64;
					const float ks0 = w.ks[ch], ks1 = KT == 128 ? w.ks[ch + 1] : 0.f;
					mbar_wait(EMPTY_K(s), ph);
					s_tile[s][0] = k0, s_tile[s][1] = e0 + t / sub, s_tile[s][2] = tn >= ntiles;
					s_tile[s][3] = __float_as_int(ks0), s_tile[s][4] = __float_as_int(ks1);
					mbar_expect(FULL_K(s), KT * ROWB);
					bulk_load(sK + s * (KT * ROWB), w.k8 + ch * (64 * ROWB), KT * ROWB, FULL_K(s));
					mbar_wait(EMPTY_V(s), ph);
					mbar_expect(FULL_V(s), KT / 64 * VCHUNK);
					bulk_load(sV + s * (KT / 64 * VCHUNK), w.v8 + ch * VCHUNK, KT / 64 * VCHUNK, FULL_V(s));
					t = tn, j++;
				}
#if DYNAMIC
				it = gridDim.x + (int)atomicAdd(p.counters + 4, 1ull);
#else
				it += gridDim.x;
#endif
			}
		}
		return;
	}

	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS) : "memory");
	const int cw = warp - 4;
	const int wg = cw >> 2;
	const int wrow0 = cw * 16;

	float m[2], l[2];
	float acc[HEAD_DIM / 8][4];
	u32 n_qk = 0, n_pv = 0;
	int last_entry = -1;
	float qscale = 0.f; // δ_Q·scale·log2(e) of this warp's 16 rows

#if PV8
	u32 pprev[KT / 32][4] = {};
#else
	u32 pprev[KT / 16][4] = {};
#endif
	int si[KT / 8][4];
	float s[KT / 8][4];
	auto issue_s = [&](int slot) {
#pragma unroll
		for (int kk = 0; kk < HEAD_DIM / 32; kk++) {
			u64 da = wg_desc(sQ + wg * (64 * ROWB) + kk * 32, 16, 1024);
			u64 db = wg_desc(sK + slot * (KT * ROWB) + kk * 32, 16, 1024);
#if KT == 64
			if (kk == 0)
				wgmma_s8_n64_first(si, da, db);
			else
				wgmma_s8_n64(si, da, db, 1);
#else
			if (kk == 0)
				wgmma_s8_n128_first(si, da, db);
			else
				wgmma_s8_n128(si, da, db, 1);
#endif
		}
		wg_commit();
	};
	auto issue_pv = [&](int slot) {
#if PV8
#pragma unroll
		for (int kk = 0; kk < KT / 32; kk++) {
			// Keys [32kk, +32): chunk kk/2, byte 32·(kk%2) of its rows.
			u64 db = desc64(sV + slot * (KT / 64 * VCHUNK) + (kk >> 1) * VCHUNK + (kk & 1) * 32);
			wgmma_e4m3_n128(acc, pprev[kk], db);
		}
#else
#pragma unroll
		for (int kk = 0; kk < KT / 16; kk++) {
			// Keys [16kk, +16): chunk kk/4, rows 16·(kk%4); its two column
			// blocks 64 rows (8192 bytes) apart.
			u64 db = wg_desc(sV + slot * (KT / 64 * VCHUNK) + (kk >> 2) * VCHUNK + (kk & 3) * (16 * 128), 64 * 128, 1024);
			wgmma_rs_n128(acc, pprev[kk], db);
		}
#endif
		wg_commit();
	};
	auto release = [&](u32 bar) { mbar_arrive(bar); };
	// softmax turns the INT8 scores of tile slot into logits in log2 units
	// (SageAttention: δ_Q·δ_K·q_int·k_int), masks them, and folds them into
	// m and ℓ, leaving the exponentials in s.
	auto softmax = [&](int k0, int entry, float ks0, float ks1, float (&alphas)[2]) -> bool {
		// |S| ≤ 127²·128 < 2^22, so S + 1.5·2^23 is a float whose bits are
		// those of the integer plus 0x4B400000: one integer add and one
		// FMA a logit instead of the quarter-rate I2F conversion.
		const float c0 = qscale * ks0, c1 = qscale * ks1;
		const float o0 = -12582912.f * c0, o1 = -12582912.f * c1;
#pragma unroll
		for (int jj = 0; jj < KT / 8; jj++)
#pragma unroll
			for (int e = 0; e < 4; e++) s[jj][e] = fma_(__int_as_float(si[jj][e] + 0x4B400000), jj < 8 ? c0 : c1, jj < 8 ? o0 : o1);
		const bool need_mask = (k0 + KT > p.Nk) || (p.causal && k0 + KT - 1 > q0 + wg * 64 + off);
		if (need_mask) mask_tile(s, k0, q0 + wrow0, lane, p.Nk, p.causal, off);
		const bool rescale = online_softmax(s, m, l, alphas, 1.f);
		if (entry != last_entry) {
			n_qk++;
			n_pv++;
			last_entry = entry;
		}
		return rescale;
	};
#if PV8
	auto pack_p = [&]() { pack_p8(s, pprev); };
#else
	auto pack_p = [&]() { pack_tile(s, pprev); };
#endif
	auto rescale_o = [&](bool rescale, const float (&alphas)[2]) {
		if (any_sync(rescale)) {
#pragma unroll
			for (int jj = 0; jj < HEAD_DIM / 8; jj++) {
				acc[jj][0] *= alphas[0], acc[jj][1] *= alphas[0];
				acc[jj][2] *= alphas[1], acc[jj][3] *= alphas[1];
			}
		}
	};
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
	int jb = 0;
	for (int li = 0;; li++) {
		m[0] = m[1] = NEG_INF, l[0] = l[1] = 0.f;
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
		mbar_wait(bar_q, li & 1);
		if (s_row[3] < 0) break;
		b = s_row[0], h = s_row[1], q0 = s_row[2];
		kvh = h / (p.Hq / p.Hkv);
		qscale = w.qs[(long long)(b * p.Hq + h) * (w.nq_pad / 16) + (q0 + wrow0) / 16] * p.scale_log2;
		if (s_row[3]) {
			int slot = jb % STAGES;
			mbar_wait(FULL_K(slot), (jb / STAGES) & 1);
			int k0 = s_tile[slot][0], entry = s_tile[slot][1];
			bool last = s_tile[slot][2];
			float ks0 = __int_as_float(s_tile[slot][3]), ks1 = __int_as_float(s_tile[slot][4]);
			my_turn();
			wg_fence();
			issue_s(slot);
			hand_over();
			wg_wait0();
			reg_fence(si);
			release(EMPTY_K(slot));
			{
				float alphas[2];
				softmax(k0, entry, ks0, ks1, alphas);
				pack_p();
			}
			int j = jb + 1;
			for (; !last; j++) {
				slot = j % STAGES;
				const int prev = (j - 1) % STAGES;
				mbar_wait(FULL_K(slot), (j / STAGES) & 1);
				k0 = s_tile[slot][0], entry = s_tile[slot][1], last = s_tile[slot][2];
				ks0 = __int_as_float(s_tile[slot][3]), ks1 = __int_as_float(s_tile[slot][4]);
				mbar_wait(FULL_V(prev), ((j - 1) / STAGES) & 1);
				reg_fence(acc);
				reg_fence(pprev);
				my_turn();
				wg_fence();
				issue_s(slot);
				issue_pv(prev);
				hand_over();
				wg_wait1();
				reg_fence(si);
				release(EMPTY_K(slot));
				float alphas[2];
				bool resc = softmax(k0, entry, ks0, ks1, alphas);
				wg_wait0();
				reg_fence(acc);
				reg_fence(pprev);
				release(EMPTY_V(prev));
				rescale_o(resc, alphas);
				pack_p();
			}
			release(bar_q_empty);
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
#if PV8
		// O·δ_V/P_SCALE per channel; store_rows divides by ℓ.
		const float* vm = w.vmax + (long long)(b * p.Hkv + kvh) * HEAD_DIM;
#pragma unroll
		for (int jj = 0; jj < HEAD_DIM / 8; jj++) {
			const int col = jj * 8 + 2 * (lane & 3);
			const float v0 = __ldg(vm + col) * (1.f / (448.f * P_SCALE)), v1 = __ldg(vm + col + 1) * (1.f / (448.f * P_SCALE));
			acc[jj][0] *= v0, acc[jj][1] *= v1, acc[jj][2] *= v0, acc[jj][3] *= v1;
		}
#endif
		store_rows(p, acc, l, b, h, q0 + wrow0, lane);
	}
#if PINGPONG
	if (wg == 0) my_turn();
#endif
	if (cw == 0 && lane == 0) {
		atomic_add_u64(&p.counters[0], (u64)n_qk);
		atomic_add_u64(&p.counters[1], (u64)n_pv);
	}
}
