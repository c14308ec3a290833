// psa_assign's sort (plan_psa.cu includes this before the kernel): the
// bitonic network of (importance, index) pairs, in registers for rows of
// PSA_AT to PSA_AT·PSA_SORT_E blocks.

// psa_precedes orders blocks heavier first, then lower index: the CPU's
// stable sort. Importances are ≥ 0, so their bits order as they do.
__device__ __forceinline__ bool psa_precedes(u64 ka, int ia, u64 kb, int ib) { return ka > kb || (ka == kb && ia < ib); }

// psa_ce_slots compare-exchanges a thread's slots J apart (J < E) in
// psa_sort_regs' bitonic step of block size kq: the lower position takes
// the pair that precedes when its block sorts up.
template <int E, int J>
__device__ __forceinline__ void psa_ce_slots(u64 (&k)[E], int (&x)[E], int i0, int kq) {
	if constexpr (J < E) {
#pragma unroll
		for (int e = 0; e < E; e++) {
			if (e & J) continue; // each pair once, from its lower slot
			const int f = e + J;
			const bool up = ((i0 + e) & kq) == 0;
			if (psa_precedes(k[f], x[f], k[e], x[e]) == up) {
				const u64 tk = k[e];
				const int ti = x[e];
				k[e] = k[f], x[e] = x[f];
				k[f] = tk, x[f] = ti;
			}
		}
	}
}

// psa_sort_regs sorts (key, index) pairs by psa_precedes with a bitonic
// network over N = PSA_AT·E positions held in registers (PSA_AT threads,
// two to eight warps: position i = 32E·w + E·lane + e of warp w, lane and
// slot e): distances below E compare slots of one thread, distances E …
// 16E lanes of a warp by shuffles, and distances 32E and up (the last
// merges' first steps) two warps' same lane and slot through shared
// memory xk/xi (N entries each), with the only barriers. The network is
// the one psa_assign's shared-memory sort runs, so the result is the same
// stable order. k and x hold the thread's positions in and out.
template <int E>
__device__ __forceinline__ void psa_sort_regs(u64 (&k)[E], int (&x)[E], u64* xk, int* xi) {
	const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
	constexpr int N = PSA_AT * E;
	const int i0 = 32 * E * w + E * lane; // the thread's first position
	for (int kq = 2; kq <= N; kq <<= 1) {
		for (int j = kq >> 1; j > 0; j >>= 1) {
			if (j < E) {
				switch (j) { // slots j apart: compile-time, so that k and x stay in registers
				case 1: psa_ce_slots<E, 1>(k, x, i0, kq); break;
				case 2: psa_ce_slots<E, 2>(k, x, i0, kq); break;
				case 4: psa_ce_slots<E, 4>(k, x, i0, kq); break;
				case 8: psa_ce_slots<E, 8>(k, x, i0, kq); break;
				case 16: psa_ce_slots<E, 16>(k, x, i0, kq); break;
				}
			} else if (j < 32 * E) {
				const int d = j / E; // lanes apart
				const bool lower = (lane & d) == 0;
#pragma unroll
				for (int e = 0; e < E; e++) {
					const u64 ok = __shfl_xor_sync(0xffffffffu, k[e], d);
					const int oi = __shfl_xor_sync(0xffffffffu, x[e], d);
					const bool up = ((i0 + e) & kq) == 0;
					const bool mine = psa_precedes(k[e], x[e], ok, oi); // this one comes first
					if (mine != (lower == up)) k[e] = ok, x[e] = oi;
				}
			} else { // j ≥ 32E: warp w ^ (j / 32E)'s same lane and slot
				__syncthreads(); // the last use of xk, xi is done
#pragma unroll
				for (int e = 0; e < E; e++) xk[i0 + e] = k[e], xi[i0 + e] = x[e];
				__syncthreads();
				const bool lower = (w & (j / (32 * E))) == 0;
#pragma unroll
				for (int e = 0; e < E; e++) {
					const int o = (i0 + e) ^ j;
					const u64 ok = xk[o];
					const int oi = xi[o];
					const bool up = ((i0 + e) & kq) == 0;
					const bool mine = psa_precedes(k[e], x[e], ok, oi);
					if (mine != (lower == up)) k[e] = ok, x[e] = oi;
				}
			}
		}
	}
}

// psa_sort_rows sorts psa_assign's n2 keys skey and indices sidx in place
// by psa_sort_regs with E = n2 / PSA_AT positions a thread (n2 a power of
// two, PSA_AT ≤ n2 ≤ PSA_AT·PSA_SORT_E).
template <int E>
__device__ __forceinline__ void psa_sort_rows(u64* skey, int* sidx) {
	const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
	const int i0 = 32 * E * w + E * lane;
	u64 k[E];
	int x[E];
	__syncthreads(); // the keys are in
#pragma unroll
	for (int e = 0; e < E; e++) k[e] = skey[i0 + e], x[e] = sidx[i0 + e];
	psa_sort_regs<E>(k, x, skey, sidx);
	__syncthreads(); // every thread is done reading skey, sidx
#pragma unroll
	for (int e = 0; e < E; e++) skey[i0 + e] = k[e], sidx[i0 + e] = x[e];
	__syncthreads(); // the sorted table is in
}
