// psa_score, the PSA planner's block importance on the tensor cores
// (psa.cuh describes the steps around it).

#include "psa.cuh"

// psa_score's compile-time shape (cuda.psaScoreDefines): the estimator
// (0 Sampling, 1 Antidiagonal), whether operands come as bf16 high and low
// halves, the columns of a unit, min(CP, PSA_TC), the stages of its key
// pipeline, and whether the rows come straight from q and k (PSA_DIRECT:
// Sampling on bf16 rows of W = Wp elements, 16-byte aligned; psa_gather
// then does not run) or from psa_gather's s.qh, s.kh (s.ql, s.kl), and
// whether the products run on Hopper's warpgroup MMA (PSA_WG: Sampling on
// bf16 rows, staged in the 128-byte-swizzled layout wgmma reads). The
// other PSA kernels (plan_psa.cu) read the same values from PsaArgs at run
// time.
#ifndef PSA_EST
#define PSA_EST 0
#endif
#ifndef PSA_SPLIT
#define PSA_SPLIT 0
#endif
#ifndef PSA_CPU
#define PSA_CPU 16
#endif
#ifndef PSA_NS
#define PSA_NS 3
#endif
#ifndef PSA_DIRECT
#define PSA_DIRECT 0
#endif
#ifndef PSA_WG
#define PSA_WG 0
#endif
#if PSA_DIRECT && (PSA_EST != 0 || PSA_SPLIT)
#error "PSA_DIRECT reads Sampling's bf16 rows only"
#endif
#if PSA_WG && (PSA_EST != 0 || PSA_SPLIT)
#error "PSA_WG multiplies Sampling's bf16 rows only"
#endif
#if PSA_WG
#define WG_T "bf16"
#include "wgmma.cuh"
#endif
// Slots of the key-token table skt: a pair's tokens are read from the
// epilogue's slot pr % PSA_KS; direct loads read them too, so they are
// staged PSA_NS − 1 pairs ahead, and a slot is rewritten only after its
// pair's epilogue: 2·PSA_NS − 1 slots.
#define PSA_KS (PSA_DIRECT ? 2 * PSA_NS - 1 : PSA_NS)


__device__ __forceinline__ void psa_mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
	// Not volatile: a register-only operation the compiler may schedule.
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ u32 smem_u32(const void* p) {
	u32 r;
	asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
	return r;
}
__device__ __forceinline__ void psa_cp16(u32 dst, const void* src) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
// psa_cp16z is psa_cp16 of n bytes (16 or 0), the rest of the 16 zero:
// a padding row stages as the zeros psa_gather writes for it.
__device__ __forceinline__ void psa_cp16z(u32 dst, const void* src, u32 n) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
// psa_cp16_run issues PSA_NJ psa_cp16 at once, row j of src[j] into
// dst + j·step bytes (step: a key pipeline's rows apart, PSA_T /
// (PSA_KC / 8)), in one asm statement: ptxas (NVRTC 11.8, sm_90) puts
// three dummy shared loads (LDS RZ, [RZ]) before every run of cp.async,
// and a run of one per copy, interleaved with its address arithmetic,
// cost 24 of them a stage.
//
// PSA_LT threads stage a stage's keys: all of them, or with PSA_WG each
// warpgroup its own tile, so that the two warpgroups meet only at a work
// item's start and end.
#if PSA_WG
#define PSA_LT (PSA_T / 2)
#define PSA_NJ (PSA_TC * (PSA_KC / 8) / PSA_LT)
#define PSA_STEP ((PSA_LT / (PSA_KC / 8)) * 128) // rows of 128 bytes, in column blocks of 64 dims
#else
#define PSA_LT PSA_T
#define PSA_NJ (2 * PSA_TC * (PSA_KC / 8) / PSA_LT)
#define PSA_STEP ((PSA_LT / (PSA_KC / 8)) * PSA_KP * 2)
#endif
__device__ __forceinline__ void psa_cp16_run(u32 dst, const void* const (&src)[PSA_NJ]) {
#if PSA_NJ == 8
	asm volatile(
	    "cp.async.cg.shared.global [%0], [%1], 16;\n"
	    "cp.async.cg.shared.global [%0+%9], [%2], 16;\n"
	    "cp.async.cg.shared.global [%0+%10], [%3], 16;\n"
	    "cp.async.cg.shared.global [%0+%11], [%4], 16;\n"
	    "cp.async.cg.shared.global [%0+%12], [%5], 16;\n"
	    "cp.async.cg.shared.global [%0+%13], [%6], 16;\n"
	    "cp.async.cg.shared.global [%0+%14], [%7], 16;\n"
	    "cp.async.cg.shared.global [%0+%15], [%8], 16;\n" ::"r"(dst),
	    "l"(src[0]), "l"(src[1]), "l"(src[2]), "l"(src[3]), "l"(src[4]), "l"(src[5]), "l"(src[6]), "l"(src[7]),
	    "n"(PSA_STEP), "n"(2 * PSA_STEP), "n"(3 * PSA_STEP), "n"(4 * PSA_STEP), "n"(5 * PSA_STEP), "n"(6 * PSA_STEP), "n"(7 * PSA_STEP));
#elif PSA_NJ == 4
	asm volatile(
	    "cp.async.cg.shared.global [%0], [%1], 16;\n"
	    "cp.async.cg.shared.global [%0+%5], [%2], 16;\n"
	    "cp.async.cg.shared.global [%0+%6], [%3], 16;\n"
	    "cp.async.cg.shared.global [%0+%7], [%4], 16;\n" ::"r"(dst),
	    "l"(src[0]), "l"(src[1]), "l"(src[2]), "l"(src[3]), "n"(PSA_STEP), "n"(2 * PSA_STEP), "n"(3 * PSA_STEP));
#else
#error "PSA_KC is 64 or 128"
#endif
}
__device__ __forceinline__ void psa_cp4(u32 dst, const void* src) {
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
// psa_wg_bar is a barrier of warpgroup wg's 128 threads alone (named
// barrier 1 + wg; __syncthreads is barrier 0).
__device__ __forceinline__ void psa_wg_bar(int wg) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory"); }
__device__ __forceinline__ void psa_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// psa_wait waits for all but the PSA_NS − 2 latest groups: the chunk
// about to be computed has landed.
__device__ __forceinline__ void psa_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PSA_NS - 2)); }
__device__ __forceinline__ void psa_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }
__device__ __forceinline__ void psa_ldsm4(u32 (&r)[4], u32 addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

#include "psa_tile.cuh"

#if PSA_WG
// psa_desc_lo is the low word of wg_desc(addr, 16, 1024), psa_desc the
// descriptor of low word lo.
__device__ __forceinline__ u32 psa_desc_lo(u32 addr) { return ((addr & 0x3FFFF) >> 4) | (1u << 16); }
__device__ __forceinline__ u64 psa_desc(u32 lo) {
	u64 d;
	asm("mov.b64 %0, {%1, %2};" : "=l"(d) : "r"(lo), "r"((1024u >> 4) | (1u << 30)));
	return d;
}
#endif

// psa_sw is the byte offset of 16-byte chunk c (of 8 elements) of row r in
// a PSA_WG operand of rows rows: column block c / 8 of rows × 128 bytes,
// the chunk at c % 8 ^ r % 8 of its row (wgmma's 128-byte swizzle).
__device__ __forceinline__ u32 psa_sw(int r, int c, int rows) { return (u32)((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4)); }

// psa_score computes the block importance of plan rows. A work item is
// P query blocks of G query heads that share a KV head (their rows
// stacked, R = P·G·RQ ≤ PSA_R, heaviest block first), a CTA per item at a
// time, with its slot of s.work as scratch. Key tiles move through a
// PSA_NS-stage cp.async pipeline, a stage being PSA_KC dims of two
// 64-column tiles, with one barrier per stage. Warp w = 4·wc + wr owns
// rows wr·32 … wr·32 + 31 (two 16-row m-tiles, x) of the item and every
// column of tile 2·pair + wc: rows r0 and r0 + 8 of each m-tile's
// fragments, columns j·8 + 2t + e of n-tile j; so a tile's row maxima,
// sums and unit reductions stay within the warp (shuffles over t), in the
// order of a warp that owns the tile alone. Fragments come by ldmatrix.
// q and k are the inputs, read with PSA_DIRECT only: row r of the item is
// token sqt[r] of q (zeros for padding), key column c token ktok[c] of k
// (for padding, the head's token 0: its logits are masked), the bytes
// psa_gather would copy. With PSA_WG, warpgroup wc computes tile
// 2·pair + wc for the item's rows in two m64 halves (x), warp wr of it rows
// x·64 + wr·16 …: the same fragments by row and column, other rows; each
// warpgroup stages its own tile's keys and passes its own barrier (named
// barrier 1 + wc) at each stage, so that one's epilogue runs while the
// other's products do (BENCHMARKS.md, "Session 39").
extern "C" __global__ void __launch_bounds__(PSA_T, 2) psa_score(const PlanArgs a, const PsaArgs s, const View q, const View k) {
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ float smt[PSA_R], smx[2][PSA_R], sml[2][PSA_R]; // rows' maxima; running maxima and sums by column warp
	__shared__ float snm[PSA_R];                                 // psa_w's shift for the rows' maxima
	__shared__ double srl[PSA_R];                                // rows' sums
	__shared__ int sqt[PSA_R], snv[PSA_R / 16];
	__shared__ __align__(16) int skt[PSA_KS][2 * PSA_TC]; // the key tokens of a pair's tiles, by pair % PSA_KS
	// wc comes by a shuffle from lane 0, so that the compiler knows it
	// uniform over the warp.
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wr = warp & 3, wc = __shfl_sync(0xffffffffu, warp >> 2, 0), g = lane >> 2, t = lane & 3;
	// The thread's first staged key row, its dims, and the key token it
	// stages (tq < tqn): with PSA_WG, those of its warpgroup's tile.
	const int lr = (PSA_WG ? wc * PSA_TC : 0) + tid % PSA_LT / (PSA_KC / 8), lc = (tid % (PSA_KC / 8)) * 8;
	const int tq = PSA_WG ? wc * PSA_TC + tid % PSA_LT : tid;
	const bool tqn = PSA_WG ? tid % PSA_LT < PSA_TC : tid < 2 * PSA_TC;
	const int GR = s.G * s.RQ, R = s.P * GR; // rows of a query block, of a work item
	const int QP = s.Wp + 8;
#if PSA_WG
	// The query rows, R rounded up to the m64 halves, and each stage's two
	// tiles' keys in column blocks of 64 dims (psa_sw), 1024-byte aligned.
	const int QR = (R + 63) & ~63;
	const u32 ldst = psa_sw(lr, lc >> 3, 2 * PSA_TC);
	u16* qsh = (u16*)(smem + (((smem_u32(smem) + 1023u) & ~1023u) - smem_u32(smem)));
	u16* ksh = qsh + QR * s.Wp;
	constexpr u32 STB = 2 * PSA_TC * PSA_KC * 2;
#else
	const u32 ldst = (u32)(lr * PSA_KP + lc) * 2;
	u16* qsh = (u16*)smem;                         // [R][QP], then the lo halves likewise when split
	u16* ksh = qsh + (PSA_SPLIT ? 2 : 1) * R * QP; // [PSA_NS][hi, lo when split][2·PSA_TC][PSA_KP]
	constexpr u32 STB = 2 * PSA_TC * PSA_KP * 2; // bytes of a stage's hi (or lo) halves
#endif
	const u32 kbase = smem_u32(ksh), qbase = smem_u32(qsh);
	const int KB = a.stride, QB = a.q_blocks, kcols = KB * s.CP;
	float* E = s.work + (long long)blockIdx.x * R * (s.UN + s.NT);
	float* MT = E + (long long)R * s.UN; // (Antidiagonal)
	const int hpi = a.Hq / a.Hkv, ng = hpi / s.G, sets = a.B * a.Hkv * ng;
	const int items = sets * ((QB + s.P - 1) / s.P);
	const int nchunk = s.Wp / PSA_KC;
	// Work items come heaviest first; rounds alternate direction over the
	// CTAs, so that a CTA with a heavy item in one round gets a light one
	// in the next.
	for (int round = 0; round * (int)gridDim.x < items; round++) {
		const int w = round * gridDim.x + ((round & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
		if (w >= items) continue;
		const int qb0 = QB - 1 - (w / sets) * s.P, set = w % sets; // block p of the item is qb0 − p
		const int b = set / (a.Hkv * ng), kh = (set / ng) % a.Hkv, hg = set % ng;
		const int h0 = kh * hpi + hg * s.G; // the item's first query head
		const long long k0 = (long long)(b * a.Hkv + kh) * kcols; // the head's first key column
		const int nvmax = visible_blocks(a, qb0); // the heaviest block's
		const int npair = (nvmax * s.CP + 2 * PSA_TC - 1) / (2 * PSA_TC), total = npair * nchunk;
		__syncthreads(); // the previous item is done with the shared tables
		if (tid < R) {
			const int qb = qb0 - tid / GR;
			sqt[tid] = qb < 0 ? -1 : s.qtok[((long long)(b * a.Hq + h0 + (tid / s.RQ) % s.G) * QB + qb) * s.RQ + tid % s.RQ];
		}
		if (tid < s.P) snv[tid] = qb0 - tid < 0 ? 0 : visible_blocks(a, qb0 - tid);
		const int* kth = s.ktok + k0;
		// Stage the query rows that exist, 16 bytes at a time.
		const int ppr = s.Wp / 8;
#if PSA_DIRECT
		// From q at the tokens sqt: those and the key tokens of the first
		// PSA_NS − 1 pairs (load() stages the later ones) are in first;
		// columns past the head's last take its last token, as in load().
		for (int i = tid; i < (PSA_NS - 1) * 2 * PSA_TC; i += PSA_T) skt[i / (2 * PSA_TC)][i % (2 * PSA_TC)] = kth[min(i, kcols - 1)];
		__syncthreads();
		const u16* qhd = (const u16*)q.ptr + b * q.sb + h0 * q.sh;
		for (int p = tid; p < R * ppr; p += PSA_T) {
			const int r = p / ppr, c = (p % ppr) * 8, qb = qb0 - r / GR;
			if (qb < 0) continue;
			const int tok = sqt[r];
#if PSA_WG
			const u32 qo = psa_sw(r, c >> 3, QR);
#else
			const u32 qo = (u32)(r * QP + c) * 2;
#endif
			psa_cp16z(qbase + qo, qhd + (r / s.RQ) % s.G * q.sh + (long long)max(tok, 0) * q.sn + c, tok < 0 ? 0 : 16);
		}
#else
		for (int p = tid; p < R * ppr; p += PSA_T) {
			const int r = p / ppr, c = (p % ppr) * 8, qb = qb0 - r / GR;
			if (qb < 0) continue;
			const long long src = (((long long)(b * a.Hq + h0 + (r / s.RQ) % s.G) * QB + qb) * s.RQ + r % s.RQ) * s.Wp + c;
#if PSA_WG
			psa_cp16(qbase + psa_sw(r, c >> 3, QR), s.qh + src);
#else
			psa_cp16(qbase + (u32)(r * QP + c) * 2, s.qh + src);
			if (PSA_SPLIT) psa_cp16(qbase + (u32)((R + r) * QP + c) * 2, s.ql + src);
#endif
		}
#endif
		// The chunks in order: dims lkc … lkc + PSA_KC − 1 of tiles 2·lpr and
		// 2·lpr + 1, into stage lst; columns past the head's last read its
		// last (they are masked). A thread copies rows lr + j·LS (LS =
		// PSA_LT / (PSA_KC / 8) rows apart), dims lc … lc + 7 of each. The
		// first chunk of pair lpr stages the key tokens of its pair into
		// slot lks (gathered), or those of pair lpr + PSA_NS − 1 (direct:
		// its chunks land before that pair's loads, which read its tokens
		// from the slot, and after the epilogue of the pair the slot held).
		constexpr int LS = PSA_LT / (PSA_KC / 8);
#if PSA_DIRECT
		const char* kcp = (const char*)((const u16*)k.ptr + b * k.sb + kh * k.sh + lc); // the head's token 0 at the thread's dims of chunk lkc
		const int ksn = 2 * (int)k.sn; // bytes a token (cuda.psaDirect: within int)
		const int* ktl = &skt[0][lr];
#else
		const u16* khh = s.kh + k0 * s.Wp;
		const u16* klh = PSA_SPLIT ? s.kl + k0 * s.Wp : nullptr;
#endif
		int lpr = 0, lkc = 0, lst = 0, lks = 0, loaded = 0;
		auto load = [&]() {
			const u32 st = kbase + (u32)lst * STB * (PSA_SPLIT ? 2 : 1) + ldst;
#if PSA_DIRECT
			const int* tk = ktl + lks * 2 * PSA_TC;
			const void* src[PSA_NJ];
#pragma unroll
			for (int j = 0; j < PSA_NJ; j++) src[j] = kcp + (unsigned long long)(unsigned)max(tk[j * LS], 0) * (unsigned)ksn;
			kcp += lkc + PSA_KC == s.Wp ? 2 * (PSA_KC - s.Wp) : 2 * PSA_KC; // (kept apart from lkc: one multiply-add an address)
			psa_cp16_run(st, src);
			const int ap = lpr + PSA_NS - 1, ak = lks + PSA_NS - 1 - (lks + PSA_NS - 1 >= PSA_KS ? PSA_KS : 0);
			if (lkc == 0 && tqn && ap < npair) psa_cp4(smem_u32(&skt[ak][tq]), kth + min(ap * 2 * PSA_TC + tq, kcols - 1));
#else
			const int row0 = lpr * 2 * PSA_TC + lr;
			int off[PSA_NJ];
			const void* src[PSA_NJ];
#pragma unroll
			for (int j = 0; j < PSA_NJ; j++) off[j] = min(row0 + j * LS, kcols - 1) * s.Wp + lkc + lc, src[j] = khh + off[j];
			psa_cp16_run(st, src);
			if (PSA_SPLIT) {
#pragma unroll
				for (int j = 0; j < PSA_NJ; j++) src[j] = klh + off[j];
				psa_cp16_run(st + STB, src);
			}
			if (lkc == 0 && tqn) psa_cp4(smem_u32(&skt[lks][tq]), kth + min(lpr * 2 * PSA_TC + tq, kcols - 1));
#endif
			lkc += PSA_KC;
			if (lkc == s.Wp) lkc = 0, lpr++, lks = lks == PSA_KS - 1 ? 0 : lks + 1;
			lst = lst == PSA_NS - 1 ? 0 : lst + 1;
			loaded++;
		};
#pragma unroll
		for (int j = 0; j < PSA_NS - 1; j++) {
			if (loaded < total) load();
			psa_commit();
		}
		__syncthreads(); // sqt is in
		// Each m-tile's block: its columns, tiles and query bound, and
		// (Sampling) its leading tiles in which no logit is masked: no row
		// padding, no key padding (SampleK = CP, and not the ragged last
		// block), every key before the block's first query.
		int nc[2], nt[2], qhi[2], ni[2];
#pragma unroll
		for (int x = 0; x < 2; x++) {
#if PSA_WG
			const int r = x * 64 + wr * 16, p = r / GR, qb = qb0 - p;
#else
			const int r = wr * 32 + x * 16, p = r / GR, qb = qb0 - p;
#endif
			const int nv = r >= R || qb < 0 ? 0 : visible_blocks(a, qb);
			nc[x] = nv * s.CP;
			nt[x] = (nc[x] + PSA_TC - 1) / PSA_TC;
			qhi[x] = min((qb + 1) * a.bq, a.Nq);
			const bool rows = __all_sync(0xffffffffu, nv > 0 && sqt[r + g] >= 0 && sqt[r + g + 8] >= 0);
			ni[x] = 0;
			if (PSA_EST == 0 && rows && s.sk == s.CP) {
				ni[x] = min(nc[x] / PSA_TC, (KB - 1) * s.CP / PSA_TC);
				if (a.causal) ni[x] = min(ni[x], (qb * a.bq + a.Nk - a.Nq + 1) / a.bk * s.CP / PSA_TC);
			}
#pragma unroll
			for (int hf = 0; hf < 2; hf++)
				if (t == 0 && r + g + 8 * hf < R) smx[wc][r + g + 8 * hf] = PSA_NEG_INF, sml[wc][r + g + 8 * hf] = 0.0f; // the rows' running maxima and sums
		}
		// A pair of tiles at a time, its chunks in order: the accumulators
		// live for one pair, zero at its start. Every thread passes every
		// chunk's barrier; a warp whose tile is past its rows' columns
		// (m-tile 1's block is never heavier than m-tile 0's) only loads
		// (mma.sync; a warpgroup multiplies every tile, see below).
		// m-tile 1's products run whenever m-tile 0's do, so that the
		// tensor-core loop holds no branch: a row past R reads row
		// lane & 15 instead, and a tile past m-tile 1's columns is
		// discarded unfinished.
		int cst = 0; // the stage of the chunk computed
		const int xrow = wr * 32 + 16 + (lane & 15);
		const u32 qa0 = qbase + (u32)((wr * 32 + (lane & 15)) * QP + (lane >> 4) * 8) * 2;
		const u32 qa1 = qbase + (u32)((xrow < R ? xrow : (lane & 15)) * QP + (lane >> 4) * 8) * 2;
		const u32 kb0 = (u32)((wc * PSA_TC + (lane & 7) + ((lane >> 4) << 3)) * PSA_KP + ((lane >> 3) & 1) * 8) * 2;
		for (int pr = 0; pr < npair; pr++) {
			const int tile = 2 * pr + wc;
			const bool on0 = tile < nt[0], on1 = tile < nt[1];
			float acc[2][8][4];
#pragma unroll
			for (int x = 0; x < 2; x++)
#pragma unroll
				for (int j = 0; j < 8; j++) acc[x][j][0] = acc[x][j][1] = acc[x][j][2] = acc[x][j][3] = 0.0f;
			for (int kcc = 0; kcc < s.Wp; kcc += PSA_KC) {
				psa_wait();
#if PSA_WG
				// This chunk of the warpgroup's tile is in, and its warps are
				// done with the last one's stage; the first chunk also waits
				// for the query rows, which every thread stages.
				fence_proxy_async(); // the chunk's copies (and the query rows), to the wgmma's reads
				if (pr == 0 && kcc == 0) __syncthreads();
				else psa_wg_bar(wc);
#else
				__syncthreads(); // this chunk is in; every warp is done with the last one's stage
#endif
				if (loaded < total) load();
				psa_commit();
#if PSA_WG
				const u32 st = kbase + (u32)cst * STB;
				cst = cst == PSA_NS - 1 ? 0 : cst + 1;
				// Head dims kcc + kk: column block (kcc + kk) / 64 of the query
				// rows, kk / 64 of the stage's keys (rows wc·64 … of its 128).
				// Both m64 halves run for every tile, under no branch: a tile
				// past a half's columns (or a half past R, reading other
				// shared memory) is discarded unfinished. NVRTC 13.0's ptxas
				// waits after every wgmma under a branch on the tile, even a
				// warp-uniform one (C7520, "compiler-inserted WG.AR in
				// divergent path"), and psa_score then took 6% longer
				// (BENCHMARKS.md, "Session 39"). The pins keep the
				// accumulators' zeros ahead of the fence: ptxas also waits
				// when another instruction defines them past it (C7515).
				reg_fence(acc[0]);
				reg_fence(acc[1]);
				wg_fence();
				// Descriptors of shared addresses below 2^18 (16-byte units
				// in their low 14 bits): an offset adds to the low word alone
				// with no carry; the high word is the same for all.
				const u32 dq = psa_desc_lo(qbase + (u32)((kcc >> 6) * QR * 128)), dk = psa_desc_lo(st + (u32)(wc * (PSA_TC * 128)));
#pragma unroll
				for (int kk = 0; kk < PSA_KC; kk += 16) {
					const u32 ko = (u32)((kk >> 6) * (2 * PSA_TC * 128) + (kk & 63) * 2), qo = (u32)((kk >> 6) * QR * 128 + (kk & 63) * 2);
					wgmma_ss_n64(acc[0], psa_desc(dq + (qo >> 4)), psa_desc(dk + (ko >> 4)), 1);
					wgmma_ss_n64(acc[1], psa_desc(dq + ((qo + 64 * 128) >> 4)), psa_desc(dk + (ko >> 4)), 1);
				}
				wg_commit();
				wg_wait0();
				reg_fence(acc[0]);
				reg_fence(acc[1]);
#else
				const u32 st = kbase + (u32)cst * STB * (PSA_SPLIT ? 2 : 1) + kb0;
				cst = cst == PSA_NS - 1 ? 0 : cst + 1;
				if (!on0) continue;
#pragma unroll
				for (int kk = 0; kk < PSA_KC; kk += 16) {
					u32 af[2][4];
					psa_ldsm4(af[0], qa0 + (u32)(kcc + kk) * 2);
					psa_ldsm4(af[1], qa1 + (u32)(kcc + kk) * 2);
#if PSA_SPLIT
					u32 al[2][4];
					psa_ldsm4(al[0], qa0 + (u32)(R * QP + kcc + kk) * 2);
					psa_ldsm4(al[1], qa1 + (u32)(R * QP + kcc + kk) * 2);
#endif
#pragma unroll
					for (int np = 0; np < 4; np++) {
						const u32 bd = st + (u32)(np * 16 * PSA_KP + kk) * 2;
						u32 bf[4];
						psa_ldsm4(bf, bd);
#if PSA_SPLIT
						u32 bl[4];
						psa_ldsm4(bl, bd + STB);
#endif
#pragma unroll
						for (int x = 0; x < 2; x++)
#pragma unroll
							for (int h = 0; h < 2; h++) {
								psa_mma(acc[x][2 * np + h], af[x], bf[2 * h], bf[2 * h + 1]);
#if PSA_SPLIT
								psa_mma(acc[x][2 * np + h], af[x], bl[2 * h], bl[2 * h + 1]);
								psa_mma(acc[x][2 * np + h], al[x], bf[2 * h], bf[2 * h + 1]);
#endif
							}
					}
				}
#endif
			}
			if (!on0) continue;
			const int* kt_tile = skt[pr % PSA_KS] + wc * PSA_TC;
#if PSA_WG
			const int er0 = wr * 16 + g, er1 = 64 + wr * 16 + g;
#else
			const int er0 = wr * 32 + g, er1 = wr * 32 + 16 + g;
#endif
			psa_tile(a, s, acc[0], smx[wc], sml[wc], kt_tile, qsh, R * QP, E, MT, sqt, er0, tile, nc[0], qhi[0], k0, t, tile < ni[0]);
			if (on1) psa_tile(a, s, acc[1], smx[wc], sml[wc], kt_tile, qsh, R * QP, E, MT, sqt, er1, tile, nc[1], qhi[1], k0, t, tile < ni[1]);
		}
		psa_wait_all(); // no copy of this item lands after the next item's
		// Each row's maximum and sum: both column warps' running values
		// (psa_running), combined likewise. A row with no visible logit
		// keeps maximum −∞ and sum 0.
		__syncthreads();
		const float c = psa_c(s);
		if (tid < R) {
			const float m0 = smx[0][tid], m1 = smx[1][tid], m = fmaxf(m0, m1);
			float l = 0.0f;
			if (m != PSA_NEG_INF) {
				const float nm = -__fmul_rn(m, c);
				l = fmaf(sml[0][tid], psa_w(m0, c, nm), __fmul_rn(sml[1][tid], psa_w(m1, c, nm)));
			}
			smt[tid] = m;
			snm[tid] = m == PSA_NEG_INF ? 0.0f : -__fmul_rn(m, c);
			srl[tid] = (double)l;
		}
		__syncthreads();
		// Block importance per head and block of the item: the largest
		// weight (Sampling) or the summed weight (Antidiagonal) of the
		// block's columns over the head's rows, one (head, block) a thread,
		// consecutive threads on consecutive blocks, so that E's rows are
		// read from memory in whole lines.
		const int upb = s.CP / PSA_CPU; // units per block
		for (int idx = tid; idx < s.P * s.G * nvmax; idx += PSA_T) {
			const int p = idx / (s.G * nvmax), hl = (idx / nvmax) % s.G, kb = idx % nvmax;
			if (kb >= snv[p]) continue;
			const int r0 = p * GR + hl * s.RQ;
			double v = 0.0;
#if PSA_EST == 0
			// The largest weight e/l, as the largest of the rounded
			// quotients: rounding is monotone, so it is the rounded
			// largest quotient. e and l are floats, so e_a·l_b against
			// e_b·l_a compares the quotients exactly in float64, and one
			// division remains. Four maxima (rows r0 + 4i + j) are kept and
			// merged after: the largest of exact quotients does not depend
			// on the order. A row with no visible logit (l = 0) has e = 0
			// everywhere and is never taken.
			double be[4] = {0.0, 0.0, 0.0, 0.0}, bl[4] = {1.0, 1.0, 1.0, 1.0};
			for (int u = kb * upb; u < (kb + 1) * upb; u++)
				for (int r = r0; r < r0 + s.RQ; r += 16) { // RQ is a multiple of 16: sixteen loads in flight
					float x[16];
#pragma unroll
					for (int j = 0; j < 16; j++) x[j] = E[(r + j) * s.UN + u];
#pragma unroll
					for (int j = 0; j < 16; j++) {
						const double e = (double)psa_w(x[j], c, snm[r + j]), l = srl[r + j];
						if (__dmul_rn(e, bl[j & 3]) > __dmul_rn(be[j & 3], l)) be[j & 3] = e, bl[j & 3] = l;
					}
				}
#pragma unroll
			for (int j = 1; j < 4; j++)
				if (__dmul_rn(be[j], bl[0]) > __dmul_rn(be[0], bl[j])) be[0] = be[j], bl[0] = bl[j];
			v = __ddiv_rn(be[0], bl[0]);
#else
			for (int r = r0; r < r0 + s.RQ; r++) {
				const float m = smt[r];
				if (m == PSA_NEG_INF) continue;
				const float nm = -__fmul_rn(m, c);
				const double sum = srl[r];
				for (int u = kb * upb; u < (kb + 1) * upb; u++) {
					const float x = E[r * s.UN + u];
					if (x != 0.0f) v += (double)(x * psa_w(MT[(long long)r * s.NT + u * PSA_CPU / PSA_TC], c, nm)) / sum;
				}
			}
#endif
			s.imp[((long long)(b * a.Hq + h0 + hl) * QB + qb0 - p) * KB + kb] = v;
		}
	}
}
