// The block-mass machinery shared by the UniSparse and XAttention device
// planners (plan_unisparse.cu, plan_xattn.cu): both score float32 pooled
// (or reshaped) query rows against pooled key rows in float64, in the
// canonical order of plan.Dot64, take the blockwise canonical softmax,
// sum it per KV block and select blocks by a cumulative share. The
// including file defines LSCALE(x), its logit scaling.

#define UT 256   // threads of the mass kernel
#define UQ 4     // thread quarters: each owns UR rows of a pass
#define UR 8     // rows per quarter
#define URP 32   // rows per pass, UQ·UR
#define UMS 4    // most segments per work item
#define UDC 16   // dimensions per staged tile
#define UTK 128  // most keys per tile
#define UKP (UDC * UTK / UT) // staged key elements per thread

// A work item of the mass kernel is up to UMS segments — (head, query
// block) pairs that read the same keys — whose query rows are stacked and
// processed URP rows at a time, so that each staged key serves up to URP
// rows. Each segment keeps its own masses, summed in increasing row order
// as on the CPU.

// fetch_tile loads dimensions db..db+UDC−1 of the tile's keys (rows j0…,
// below maxvis) and of the pass's query rows (at roff[r], r < nr) into the
// registers kpre and qpre, zero outside.
__device__ __forceinline__ void fetch_tile(float (&kpre)[UKP], float (&qpre)[2], const float* K, const float* Qbase, const long long* roff,
                                           int tid, int j0, int maxvis, int nr, int db, int L, int TK) {
#pragma unroll
	for (int i = 0; i < UKP; i++) {
		int e = tid + i * UT, j = j0 + e / UDC, d = db + e % UDC;
		kpre[i] = (e < UDC * TK && j < maxvis && d < L) ? K[(long long)j * L + d] : 0.0f;
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		int e = tid + i * UT, r = e % URP, d = db + e / URP;
		qpre[i] = (r < nr && d < L) ? Qbase[roff[r] + d] : 0.0f;
	}
}

// precedes orders blocks for selection: heavier first, then lower index
// (the CPU's stable sort). Masses are ≥ 0, so their bits order as they do.
__device__ __forceinline__ bool precedes(u64 ka, int ia, u64 kb, int ib) { return ka > kb || (ka == kb && ia < ib); }

// sort_desc sorts skey/sidx[0..n2) (n2 a power of two) by precedes, with
// every thread of the block.
__device__ __forceinline__ void sort_desc(u64* skey, int* sidx, int n2, int tid) {
	for (int kq = 2; kq <= n2; kq <<= 1) {
		for (int j = kq >> 1; j > 0; j >>= 1) {
			for (int i = tid; i < n2; i += UT) {
				int ixj = i ^ j;
				if (ixj > i) {
					bool up = (i & kq) == 0;
					u64 ki = skey[i], kx = skey[ixj];
					int ii = sidx[i], ix = sidx[ixj];
					if (precedes(kx, ix, ki, ii) == up) {
						skey[i] = kx;
						skey[ixj] = ki;
						sidx[i] = ix;
						sidx[ixj] = ii;
					}
				}
			}
			__syncthreads();
		}
	}
}

// pass_mass computes, for the nr rows of one pass, the logits (times
// lscale) against their visible keys, the blockwise canonical softmax and
// adds each row's block weights to its segment's masses
// (plan.AddBlockSoftmax), in increasing row order.
__device__ __forceinline__ void pass_mass(const float* K, const float* Qbase, const int* vis, const int* rseg, const long long* roff,
                                          double* rsum, const int* snvis, int ns, int nr, double lscale, double* mass, double* mbS,
                                          double* ebS, unsigned char* smem, int KB, int L, int TK, int per) {
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, qq = tid / 64, kk = tid % 64;
	const int LGP = TK + TK / per;        // logit row pitch: one pad per block
	double* qs = (double*)smem;           // [UDC][URP]
	double* lg = qs + UDC * URP;          // [URP][LGP]
	float* ks = (float*)(lg + URP * LGP); // [UDC][TK + 1]
	int maxvis = 0;
	for (int r = 0; r < nr; r++) maxvis = max(maxvis, vis[r]);
	for (int j0 = 0; j0 < maxvis; j0 += TK) {
		double accA[UR], accB[UR];
#pragma unroll
		for (int r = 0; r < UR; r++) accA[r] = accB[r] = 0.0;
		// The next UDC dimensions are fetched into registers while the
		// current ones are multiplied from shared memory.
		float kpre[UKP], qpre[2];
		fetch_tile(kpre, qpre, K, Qbase, roff, tid, j0, maxvis, nr, 0, L, TK);
		for (int d0 = 0; d0 < L; d0 += UDC) {
			__syncthreads();
#pragma unroll
			for (int i = 0; i < UKP; i++) {
				int e = tid + i * UT;
				if (e < UDC * TK) ks[(e % UDC) * (TK + 1) + e / UDC] = kpre[i];
			}
			qs[tid] = (double)qpre[0];
			qs[tid + UT] = (double)qpre[1];
			__syncthreads();
			if (d0 + UDC < L) fetch_tile(kpre, qpre, K, Qbase, roff, tid, j0, maxvis, nr, d0 + UDC, L, TK);
			const int dn = min(UDC, L - d0);
			for (int dd = 0; dd < dn; dd++) {
				const double kA = kk < TK ? (double)ks[dd * (TK + 1) + kk] : 0.0;
				const double kB = kk + 64 < TK ? (double)ks[dd * (TK + 1) + kk + 64] : 0.0;
				const double* qd = qs + dd * URP + qq * UR;
#pragma unroll
				for (int r2 = 0; r2 < UR / 2; r2++) {
					const double qx = qd[2 * r2], qy = qd[2 * r2 + 1];
					// Products of float32 values are exact in float64, so the
					// FMA rounds as plan.Dot64's add does.
					accA[2 * r2] = __fma_rn(qx, kA, accA[2 * r2]);
					accB[2 * r2] = __fma_rn(qx, kB, accB[2 * r2]);
					accA[2 * r2 + 1] = __fma_rn(qy, kA, accA[2 * r2 + 1]);
					accB[2 * r2 + 1] = __fma_rn(qy, kB, accB[2 * r2 + 1]);
				}
			}
		}
		// Tile-local key jj of row r goes to lg[r][jj + jj/per].
#pragma unroll
		for (int r = 0; r < UR; r++) {
			double* lr = lg + (qq * UR + r) * LGP;
			if (kk < TK) lr[kk + kk / per] = LSCALE(accA[r]);
			if (kk + 64 < TK) lr[kk + 64 + (kk + 64) / per] = LSCALE(accB[r]);
		}
		__syncthreads();
		// Each block's maximum and its shifted exponentials' sum, in
		// increasing key order (plan.AddBlockSoftmax).
		const int nblk = TK / per;
		for (int e = tid; e < URP * nblk; e += UT) {
			int r = e / nblk, bt = e % nblk;
			int jlo = j0 + bt * per;
			if (r >= nr || jlo >= vis[r]) continue;
			int jhi = min(jlo + per, vis[r]);
			const double* l = lg + r * LGP + bt * (per + 1) - j0 - bt * per; // l[j] for global j
			double bm = -__longlong_as_double(0x7ff0000000000000ll);
			for (int j = jlo; j < jhi; j++)
				if (l[j] > bm) bm = l[j];
			double sm = 0.0;
			for (int j = jlo; j < jhi; j++) sm = add64(sm, exp64_canon(__dsub_rn(l[j], bm)));
			int kb = jlo / per;
			mbS[r * KB + kb] = bm;
			ebS[r * KB + kb] = sm;
		}
	}
	__syncthreads();
	// Each row (warp w takes rows w, w+8, …): rescale the block sums to the
	// row maximum and take their canonical sum (plan.Sum64 = warp_sum).
	for (int r = warp; r < nr; r += UT / 32) {
		if (vis[r] == 0) continue;
		const int nb = (vis[r] + per - 1) / per;
		double m = -__longlong_as_double(0x7ff0000000000000ll);
		for (int kb = lane; kb < nb; kb += 32) {
			double v = mbS[r * KB + kb];
			if (v > m) m = v;
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			double v = __shfl_xor_sync(0xffffffffu, m, o);
			if (v > m) m = v;
		}
		double p = 0.0;
		for (int kb = lane; kb < nb; kb += 32) {
			double wv = mul64(ebS[r * KB + kb], exp64_canon(__dsub_rn(mbS[r * KB + kb], m)));
			ebS[r * KB + kb] = wv;
			p = add64(p, wv);
		}
		p = warp_sum(p);
		if (lane == 0) rsum[r] = p;
	}
	__syncthreads();
	// Each segment's masses take its rows in increasing order.
	for (int e = tid; e < ns * KB; e += UT) {
		int k = e / KB, kb = e % KB;
		if (kb >= snvis[k]) continue;
		double mv = mass[e];
		for (int r = 0; r < nr; r++)
			if (rseg[r] == k && kb * per < vis[r]) mv = add64(mv, __ddiv_rn(ebS[r * KB + kb], rsum[r]));
		mass[e] = mv;
	}
}

// write_rows writes the flagged blocks of [0, nvis), ascending, to plan
// rows row0, row0 + rstep, … (nrow rows), with warp 0.
__device__ __forceinline__ void write_rows(const PlanArgs& a, const unsigned char* flag, int nvis, long long row0, long long rstep, int nrow) {
	const int tid = threadIdx.x, lane = tid & 31;
	if (tid >= 32) return;
	int n = 0;
	for (int base = 0; base < nvis; base += 32) {
		int kb = base + lane;
		bool f = kb < nvis && flag[kb];
		unsigned m = __ballot_sync(0xffffffffu, f);
		if (f) {
			int pos = n + __popc(m & ((1u << lane) - 1u));
			for (int i = 0; i < nrow; i++) a.lists[(row0 + i * rstep) * a.stride + pos] = kb;
		}
		n += __popc(m);
	}
	if (lane == 0)
		for (int i = 0; i < nrow; i++) a.row_len[row0 + i * rstep] = n;
}
