// The XAttention planner on the device (package method/xattn; Xu et al.,
// "XAttention: Block Sparse Attention with Antidiagonal Scoring", §2).
// xattn_reshape lays out the reshaped rows once: query group i is
// Q[iS+S−1], …, Q[iS] and key group j is K[jS], …, K[jS+S−1] (missing
// tokens are zeros). xattn_mass then takes (head, query block) segments
// of the heads that share a KV head: the antidiagonal scores of their
// query groups against every visible key group, in float64 and in the
// canonical order of the CPU planner (plan.Dot64 over the reshaped rows,
// times scale/S), the blockwise canonical softmax summed per KV block
// (plan.AddBlockSoftmax), and the threshold selection (xattn.Select), all
// repeated operation for operation so that the plans are identical.

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
	double* scratch; // per CTA: mass[UMS][KB], mb[URP][KB], eb[URP][KB]
	int S;           // stride
	int per;         // key groups per KV block, BlockK/S
	int tk;          // key groups per tile, a multiple of per, at most UTK
	int spi;         // segments per work item, at most UMS
	double threshold;
};

// Logits are the antidiagonal sums times scale/S.
#define LSCALE(x) mul64((x), lscale)

#include "block_mass.cuh"

extern "C" __global__ void __launch_bounds__(UT) xattn_mass(PlanArgs a, XattnArgs u) {
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ int vis[URP], rseg[URP];
	__shared__ long long roff[URP];
	__shared__ double rsum[URP];
	__shared__ int sqb[UMS], sbh[UMS], snvis[UMS], srow0[UMS + 1];
	__shared__ double tot;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int KB = a.stride, S = u.S, L = S * a.D, per = u.per;
	// The selection reuses the shared memory: keys, indices, flags.
	int P2 = 1;
	while (P2 < KB) P2 <<= 1;
	u64* skey = (u64*)smem;
	int* sidx = (int*)(skey + P2);
	unsigned char* flag = (unsigned char*)(sidx + P2);

	double* mass = u.scratch + (long long)blockIdx.x * KB * (UMS + 2 * URP); // [UMS][KB]
	double* mbS = mass + UMS * KB;                                            // [URP][KB]
	double* ebS = mbS + URP * KB;                                             // [URP][KB]
	const int hpi = a.Hq / a.Hkv, ksets = a.B * a.Hkv;
	const int na = a.bq / S;                   // query groups per query block
	const int kg = (a.Nk + S - 1) / S;         // key groups
	const int qgn = (a.Nq + S - 1) / S;        // query groups
	const int nseg = a.q_blocks * hpi;         // segments per key set
	const int ipk = (nseg + u.spi - 1) / u.spi; // work items per key set
	const int work = ksets * ipk;
	const int off = a.Nk - a.Nq;
	const double lscale = __ddiv_rn((double)a.scale, (double)S); // XAttention §2.1: scale / S
	for (int w = blockIdx.x; w < work; w += gridDim.x) {
		const int kset = w % ksets, it = w / ksets;
		const int s0 = it * u.spi, ns = min(u.spi, nseg - s0);
		const float* K = u.rk + (long long)kset * kg * L;
		__syncthreads(); // the previous item is done with the segment table
		if (tid == 0) {
			int rows = 0;
			for (int k = 0; k < ns; k++) {
				int s = s0 + k, qb = a.q_blocks - 1 - s / hpi, gi = s % hpi;
				int a0 = qb * na, a1 = min(a0 + na, qgn);
				sqb[k] = qb;
				sbh[k] = (kset / a.Hkv) * a.Hq + (kset % a.Hkv) * hpi + gi;
				snvis[k] = visible_blocks(a, qb);
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
					int ai = sqb[k] * na + (ri - srow0[k]); // query group
					v = snvis[k] > 0 ? kg : 0;
					if (a.causal) { // key group j is visible when its first key is visible to the group's first query
						int pos = ai * S + off;
						v = pos < 0 ? 0 : min(pos / S + 1, kg);
					}
					o = ((long long)sbh[k] * qgn + ai) * L;
				}
				vis[tid] = v;
				rseg[tid] = k;
				roff[tid] = o;
			}
			__syncthreads();
			pass_mass(K, u.rq, vis, rseg, roff, rsum, snvis, ns, nr, lscale, mass, mbS, ebS, smem, KB, L, u.tk, per);
		}
		// XAttention §2.2 per segment, as xattn.Select: the forced blocks
		// (causal: the first and the last visible), then the heaviest others
		// while the kept mass is below threshold × the total (plan.Sum64).
		for (int k = 0; k < ns; k++) {
			const int nvis = snvis[k], qb = sqb[k];
			const double* ms = mass + k * KB;
			__syncthreads(); // masses complete; shared memory free
			if (warp == 0) {
				double p = 0.0;
				for (int kb = lane; kb < nvis; kb += 32) p = add64(p, ms[kb]);
				p = warp_sum(p);
				if (lane == 0) tot = p;
			}
			int n2 = 1;
			while (n2 < nvis) n2 <<= 1;
			for (int i = tid; i < n2; i += UT) {
				skey[i] = i < nvis ? (u64)__double_as_longlong(ms[i]) : 0ull;
				sidx[i] = i < nvis ? i : 0x7fffffff;
			}
			for (int kb = tid; kb < nvis; kb += UT) flag[kb] = 0;
			__syncthreads();
			sort_desc(skey, sidx, n2, tid);
			if (tid == 0 && nvis > 0) {
				const double need = mul64(u.threshold, tot);
				double have = 0.0;
				if (a.causal) {
					flag[0] = 1;
					have = add64(have, ms[0]);
					if (nvis > 1) {
						flag[nvis - 1] = 1;
						have = add64(have, ms[nvis - 1]);
					}
				}
				for (int s = 0; s < nvis; s++) {
					int kb = sidx[s];
					if (a.causal && (kb == 0 || kb == nvis - 1)) continue;
					if (have >= need) break;
					flag[kb] = 1;
					have = add64(have, __longlong_as_double((long long)skey[s])); // ms[kb]
				}
			}
			__syncthreads();
			write_rows(a, flag, nvis, (long long)sbh[k] * a.q_blocks + qb, 0, 1);
		}
	}
}
