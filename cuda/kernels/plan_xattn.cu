// The XAttention planner on the device (package method/xattn; Xu et al.,
// "XAttention: Block Sparse Attention with Antidiagonal Scoring", §2).
// One kernel, xattn_mass, per (batch, head, query block): the
// antidiagonal scores of the block's query groups against every visible
// key group, in float64 and in the canonical order of the CPU planner
// (plan.Dot64 over the reshaped rows, times scale/S), the blockwise
// canonical softmax summed per KV block (plan.AddBlockSoftmax), and the
// threshold selection (xattn.Select), all repeated operation for
// operation so that the plans are identical. Query group i's reshaped row
// is Q[iS+S−1], …, Q[iS] and key group j's K[jS], …, K[jS+S−1] (missing
// tokens are zeros), read straight from the inputs.

// exp64_canon repeats plan.Exp64 (plan/canon.go) operation for operation.
__device__ __forceinline__ double exp64_canon(double x) {
	if (x != x) return x;
	if (x < -708.0) return 0.0;
	if (x > 709.0) return __longlong_as_double(0x7ff0000000000000ll);
	double n = floor(add64(mul64(x, 0x1.71547652b82fep+00), 0.5));
	double r = __dsub_rn(x, mul64(n, 0x1.62e42feep-01));
	r = __dsub_rn(r, mul64(n, 0x1.a39ef35793c76p-33));
	double p = 0x1.6124613a86d09p-33;
	p = add64(mul64(p, r), 0x1.1eed8eff8d898p-29);
	p = add64(mul64(p, r), 0x1.ae64567f544e4p-26);
	p = add64(mul64(p, r), 0x1.27e4fb7789f5cp-22);
	p = add64(mul64(p, r), 0x1.71de3a556c734p-19);
	p = add64(mul64(p, r), 0x1.a01a01a01a01ap-16);
	p = add64(mul64(p, r), 0x1.a01a01a01a01ap-13);
	p = add64(mul64(p, r), 0x1.6c16c16c16c17p-10);
	p = add64(mul64(p, r), 0x1.1111111111111p-07);
	p = add64(mul64(p, r), 0x1.5555555555555p-05);
	p = add64(mul64(p, r), 0x1.5555555555555p-03);
	p = add64(mul64(p, r), 0x1p-01);
	p = add64(mul64(p, r), 1.0);
	p = add64(mul64(p, r), 1.0);
	return mul64(p, __longlong_as_double((long long)((int)n + 1023) << 52));
}

// xattn_reshape writes the reshaped rows of x (XAttention §2.1): group g
// of head set is tokens gS+S−1, …, gS (reverse, queries) or gS, …, gS+S−1
// (keys), D values each, zeros past the last token; sets are (b, head).
extern "C" __global__ void xattn_reshape(View x, float* out, int sets, int ngroups, int S, int reverse) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	const int D = x.D;
	const long long L = (long long)S * D;
	if (i >= (long long)sets * ngroups * L) return;
	int el = (int)(i % L);
	long long sg = i / L;
	int g = (int)(sg % ngroups), set = (int)(sg / ngroups);
	int u = el / D, d = el % D;
	int t = g * S + (reverse ? S - 1 - u : u);
	out[i] = t < x.N ? load(x, set / x.H, set % x.H, t, d) : 0.0f;
}

// XattnArgs mirrors cuda.xattnArgs on the Go side.
struct XattnArgs {
	const float* rq; // reshaped query groups [B·Hq][query groups][S·D]
	const float* rk; // reshaped key groups [B·Hkv][key groups][S·D]
	double* scratch; // per CTA: mass[KB], mb[UR][KB], eb[UR][KB]
	int S;           // stride
	int per;         // key groups per KV block, BlockK/S
	int tk;          // key groups per tile, a multiple of per, in (256, 512]
	int pad;
	double threshold;
};

#define UT 256 // threads of xattn_mass
#define UR 8   // composite queries per pass
#define UDC 16 // dimensions per staged key tile
#define UKP (UDC * 512 / UT) // staged key elements per thread

// fetch loads dimensions db..db+UDC−1 of the tile's keys (rows j0…, up
// to maxvis) and of the pass's composite queries (rows c0…c0+nr−1) into
// the registers kpre and qpre, zero outside.
__device__ __forceinline__ void fetch(float (&kpre)[UKP], float& qpre, const float* K, const float* Q, int tid, int j0, int maxvis,
                                      int c0, int nr, int db, int L, int TK) {
#pragma unroll
	for (int i = 0; i < UKP; i++) {
		int e = tid + i * UT, j = j0 + e / UDC, d = db + e % UDC;
		kpre[i] = (e < UDC * TK && j < maxvis && d < L) ? K[(long long)j * L + d] : 0.0f;
	}
	if (tid < UDC * UR) {
		int r = tid % UR, d = db + tid / UR;
		qpre = (r < nr && d < L) ? Q[(long long)(c0 + r) * L + d] : 0.0f;
	}
}

// precedes orders blocks for Top-P: heavier first, then lower index (the
// CPU's stable sort). Masses are ≥ 0, so their bits order as they do.
__device__ __forceinline__ bool precedes(u64 ka, int ia, u64 kb, int ib) { return ka > kb || (ka == kb && ia < ib); }

extern "C" __global__ void __launch_bounds__(UT) xattn_mass(PlanArgs a, XattnArgs u) {
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ int vis[UR];
	__shared__ double rsum[UR];
	__shared__ double tot;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int KB = a.stride, S = u.S, D = a.D, L = S * D, TK = u.tk, per = u.per;
	const int LGP = TK + TK / per;       // logit row pitch: one pad per block
	double* qs = (double*)smem;          // [UDC][UR]
	double* lg = qs + UDC * UR;          // [UR][LGP]
	float* ks = (float*)(lg + UR * LGP); // [UDC][TK + 1]
	// The selection reuses the shared memory: keys, indices, flags.
	int P2 = 1;
	while (P2 < KB) P2 <<= 1;
	u64* skey = (u64*)smem;
	int* sidx = (int*)(skey + P2);
	unsigned char* flag = (unsigned char*)(sidx + P2);

	double* mass = u.scratch + (long long)blockIdx.x * KB * (2 * UR + 1);
	double* mbS = mass + KB;
	double* ebS = mbS + UR * KB;
	const int groups = a.B * a.Hq;
	const int work = groups * a.q_blocks;
	const int off = a.Nk - a.Nq;
	const int ng = a.bq / S;                   // query groups per query block
	const int kg = (a.Nk + S - 1) / S;         // key groups
	const int qgn = (a.Nq + S - 1) / S;        // query groups
	const double scale = __ddiv_rn((double)a.scale, (double)S);
	for (int w = blockIdx.x; w < work; w += gridDim.x) {
		const int qb = a.q_blocks - 1 - w / groups, bh = w % groups;
		const int b = bh / a.Hq, h = bh % a.Hq, kvh = h / (a.Hq / a.Hkv);
		const int nvis = visible_blocks(a, qb);
		const int a0 = qb * ng, a1 = min(a0 + ng, qgn);
		const float* Q = u.rq + (long long)bh * qgn * L;
		const float* K = u.rk + (long long)(b * a.Hkv + kvh) * kg * L;
		for (int kb = tid; kb < nvis; kb += UT) mass[kb] = 0.0;
		for (int c0 = a0; c0 < a1 && nvis > 0; c0 += UR) {
			const int nr = min(UR, a1 - c0);
			__syncthreads(); // the previous pass is done with vis, lg
			if (tid < UR) {
				int v = 0;
				if (tid < nr) {
					v = kg;
					if (a.causal) { // key group j is visible when its first key is visible to the group's first query
						int pos = (c0 + tid) * S + off;
						v = pos < 0 ? 0 : min(pos / S + 1, kg);
					}
				}
				vis[tid] = v;
			}
			__syncthreads();
			int maxvis = 0;
			for (int r = 0; r < nr; r++) maxvis = max(maxvis, vis[r]);
			for (int j0 = 0; j0 < maxvis; j0 += TK) {
				double accA[UR], accB[UR];
#pragma unroll
				for (int r = 0; r < UR; r++) accA[r] = accB[r] = 0.0;
				// The next chunk of UDC dimensions is fetched into registers
				// while the current one is multiplied from shared memory.
				float kpre[UKP], qpre = 0.0f;
				int d0 = 0;
				fetch(kpre, qpre, K, Q, tid, j0, maxvis, c0, nr, 0, L, TK);
				for (; d0 < L; d0 += UDC) {
					__syncthreads();
#pragma unroll
					for (int i = 0; i < UKP; i++) {
						int e = tid + i * UT;
						if (e < UDC * TK) ks[(e % UDC) * (TK + 1) + e / UDC] = kpre[i];
					}
					if (tid < UDC * UR) qs[tid] = (double)qpre;
					__syncthreads();
					if (d0 + UDC < L) fetch(kpre, qpre, K, Q, tid, j0, maxvis, c0, nr, d0 + UDC, L, TK);
					const int dn = min(UDC, L - d0);
					for (int dd = 0; dd < dn; dd++) {
						const double kA = (double)ks[dd * (TK + 1) + tid];
						const double kB = tid + 256 < TK ? (double)ks[dd * (TK + 1) + tid + 256] : 0.0;
						const double* qd = qs + dd * UR;
#pragma unroll
						for (int r2 = 0; r2 < UR / 2; r2++) {
							const double qx = qd[2 * r2], qy = qd[2 * r2 + 1];
							// Products of float32 values are exact in float64, so
							// the FMA rounds as plan.Dot64's add does.
							accA[2 * r2] = __fma_rn(qx, kA, accA[2 * r2]);
							accB[2 * r2] = __fma_rn(qx, kB, accB[2 * r2]);
							accA[2 * r2 + 1] = __fma_rn(qy, kA, accA[2 * r2 + 1]);
							accB[2 * r2 + 1] = __fma_rn(qy, kB, accB[2 * r2 + 1]);
						}
					}
				}
				// Tile-local key group jj goes to lg[r][jj + jj/per], times
				// scale/S (XAttention §2.1).
#pragma unroll
				for (int r = 0; r < UR; r++) {
					lg[r * LGP + tid + tid / per] = mul64(accA[r], scale);
					if (tid + 256 < TK) lg[r * LGP + tid + 256 + (tid + 256) / per] = mul64(accB[r], scale);
				}
				__syncthreads();
				// Each block's maximum and its shifted exponentials' sum, in
				// increasing key order (plan.AddBlockSoftmax).
				const int nblk = TK / per;
				for (int e = tid; e < UR * nblk; e += UT) {
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
			// Row r (warp r): rescale the block sums to the row maximum and
			// take their canonical sum (plan.Sum64 = warp_sum).
			if (warp < nr && vis[warp] > 0) {
				const int nb = (vis[warp] + per - 1) / per;
				double m = -__longlong_as_double(0x7ff0000000000000ll);
				for (int kb = lane; kb < nb; kb += 32) {
					double v = mbS[warp * KB + kb];
					if (v > m) m = v;
				}
#pragma unroll
				for (int o = 16; o > 0; o >>= 1) {
					double v = __shfl_xor_sync(0xffffffffu, m, o);
					if (v > m) m = v;
				}
				double p = 0.0;
				for (int kb = lane; kb < nb; kb += 32) {
					double wv = mul64(ebS[warp * KB + kb], exp64_canon(__dsub_rn(mbS[warp * KB + kb], m)));
					ebS[warp * KB + kb] = wv;
					p = add64(p, wv);
				}
				p = warp_sum(p);
				if (lane == 0) rsum[warp] = p;
			}
			__syncthreads();
			for (int kb = tid; kb < nvis; kb += UT) {
				double mv = mass[kb];
				for (int r = 0; r < nr; r++)
					if (kb * per < vis[r]) mv = add64(mv, __ddiv_rn(ebS[r * KB + kb], rsum[r]));
				mass[kb] = mv;
			}
		}
		__syncthreads(); // mass complete; shared memory free for the selection
		// XAttention §2.2 as xattn.Select: the forced blocks (causal: the
		// first and the last visible), then the heaviest others while the
		// kept mass is below threshold × the total (plan.Sum64).
		if (warp == 0) {
			double p = 0.0;
			for (int kb = lane; kb < nvis; kb += 32) p = add64(p, mass[kb]);
			p = warp_sum(p);
			if (lane == 0) tot = p;
		}
		int n2 = 1;
		while (n2 < nvis) n2 <<= 1;
		for (int i = tid; i < n2; i += UT) {
			skey[i] = i < nvis ? (u64)__double_as_longlong(mass[i]) : 0ull;
			sidx[i] = i < nvis ? i : 0x7fffffff;
		}
		__syncthreads();
		for (int k = 2; k <= n2; k <<= 1) {
			for (int j = k >> 1; j > 0; j >>= 1) {
				for (int i = tid; i < n2; i += UT) {
					int ixj = i ^ j;
					if (ixj > i) {
						bool up = (i & k) == 0;
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
		for (int kb = tid; kb < nvis; kb += UT) flag[kb] = 0;
		__syncthreads();
		if (tid == 0 && nvis > 0) {
			const double need = mul64(u.threshold, tot);
			double have = 0.0;
			if (a.causal) {
				flag[0] = 1;
				have = add64(have, mass[0]);
				if (nvis > 1) {
					flag[nvis - 1] = 1;
					have = add64(have, mass[nvis - 1]);
				}
			}
			for (int s = 0; s < nvis; s++) {
				int kb = sidx[s];
				if (a.causal && (kb == 0 || kb == nvis - 1)) continue;
				if (have >= need) break;
				flag[kb] = 1;
				have = add64(have, __longlong_as_double((long long)skey[s])); // mass[kb]
			}
		}
		__syncthreads();
		// Write the kept blocks in ascending order.
		if (warp == 0) {
			int n = 0;
			long long row = (long long)bh * a.q_blocks + qb;
			for (int base = 0; base < nvis; base += 32) {
				int kb = base + lane;
				bool f = kb < nvis && flag[kb];
				unsigned m = __ballot_sync(0xffffffffu, f);
				if (f) a.lists[row * a.stride + n + __popc(m & ((1u << lane) - 1u))] = kb;
				n += __popc(m);
			}
			if (lane == 0) a.row_len[row] = n;
		}
		__syncthreads();
	}
}
