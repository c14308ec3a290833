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
//   uni_mass             per (head group, query block) segment, several
//                        segments sharing composite keys per work item:
//                        float64 logits of the composite queries against
//                        the visible composite keys, the blockwise
//                        canonical softmax summed per KV block (Eq. 4–5),
//                        and Top-P (Eq. 6), writing the rows of every head
//                        of the group.

// UniArgs mirrors cuda.uniArgs on the Go side.
struct UniArgs {
	const float* cq;  // composite queries [groups][nq][L], scaled
	const float* ck;  // composite keys [key sets][nk][L]
	double* scratch;  // per CTA: mass[UMS][KB], mb[URP][KB], eb[URP][KB]
	int nq, nk, L;    // composites and their length (D)
	int cqf, ckf, ch; // c_q, c_k, c_h
	int ksets;        // key sets: (b, KV head) pairs when key_per_kv, else head groups
	int key_per_kv;   // key sets are (b, KV head) rather than head groups
	int per;          // composite keys per KV block, BlockK/c_k
	int tk;           // composite keys per tile, a multiple of per, at most UTK
	int hpi;          // head groups per key set
	int spi;          // segments per work item, at most UMS
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

// Logits are the dot products themselves: the composite queries carry
// the softmax scale.
#define LSCALE(x) (x)

#include "block_mass.cuh"

extern "C" __global__ void __launch_bounds__(UT) uni_mass(PlanArgs a, UniArgs u) {
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ int vis[URP], rseg[URP];
	__shared__ long long roff[URP];
	__shared__ double rsum[URP];
	__shared__ int sqb[UMS], sg[UMS], snvis[UMS], scols[UMS], srow0[UMS + 1];
	__shared__ double tot;
	__shared__ int kept_n;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int KB = a.stride, L = u.L, per = u.per;
	// Top-P reuses the shared memory: keys, indices, flags.
	int P2 = 1;
	while (P2 < KB) P2 <<= 1;
	u64* skey = (u64*)smem;
	int* sidx = (int*)(skey + P2);
	unsigned char* flag = (unsigned char*)(sidx + P2);

	double* mass = u.scratch + (long long)blockIdx.x * KB * (UMS + 2 * URP); // [UMS][KB]
	double* mbS = mass + UMS * KB;                                            // [URP][KB]
	double* ebS = mbS + URP * KB;                                             // [URP][KB]
	const int na = a.bq / u.cqf;                                              // composite queries per query block
	const int nseg = a.q_blocks * u.hpi;                                      // segments per key set
	const int ipk = (nseg + u.spi - 1) / u.spi;                               // work items per key set
	const int work = u.ksets * ipk;
	const int off = a.Nk - a.Nq;
	for (int w = blockIdx.x; w < work; w += gridDim.x) {
		const int kset = w % u.ksets, it = w / u.ksets;
		const int s0 = it * u.spi, ns = min(u.spi, nseg - s0);
		const float* K = u.ck + (long long)kset * u.nk * L;
		__syncthreads(); // the previous item is done with the segment table
		if (tid == 0) {
			int rows = 0;
			for (int k = 0; k < ns; k++) {
				int s = s0 + k, qb = a.q_blocks - 1 - s / u.hpi, gi = s % u.hpi;
				int nvis = visible_blocks(a, qb);
				int a0 = qb * na, a1 = min(a0 + na, u.nq);
				sqb[k] = qb;
				sg[k] = u.key_per_kv ? (kset / a.Hkv) * a.Hq + (kset % a.Hkv) * u.hpi + gi : kset;
				snvis[k] = nvis;
				scols[k] = min(u.nk, nvis * per);
				srow0[k] = rows;
				rows += a1 - a0;
			}
			srow0[ns] = rows;
		}
		__syncthreads();
		const int rows = srow0[ns];
		for (int e = tid; e < ns * KB; e += UT)
			if (e % KB < snvis[e / KB]) mass[e] = 0.0;
		for (int p0 = 0; p0 < rows; p0 += URP) {
			const int nr = min(URP, rows - p0);
			__syncthreads(); // the previous pass is done with vis, rseg, roff
			if (tid < URP) {
				int v = 0, k = 0;
				long long o = 0;
				if (tid < nr) {
					int ri = p0 + tid;
					while (ri >= srow0[k + 1]) k++;
					int ai = sqb[k] * na + (ri - srow0[k]); // composite query
					v = scols[k];
					if (a.causal) { // composite key j is visible when j·c_k ≤ its last token
						int last = min((ai + 1) * u.cqf, a.Nq) - 1 + off;
						v = last >= 0 ? min(scols[k], last / u.ckf + 1) : 0;
					}
					o = ((long long)sg[k] * u.nq + ai) * L;
				}
				vis[tid] = v;
				rseg[tid] = k;
				roff[tid] = o;
			}
			__syncthreads();
			pass_mass(K, u.cq, vis, rseg, roff, rsum, snvis, ns, nr, 1.0, mass, mbS, ebS, smem, KB, L, u.tk, per);
		}
		// UniSparse §4.3, Eq. 6 per segment: the fewest blocks, heaviest
		// first, whose mass reaches Top-P of the total (method/unisparse's
		// topP).
		for (int k = 0; k < ns; k++) {
			const int nvis = snvis[k], qb = sqb[k];
			const double* ms = mass + k * KB;
			int b, h0;
			set_heads(a, u.ch, sg[k], &b, &h0);
			__syncthreads(); // masses complete; shared memory free
			if (warp == 0) {
				double p = 0.0;
				for (int kb = lane; kb < nvis; kb += 32) p = add64(p, ms[kb]);
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
					skey[i] = i < nvis ? (u64)__double_as_longlong(ms[i]) : 0ull;
					sidx[i] = i < nvis ? i : 0x7fffffff;
				}
				__syncthreads();
				sort_desc(skey, sidx, n2, tid);
				if (tid == 0) {
					const double need = mul64(u.top_p, total);
					double cum = 0.0;
					int n = 0;
					while (n < nvis) { // skey[n] holds the bits of ms[sidx[n]]
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
			// UniSparse §4.2: the group's mask goes to each of its heads.
			write_rows(a, flag, nvis, (long long)(b * a.Hq + h0) * a.q_blocks + qb, a.q_blocks, u.ch);
		}
	}
}
