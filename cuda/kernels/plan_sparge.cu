// SpargeAttn's block-mask predictor on the device (Zhang et al., 2025,
// §3.2; package method/sparge on the CPU, whose plans these kernels
// reproduce up to the θ judge's documented tie-break). Two kernels:
//
//   sparge_pool  (sparge_pool.cuh) one thread block per query block
//                (b, h, qb) and per key block (b, kvh, kb), the key side
//                once per KV head (GQA): the block's mean token and its
//                self-similarity CosSim, from its tokens staged in shared
//                memory. sparge_pool_vec, for aligned 16-bit inputs, does
//                the same with a persistent grid, the next block's tokens
//                loading while this one's are pooled.
//   sparge_rows  one block per SR plan rows of one KV head (query heads of
//                the group fastest, then query blocks): the compressed
//                logits scale·q̄·k̄ᵀ, the θ judge, the compressed softmax,
//                TopCdf(τ) or top-k by a bitonic sort (probability
//                descending, ties by block index), fix rows and columns,
//                diagonal and sink blocks; it writes each row's kept
//                blocks in ascending order.
//
// Exactness: the pooled means and everything after them are the CPU's
// bits: every float64 operation is the CPU's, in the CPU's order, with no
// FMA (add64/mul64): sums over tokens in increasing token order, sums over
// the head dimension in warp_sum's canonical order (sparge.dot64 on the
// CPU), exp64 = plan.Exp64, and the TopCdf masses in 2^-44 fixed point
// (sparge.mass), whose integer sums are exact in any order. CosSim alone
// is computed in float32 (unit tokens by rsqrtf): float64 there cost most
// of the planner's time at 8K. It lies within spargeSimTol
// (cuda/selftest/cases_sparge.go) of the CPU's, so a block whose CPU
// CosSim lies that close to θ may be judged the other way; the self-test
// accepts exactly those rows (spargeTieBreak).
//
// Rows of spargeSearchMin key blocks or more go to sparge_rows_search
// (sparge_search.cuh, included at the end) instead of sparge_rows: the
// same rows, the last kept block found by a sort in registers
// (select_sorted, rows of at most 128 blocks) or a radix select
// (select_last) rather than a sort in shared memory.
//
// Compile-time defines: SD, the head dimension (at most 128); SR, the plan
// rows of one sparge_rows block (1, 2 or 4) or sparge_rows_search block
// (1, 2, 4 or 8); ST, sparge_rows_search's threads (128 or 256).

#ifndef SD
#define SD 128
#endif
#ifndef SR
#define SR 4
#endif

#define NL ((SD + 31) / 32) // head-dimension elements per lane
#define NOIDX 0x7fffffff    // sort index of a non-candidate entry

// SpargeHead mirrors cuda.spargeHead: one query head's resolved
// hyperparameters.
struct SpargeHead {
	double theta; // the judge is on when θ > 0
	double cdf;   // τ; 0 selects top-k
	double topk;  // the top-k fraction
};

#ifndef ST
#define ST 256
#endif
#define SEARCH_THREADS ST // sparge_rows_search's block size, 128 or 256: cuda.spargeSearchThreads

#include "sparge_pool.cuh"

// mass is sparge.mass: ⌊p·2^44⌋.
__device__ __forceinline__ u64 mass(double p) { return __double2ull_rz(mul64(p, 0x1p44)); }

// sort_before: entry (ka, ia) comes before (kb, ib) in the sorted row:
// larger probability first (non-negative doubles order as their bits),
// ties by block index.
__device__ __forceinline__ bool sort_before(u64 ka, int ia, u64 kb, int ib) { return ka > kb || (ka == kb && ia < ib); }

// sparge_rows: see the file comment. Dynamic shared memory: key[SR][pmax]
// (u64: logits, then probabilities, as bits), idx[SR][pmax] (int) and
// keep[SR][kpad] (bytes), pmax = the next power of two ≥ KBlocks and kpad
// = KBlocks rounded up to 16.
extern "C" __global__ void __launch_bounds__(128)
    sparge_rows(PlanArgs a, const double* qm, const double* qsim, const double* kmt, const double* ksim, const SpargeHead* heads,
                int sink, int pmax) {
	extern __shared__ __align__(16) unsigned char dyn[];
	__shared__ __align__(16) double qs[SD][SR]; // the rows' scaled q̄, d-major
	__shared__ int s_row[SR], s_vis[SR], s_diag[SR], s_qj[SR], s_judge[SR], s_sort[SR], s_ncand[SR];
	__shared__ double s_theta[SR];
	__shared__ u64 s_total[SR];
	__shared__ int s_maxvis, s_anysort;
	int nkb = (a.Nk + a.bk - 1) / a.bk, kpad = (nkb + 15) & ~15;
	u64* key = (u64*)dyn;
	int* idx = (int*)(key + (long long)SR * pmax);
	unsigned char* keep = (unsigned char*)(idx + (long long)SR * pmax);
	int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	int G = a.Hq / a.Hkv, per = a.q_blocks * G, nblk = (per + SR - 1) / SR;
	int bkv = blockIdx.x / nblk;             // b·Hkv + kvh
	int blk = nblk - 1 - blockIdx.x % nblk; // late (long) causal rows first
	int b = bkv / a.Hkv, kvh = bkv % a.Hkv;

	// Phase A: the rows' geometry, judge and q̄.
	if (tid < SR) {
		int m = tid, i = blk * SR + m;
		int row = -1, vis = 0, diag = -1, qj = 0, judge = 0, sel = 0;
		double theta = 0;
		if (i < per) {
			int qb = i / G, h = kvh * G + i % G;
			row = (b * a.Hq + h) * a.q_blocks + qb;
			vis = visible_blocks(a, qb);
			if (a.causal && vis > 0) diag = max(0, qb * a.bq + (a.Nk - a.Nq)) / a.bk;
			theta = heads[h].theta;
			judge = theta > 0;
			qj = judge && qsim[row] < theta; // Eq. 5: a non-self-similar query row is computed in full
			double cdf = heads[h].cdf, topk = heads[h].topk;
			sel = !(cdf >= 1 || topk >= 1); // τ = 1 or top-k 1 keeps every candidate: no sort
		}
		s_sort[m] = sel, s_row[m] = row, s_vis[m] = vis, s_diag[m] = diag, s_qj[m] = qj, s_judge[m] = judge, s_theta[m] = theta;
	}
	for (int t = tid; t < SR * SD; t += blockDim.x) {
		int m = t / SD, d = t % SD, i = blk * SR + m;
		double v = 0;
		if (i < per) {
			int h = kvh * G + i % G;
			v = qm[((long long)(b * a.Hq + h) * a.q_blocks + i / G) * SD + d];
		}
		qs[d][m] = v;
	}
	__syncthreads();
	int maxvis = 0;
	bool logits = false; // some row needs the compressed logits
#pragma unroll
	for (int m = 0; m < SR; m++) {
		maxvis = max(maxvis, s_vis[m]);
		logits = logits || (s_vis[m] > 0 && !s_qj[m]);
	}
	int P = 1;
	while (P < maxvis) P <<= 1;

	// Phase B: logits of every (row, visible block), a warp per key block:
	// lane l sums the products of d ≡ l (mod 32) in increasing d, and
	// warp_sum combines the lanes, as sparge.dot64 does. They go to key[]
	// for the per-block pass below.
	const double* kcol = kmt + (long long)bkv * nkb * SD;
	const double* ks = ksim + (long long)bkv * nkb;
	if (logits) {
		double qr[SR][NL];
#pragma unroll
		for (int m = 0; m < SR; m++)
#pragma unroll
			for (int i = 0; i < NL; i++) qr[m][i] = lane + 32 * i < SD ? qs[lane + 32 * i][m] : 0;
#pragma unroll 2
		for (int j = warp; j < maxvis; j += 4) {
			const double* kr = kcol + (long long)j * SD;
			double kv[NL];
#pragma unroll
			for (int i = 0; i < NL; i++) kv[i] = lane + 32 * i < SD ? kr[lane + 32 * i] : 0;
			double p[SR];
#pragma unroll
			for (int m = 0; m < SR; m++) {
				p[m] = 0;
#pragma unroll
				for (int i = 0; i < NL; i++)
					if (lane + 32 * i < SD) p[m] = add64(p[m], mul64(qr[m][i], kv[i]));
				p[m] = warp_sum(p[m]);
			}
			if (lane == 0)
#pragma unroll
				for (int m = 0; m < SR; m++) key[m * pmax + j] = (u64)__double_as_longlong(p[m]);
		}
	}
	__syncthreads();
	for (int j = tid; j < P; j += blockDim.x) {
		double lg[SR];
#pragma unroll
		for (int m = 0; m < SR; m++) lg[m] = j < maxvis && logits ? __longlong_as_double((long long)key[m * pmax + j]) : 0;
		double ksj = j < maxvis ? ks[j] : 0;
#pragma unroll
		for (int m = 0; m < SR; m++) {
			bool vj = j < s_vis[m];
			bool fix = vj && s_judge[m] && ksj < s_theta[m]; // Eq. 5: a non-self-similar key column is always computed
			bool cand = vj && !s_qj[m] && !fix;
			key[m * pmax + j] = cand ? (u64)__double_as_longlong(lg[m]) : 0;
			idx[m * pmax + j] = cand ? j : NOIDX;
			if (j < maxvis) keep[m * kpad + j] = vj && (s_qj[m] || fix);
		}
	}
	__syncthreads();

	// Phase C, a warp per row: the compressed softmax e^(Ŝ − max Ŝ) and its
	// fixed-point total.
	if (warp < SR) {
		int m = warp, vis = s_vis[m];
		int ncand = 0;
		u64 total = 0;
		if (vis > 0 && !s_qj[m]) {
			double top = -__longlong_as_double(0x7ff0000000000000LL);
			for (int j = lane; j < vis; j += 32) {
				if (idx[m * pmax + j] != NOIDX) {
					top = fmax(top, __longlong_as_double((long long)key[m * pmax + j]));
					ncand++;
				}
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) {
				top = fmax(top, __shfl_xor_sync(0xffffffffu, top, o));
				ncand += __shfl_xor_sync(0xffffffffu, ncand, o);
			}
			for (int j = lane; j < vis; j += 32) {
				if (idx[m * pmax + j] != NOIDX) {
					double pr = exp64_canon(add64(__longlong_as_double((long long)key[m * pmax + j]), -top));
					key[m * pmax + j] = (u64)__double_as_longlong(pr);
					total += mass(pr);
				}
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
		}
		if (lane == 0) {
			s_ncand[m] = ncand, s_total[m] = total;
			s_sort[m] = s_sort[m] && ncand > 0 && s_row[m] >= 0;
		}
	}
	__syncthreads();
	if (tid == 0) {
		int any = 0;
#pragma unroll
		for (int m = 0; m < SR; m++) any |= s_sort[m];
		s_anysort = any;
	}
	__syncthreads();

	// Phase D: bitonic sort of the rows that select, P entries each.
	if (s_anysort) {
		int half = P >> 1, lh = __ffs(max(half, 1)) - 1; // P is a power of two
		for (int kk = 2; kk <= P; kk <<= 1) {
			for (int jj = kk >> 1; jj > 0; jj >>= 1) {
				for (int t = tid; t < SR * half; t += blockDim.x) {
					int m = t >> lh, u = t & (half - 1);
					if (!s_sort[m]) continue;
					int i = ((u & ~(jj - 1)) << 1) | (u & (jj - 1)), l = i + jj;
					u64* kr = key + m * pmax;
					int* ir = idx + m * pmax;
					u64 ka = kr[i], kb = kr[l];
					int ia = ir[i], ib = ir[l];
					bool up = (i & kk) == 0;
					if (up ? sort_before(kb, ib, ka, ia) : sort_before(ka, ia, kb, ib)) {
						kr[i] = kb, kr[l] = ka, ir[i] = ib, ir[l] = ia;
					}
				}
				__syncthreads();
			}
		}
	}

	// Phase E, a warp per row: how many top blocks to keep, then the fix,
	// diagonal and sink blocks, and the row's list in ascending order.
	if (warp < SR && s_row[warp] >= 0) {
		int m = warp, vis = s_vis[m], row = s_row[m], ncand = s_ncand[m];
		unsigned char* kp = keep + m * kpad;
		const u64* kr = key + m * pmax;
		const int* ir = idx + m * pmax;
		if (vis > 0 && !s_qj[m]) {
			if (ncand > 0) {
				int h = kvh * G + (blk * SR + m) % G;
				double cdf = heads[h].cdf, topk = heads[h].topk;
				if (!s_sort[m]) { // τ = 1 or top-k 1: every candidate, unsorted
					for (int j = lane; j < vis; j += 32)
						if (ir[j] != NOIDX) kp[j] = 1;
				} else {
					int n = ncand;
					if (cdf > 0) { // TopCdf(P̂[i], τ): the fewest top blocks whose mass reaches τ·total
						double thr = mul64(cdf, __ull2double_rn(s_total[m]));
						u64 carry = 0;
						for (int c0 = 0; c0 < ncand; c0 += 32) {
							int i = c0 + lane;
							u64 cum = i < ncand ? mass(__longlong_as_double((long long)kr[i])) : 0;
#pragma unroll
							for (int o = 1; o < 32; o <<= 1) {
								u64 y = __shfl_up_sync(0xffffffffu, cum, o);
								if (lane >= o) cum += y;
							}
							cum += carry;
							unsigned hit = __ballot_sync(0xffffffffu, i < ncand && __ull2double_rn(cum) >= thr);
							if (hit) {
								n = c0 + __ffs(hit);
								break;
							}
							carry = __shfl_sync(0xffffffffu, cum, 31);
						}
					} else { // top-k over the row's causally visible blocks
						n = min(ncand, (int)ceil(mul64(topk, (double)vis)));
					}
					n = max(n, 1);
					for (int i = lane; i < n; i += 32) kp[ir[i]] = 1;
				}
			}
			for (int j = s_diag[m] + lane; s_diag[m] >= 0 && j < vis; j += 32) kp[j] = 1;
			if (sink && lane == 0) kp[0] = 1;
		}
		__syncwarp();
		int* out = a.lists + (long long)row * a.stride;
		int n = 0;
		for (int c0 = 0; c0 < vis; c0 += 32) {
			int j = c0 + lane;
			bool f = j < vis && kp[j];
			unsigned bal = __ballot_sync(0xffffffffu, f);
			if (f) out[n + __popc(bal & ((1u << lane) - 1))] = j;
			n += __popc(bal);
		}
		if (lane == 0) a.row_len[row] = n;
	}
}

#include "sparge_search.cuh"
