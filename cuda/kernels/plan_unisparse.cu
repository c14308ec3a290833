// The UniSparse planner on the device (package method/unisparse; UniSparse
// §4, "A Unified Sparse Attention via Multi-Granularity Compression").
// Every value is computed in the canonical order that the CPU planner
// uses (see method/unisparse's scorer and plan/canon.go), operation for
// operation, so that the plans are identical:
//
//   uni_norms, uni_draw  stochastic pooling only: token norms, then one
//                        thread per PCG stream walking math/rand/v2's PCG
//                        exactly as the CPU draws (Float64, or IntN when
//                        every token of a composite is zero);
//   uni_pool             composite queries (scaled) and keys in float32
//                        (UniSparse Eq. 2–3);
//   uni_mass             per (head group, query block): float64 logits of
//                        the composite queries against the visible
//                        composite keys, the blockwise canonical softmax
//                        summed per KV block (Eq. 4–5), and Top-P (Eq. 6),
//                        writing the rows of every head of the group.

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

// UniArgs mirrors cuda.uniArgs on the Go side.
struct UniArgs {
	const float* cq;  // composite queries [groups][nq][L], scaled
	const float* ck;  // composite keys [key sets][nk][L]
	double* scratch;  // per CTA: mass[KB], mb[UR][KB], eb[UR][KB]
	int nq, nk, L;    // composites and their length (D)
	int cqf, ckf, ch; // c_q, c_k, c_h
	int groups;       // B·Hq/c_h
	int key_per_kv;   // key sets are (b, KV head) rather than head groups
	int per;          // composite keys per KV block, BlockK/c_k
	int tk;           // composite keys per tile, a multiple of per, in (256, 512]
	double top_p;
};

// set_heads gives the batch and first query head of head group g.
__device__ __forceinline__ void set_heads(const PlanArgs& a, int ch, int g, int* b, int* h0) {
	int gpb = a.Hq / ch;
	*b = g / gpb;
	*h0 = (g % gpb) * ch;
}

// tok returns element d of token t of a head group (or of KV head kvh when
// kvh ≥ 0): the token averaged over the group's c_h heads, (1/c_h)·x added
// head by head, each product rounded, as the CPU's gather.
__device__ __forceinline__ float tok(const PlanArgs& a, const View& x, int b, int h0, int ch, int keys, int kvh, int t, int d) {
	if (kvh >= 0) return load(x, b, kvh, t, d);
	int grp = a.Hq / a.Hkv;
	if (ch == 1) return load(x, b, keys ? h0 / grp : h0, t, d);
	float inv = __fdiv_rn(1.0f, (float)ch);
	float s = 0.0f;
	for (int h = h0; h < h0 + ch; h++) s = __fadd_rn(s, __fmul_rn(inv, load(x, b, keys ? h / grp : h, t, d)));
	return s;
}

// uni_pool writes composite c of each set, element by element: sets are
// head groups, or (b, KV head) pairs when per_kv. pooling: 0 average, 1
// max, 2 stochastic (the token pick[set·ncomp + c]). Queries (scale ≠ 0)
// are multiplied by the softmax scale.
extern "C" __global__ void uni_pool(PlanArgs a, View x, float* out, int sets, int ntok, int ncomp, int c, int ch, int keys,
                                    int per_kv, int pooling, const int* pick, float scale) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	int D = a.D;
	if (i >= (long long)sets * ncomp * D) return;
	int d = (int)(i % D);
	long long sc = i / D;
	int comp = (int)(sc % ncomp), set = (int)(sc / ncomp);
	int b, h0, kvh = -1;
	if (per_kv) {
		b = set / a.Hkv;
		kvh = set % a.Hkv;
		h0 = 0;
	} else {
		set_heads(a, ch, set, &b, &h0);
	}
	int lo = comp * c, hi = min(lo + c, ntok);
	float v;
	if (pooling == 2) {
		v = tok(a, x, b, h0, ch, keys, kvh, pick[sc], d);
	} else if (pooling == 1) {
		v = tok(a, x, b, h0, ch, keys, kvh, lo, d);
		for (int t = lo + 1; t < hi; t++) {
			float y = tok(a, x, b, h0, ch, keys, kvh, t, d);
			if (y > v) v = y;
		}
	} else { // UniSparse Eq. 2: q̃ = (1/c)·Σ q
		float s = 0.0f;
		for (int t = lo; t < hi; t++) s = __fadd_rn(s, tok(a, x, b, h0, ch, keys, kvh, t, d));
		v = __fmul_rn(s, __fdiv_rn(1.0f, (float)(hi - lo)));
	}
	if (scale != 0.0f) v = __fmul_rn(v, scale);
	out[i] = v;
}

// uni_norms writes the L2 norm of each head-averaged token of each head
// group, as pickByNorm computes it: squares added in float64 in increasing
// d, then the square root.
extern "C" __global__ void uni_norms(PlanArgs a, View x, double* norms, int sets, int ntok, int ch, int keys) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (long long)sets * ntok) return;
	int t = (int)(i % ntok), set = (int)(i / ntok);
	int b, h0;
	set_heads(a, ch, set, &b, &h0);
	double s = 0.0;
	for (int d = 0; d < a.D; d++) {
		double y = (double)tok(a, x, b, h0, ch, keys, -1, t, d);
		s = add64(s, mul64(y, y));
	}
	norms[i] = __dsqrt_rn(s);
}

// Pcg is math/rand/v2's PCG: a 128-bit LCG with DXSM output.
struct Pcg {
	u64 hi, lo;
	__device__ u64 next() {
		const u64 mulHi = 2549297995355413924ull, mulLo = 4865540595714422341ull;
		const u64 incHi = 6364136223846793005ull, incLo = 1442695040888963407ull;
		u64 h = __umul64hi(lo, mulLo), l = lo * mulLo;
		h += hi * mulLo + lo * mulHi;
		u64 l2 = l + incLo;
		h += incHi + (l2 < l ? 1ull : 0ull);
		lo = l2;
		hi = h;
		u64 x = h;
		x ^= x >> 32;
		x *= 0xda942042e4dd58b5ull;
		x ^= x >> 48;
		x *= (l2 | 1ull);
		return x;
	}
	// float64 is Rand.Float64.
	__device__ double float64() { return (double)(next() << 11 >> 11) / 9007199254740992.0; }
	// intn is Rand.IntN on 64-bit systems.
	__device__ int intn(u64 n) {
		if ((n & (n - 1)) == 0) return (int)(next() & (n - 1));
		u64 x = next();
		u64 hi = __umul64hi(x, n), lo = x * n;
		if (lo < n) {
			u64 thresh = (0ull - n) % n;
			while (lo < thresh) {
				x = next();
				hi = __umul64hi(x, n);
				lo = x * n;
			}
		}
		return (int)hi;
	}
};

// uni_draw walks the PCG stream of each head group (one thread each) as
// the CPU's pooler does: seeded (seed, b<<33 ^ h0<<1 ^ stream), one draw
// per composite in increasing order, and writes the picked token.
extern "C" __global__ void uni_draw(PlanArgs a, const double* norms, int* pick, int sets, int ntok, int ncomp, int c, int ch,
                                    u64 seed, int stream) {
	int set = blockIdx.x * blockDim.x + threadIdx.x;
	if (set >= sets) return;
	int b, h0;
	set_heads(a, ch, set, &b, &h0);
	Pcg r{seed, ((u64)b << 33) ^ ((u64)h0 << 1) ^ (u64)stream};
	const double* nm = norms + (long long)set * ntok;
	for (int comp = 0; comp < ncomp; comp++) {
		int lo = comp * c, hi = min(lo + c, ntok), n = hi - lo;
		double total = 0.0;
		for (int t = lo; t < hi; t++) total = add64(total, nm[t]);
		int got;
		if (total == 0.0) {
			got = r.intn((u64)n);
		} else {
			double u = mul64(r.float64(), total);
			got = n - 1;
			for (int t = 0; t < n; t++) {
				double w = nm[lo + t];
				if (u < w) {
					got = t;
					break;
				}
				u = __dsub_rn(u, w);
			}
		}
		pick[(long long)set * ncomp + comp] = lo + got;
	}
}

#define UT 256 // threads of uni_mass
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

extern "C" __global__ void __launch_bounds__(UT) uni_mass(PlanArgs a, UniArgs u) {
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ int vis[UR];
	__shared__ double rsum[UR];
	__shared__ double tot;
	__shared__ int kept_n;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int KB = a.stride, L = u.L, TK = u.tk, per = u.per;
	const int LGP = TK + TK / per; // logit row pitch: one pad per block
	double* qs = (double*)smem;    // [UDC][UR]
	double* lg = qs + UDC * UR;    // [UR][LGP]
	float* ks = (float*)(lg + UR * LGP); // [UDC][TK + 1]
	// Top-P reuses the shared memory: keys, indices, flags.
	int P2 = 1;
	while (P2 < KB) P2 <<= 1;
	u64* skey = (u64*)smem;
	int* sidx = (int*)(skey + P2);
	unsigned char* flag = (unsigned char*)(sidx + P2);

	double* mass = u.scratch + (long long)blockIdx.x * KB * (2 * UR + 1);
	double* mbS = mass + KB;
	double* ebS = mbS + UR * KB;
	const int work = u.groups * a.q_blocks;
	const int off = a.Nk - a.Nq;
	for (int w = blockIdx.x; w < work; w += gridDim.x) {
		const int qb = a.q_blocks - 1 - w / u.groups, g = w % u.groups;
		int b, h0;
		set_heads(a, u.ch, g, &b, &h0);
		const int nvis = visible_blocks(a, qb);
		const int a0 = qb * (a.bq / u.cqf), a1 = min(a0 + a.bq / u.cqf, u.nq);
		const int cols = min(u.nk, nvis * per);
		const float* Q = u.cq + (long long)g * u.nq * L;
		const int kset = u.key_per_kv ? b * a.Hkv + h0 / (a.Hq / a.Hkv) : g;
		const float* K = u.ck + (long long)kset * u.nk * L;
		for (int kb = tid; kb < nvis; kb += UT) mass[kb] = 0.0;
		for (int c0 = a0; c0 < a1 && nvis > 0; c0 += UR) {
			const int nr = min(UR, a1 - c0);
			__syncthreads(); // the previous pass is done with vis, lg
			if (tid < UR) {
				int v = 0;
				if (tid < nr) {
					v = cols;
					if (a.causal) {
						int last = min((c0 + tid + 1) * u.cqf, a.Nq) - 1 + off;
						v = last >= 0 ? min(cols, last / u.ckf + 1) : 0;
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
				// Tile-local key jj goes to lg[r][jj + jj/per].
#pragma unroll
				for (int r = 0; r < UR; r++) {
					lg[r * LGP + tid + tid / per] = accA[r];
					if (tid + 256 < TK) lg[r * LGP + tid + 256 + (tid + 256) / per] = accB[r];
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
					double s = 0.0;
					for (int j = jlo; j < jhi; j++) s = add64(s, exp64_canon(__dsub_rn(l[j], bm)));
					int kb = jlo / per;
					mbS[r * KB + kb] = bm;
					ebS[r * KB + kb] = s;
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
		__syncthreads(); // mass complete; shared memory free for Top-P
		// UniSparse §4.3, Eq. 6: the fewest blocks, heaviest first, whose
		// mass reaches Top-P of the total (method/unisparse's topP).
		if (warp == 0) {
			double p = 0.0;
			for (int kb = lane; kb < nvis; kb += 32) p = add64(p, mass[kb]);
			p = warp_sum(p);
			if (lane == 0) tot = p;
		}
		__syncthreads();
		const double total = tot;
		if (total == 0.0 || u.top_p >= 1.0) {
			for (int kb = tid; kb < nvis; kb += UT) flag[kb] = total != 0.0;
		} else {
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
			if (tid == 0) {
				const double need = mul64(u.top_p, total);
				double cum = 0.0;
				int n = 0;
				while (n < nvis) { // skey[n] holds the bits of mass[sidx[n]]
					cum = add64(cum, __longlong_as_double((long long)skey[n]));
					n++;
					if (cum >= need) break;
				}
				kept_n = n;
			}
			__syncthreads();
			for (int s = tid; s < nvis; s += UT) flag[sidx[s]] = s < kept_n;
		}
		__syncthreads();
		// Write the kept blocks in ascending order to every head's row.
		if (warp == 0) {
			int n = 0;
			for (int base = 0; base < nvis; base += 32) {
				int kb = base + lane;
				bool f = kb < nvis && flag[kb];
				unsigned m = __ballot_sync(0xffffffffu, f);
				if (f) {
					int pos = n + __popc(m & ((1u << lane) - 1u));
					for (int h = h0; h < h0 + u.ch; h++) a.lists[((long long)(b * a.Hq + h) * a.q_blocks + qb) * a.stride + pos] = kb;
				}
				n += __popc(m);
			}
			if (lane == 0)
				for (int h = h0; h < h0 + u.ch; h++) a.row_len[(b * a.Hq + h) * a.q_blocks + qb] = n;
		}
		__syncthreads();
	}
}
