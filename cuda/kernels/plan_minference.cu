// MInference's vertical-slash planner on the device (package
// method/minference), and the exact attention probe of the last queries
// that it and FlexPrefill (plan_flexprefill.cu) share with package
// method/internal/probe. Every value is computed as the CPU planner
// computes it, operation for operation (canonical orders of plan/canon.go
// and probe.Last), so that the plans agree bit for bit.
//
// Pipeline, per group of heads (hg = head within the group, n probe rows):
//   probe_logits    logits, tile maxima, float32 exponentials, tile sums
//   probe_norm      row maximum and sum; per-tile factors c_t
//   probe_vertical  v[j] = Σ_i P[i][j], rows in increasing order
//   probe_slash     s[d] = Σ_i P[i][pos_i − d], rows in increasing order
//   mi_select       top-k lines (radix descent, ties by index)
// then, over all rows, mi_rows lists the kept visible blocks.

#define PROBE_TILE 128 // keys per softmax tile (probe.Tile)
#define PROBE_QT 64    // probe rows per logits block
#define PROBE_DC 16    // head dims staged per step

#include "probe.cuh"

// probe_logits: block (key tile, row chunk, head of group), 256 threads.
// Warp w holds rows 8w..8w+7 of the chunk, lane l keys l + 32c (c < 4) of
// the tile; each logit is the canonical dot product (fused multiply-adds
// give Dot64's bits: the products of float32 values are exact).
extern "C" __global__ void __launch_bounds__(256) probe_logits(PlanArgs a, View q, View k, ProbeArgs p) {
	__shared__ double qs[PROBE_DC][PROBE_QT];
	__shared__ double ks[PROBE_DC][PROBE_TILE];
	int t = blockIdx.x, i0 = blockIdx.y * PROBE_QT, hg = blockIdx.z;
	int head = p.head0 + hg, b = head / a.Hq, h = head % a.Hq, kh = h / (a.Hq / a.Hkv);
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31;
	int j0 = t * PROBE_TILE;
	double acc[8][4];
#pragma unroll
	for (int r = 0; r < 8; r++)
#pragma unroll
		for (int c = 0; c < 4; c++) acc[r][c] = 0.0;
	for (int d0 = 0; d0 < a.D; d0 += PROBE_DC) {
		for (int x = tid; x < PROBE_QT * PROBE_DC; x += 256) {
			int r = x / PROBE_DC, dd = x % PROBE_DC, i = i0 + r, d = d0 + dd;
			double val = 0.0;
			if (i < p.n && d < a.D) val = (double)load(q, b, h, a.Nq - p.n + i, d);
			qs[dd][r] = val;
		}
		for (int x = tid; x < PROBE_TILE * PROBE_DC; x += 256) {
			int r = x / PROBE_DC, dd = x % PROBE_DC, j = j0 + r, d = d0 + dd;
			double val = 0.0;
			if (j < a.Nk && d < a.D) val = (double)load(k, b, kh, j, d);
			ks[dd][r] = val;
		}
		__syncthreads();
#pragma unroll 4
		for (int dd = 0; dd < PROBE_DC; dd++) {
			double kv[4], qv[8];
#pragma unroll
			for (int c = 0; c < 4; c++) kv[c] = ks[dd][l + 32 * c];
#pragma unroll
			for (int r = 0; r < 8; r++) qv[r] = qs[dd][8 * w + r];
#pragma unroll
			for (int r = 0; r < 8; r++)
#pragma unroll
				for (int c = 0; c < 4; c++) acc[r][c] = fma(qv[r], kv[c], acc[r][c]);
		}
		__syncthreads();
	}
	double scale = (double)a.scale;
	int off = a.Nk - a.Nq;
#pragma unroll
	for (int r = 0; r < 8; r++) {
		int i = i0 + 8 * w + r;
		if (i >= p.n) break; // uniform across the warp
		int pos = a.Nq - p.n + i + off;
		int last = a.causal ? min(pos, a.Nk - 1) : a.Nk - 1;
		double lg[4];
		double m = -__longlong_as_double(0x7ff0000000000000ll);
#pragma unroll
		for (int c = 0; c < 4; c++) {
			int j = j0 + l + 32 * c;
			lg[c] = mul64(acc[r][c], scale);
			if (j <= last) m = fmax(m, lg[c]);
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
		double part = 0.0;
		long long row = (long long)hg * p.n + i;
		float* er = p.e + row * a.Nk;
#pragma unroll
		for (int c = 0; c < 4; c++) {
			int j = j0 + l + 32 * c;
			float e = 0.0f;
			if (j <= last) e = __double2float_rn(exp64_canon(__dsub_rn(lg[c], m)));
			if (j < a.Nk) er[j] = e;
			part = add64(part, (double)e);
		}
		double s = warp_sum(part);
		if (l == 0) {
			p.m[row * p.tiles + t] = m;
			p.s[row * p.tiles + t] = s;
		}
	}
}

// probe_norm: one warp per probe row. The row maximum m, S = Sum64 over
// tiles of s_t·Exp64(m_t − m), and c_t = Exp64(m_t − m)/S replaces m_t
// (0 for a row that sees no key).
extern "C" __global__ void probe_norm(ProbeArgs p) {
	int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), l = threadIdx.x & 31;
	if (row >= p.G * p.n) return;
	double* m = p.m + (long long)row * p.tiles;
	const double* s = p.s + (long long)row * p.tiles;
	double mx = -__longlong_as_double(0x7ff0000000000000ll);
	for (int t = l; t < p.tiles; t += 32) mx = fmax(mx, m[t]);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	if (mx == -__longlong_as_double(0x7ff0000000000000ll)) {
		for (int t = l; t < p.tiles; t += 32) m[t] = 0.0;
		return;
	}
	double part = 0.0;
	for (int t = l; t < p.tiles; t += 32) part = add64(part, mul64(s[t], exp64_canon(__dsub_rn(m[t], mx))));
	double S = warp_sum(part);
	for (int t = l; t < p.tiles; t += 32) m[t] = __ddiv_rn(exp64_canon(__dsub_rn(m[t], mx)), S);
}

// probe_vertical: one thread per (head of group, key).
extern "C" __global__ void probe_vertical(PlanArgs a, ProbeArgs p) {
	long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= (long long)p.G * a.Nk) return;
	int hg = x / a.Nk, j = x % a.Nk, t = j / PROBE_TILE;
	double v = 0.0;
	for (int i = 0; i < p.n; i++) {
		long long row = (long long)hg * p.n + i;
		v = add64(v, mul64((double)p.e[row * a.Nk + j], p.m[row * p.tiles + t]));
	}
	p.v[x] = v;
}

// probe_slash: one thread per (head of group, offset d + Nk − 1).
extern "C" __global__ void probe_slash(PlanArgs a, ProbeArgs p) {
	long long no = 2ll * a.Nk - 1;
	long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= (long long)p.G * no) return;
	int hg = x / no, d = (int)(x % no) - (a.Nk - 1);
	int pos0 = a.Nk - p.n; // position of probe row 0 (token Nq − n)
	double s = 0.0;
	for (int i = 0; i < p.n; i++) {
		int j = pos0 + i - d;
		if (j < 0 || j >= a.Nk) continue;
		long long row = (long long)hg * p.n + i;
		s = add64(s, mul64((double)p.e[row * a.Nk + j], p.m[row * p.tiles + j / PROBE_TILE]));
	}
	p.sl[x] = s;
}

// Top-k selection in one 1024-thread block: items with 64-bit keys (0 for
// items that are not candidates), the k largest taken, ties by smaller
// index (a stable sort's order). sel_topk finds the k-th key T and how
// many items equal to T are taken; sel_mark then visits the items in index
// order, calling mark(i, selected, rank) where rank counts the selected
// items before i.
struct TopK {
	u64 T;
	int ties; // items with key T taken, in index order
	int k;    // items taken in all
};

__device__ __forceinline__ int block_sum_int(int x, int* red) {
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
	__syncthreads();
	if (l == 0) red[w] = x;
	__syncthreads();
	int tot = 0;
	for (int i = 0; i < (int)(blockDim.x >> 5); i++) tot += red[i];
	__syncthreads();
	return tot;
}

template <typename KeyFn>
__device__ TopK sel_topk(KeyFn key, int n, int kwant, u32* hist, int* red) {
	int tid = threadIdx.x;
	int cand = 0;
	for (int i = tid; i < n; i += blockDim.x) cand += key(i) != 0;
	cand = block_sum_int(cand, red);
	TopK r;
	r.k = min(kwant, cand);
	r.T = 0;
	r.ties = 0;
	if (r.k <= 0) {
		r.k = 0;
		r.T = ~0ull;
		return r;
	}
	__shared__ u64 prefix_s;
	__shared__ int krem_s;
	if (tid == 0) {
		prefix_s = 0;
		krem_s = r.k;
	}
	__syncthreads();
	for (int shift = 56; shift >= 0; shift -= 8) {
		for (int x = tid; x < 256; x += blockDim.x) hist[x] = 0;
		__syncthreads();
		u64 prefix = prefix_s;
		for (int base = 0; base < n; base += blockDim.x) {
			int i = base + tid;
			u64 kk = i < n ? key(i) : 0;
			bool in = i < n && (shift == 56 || (kk >> (shift + 8)) == prefix);
			// Lanes with the same digit add once (warp-aggregated).
			int dg = in ? (int)((kk >> shift) & 255) : 256;
			u32 peers = __match_any_sync(0xffffffffu, dg);
			if (in && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[dg], (u32)__popc(peers));
		}
		__syncthreads();
		if (tid == 0) {
			int krem = krem_s, cum = 0;
			for (int dg = 255; dg >= 0; dg--) {
				int hcount = (int)hist[dg];
				if (cum + hcount >= krem) {
					krem_s = krem - cum;
					prefix_s = (prefix << 8) | (u64)dg;
					break;
				}
				cum += hcount;
			}
		}
		__syncthreads();
	}
	r.T = prefix_s;
	r.ties = krem_s;
	__syncthreads();
	return r;
}

// sel_mark calls mark(i, sel, before) for every item in index order
// chunks; before is the number of selected items with a smaller index.
template <typename KeyFn, typename MarkFn>
__device__ void sel_mark(KeyFn key, int n, TopK r, int* red, MarkFn mark) {
	int tid = threadIdx.x, w = tid >> 5, l = tid & 31, nw = blockDim.x >> 5;
	__shared__ int eq_w[32], sel_w[32];
	int carry_eq = 0, carry_sel = 0;
	for (int base = 0; base < n; base += blockDim.x) {
		int i = base + tid;
		u64 kk = i < n ? key(i) : 0;
		bool cand = i < n && r.k > 0 && kk != 0;
		bool gt = cand && kk > r.T, eq = cand && kk == r.T;
		u32 beq = __ballot_sync(0xffffffffu, eq);
		if (l == 0) eq_w[w] = __popc(beq);
		__syncthreads();
		int before_eq = carry_eq + __popc(beq & ((1u << l) - 1));
		int tot_eq = 0;
		for (int x = 0; x < nw; x++) {
			if (x < w) before_eq += eq_w[x];
			tot_eq += eq_w[x];
		}
		bool sel = gt || (eq && before_eq < r.ties);
		u32 bsel = __ballot_sync(0xffffffffu, sel);
		if (l == 0) sel_w[w] = __popc(bsel);
		__syncthreads();
		int before_sel = carry_sel + __popc(bsel & ((1u << l) - 1));
		int tot_sel = 0;
		for (int x = 0; x < nw; x++) {
			if (x < w) before_sel += sel_w[x];
			tot_sel += sel_w[x];
		}
		if (i < n) mark(i, sel, before_sel);
		carry_eq += tot_eq;
		carry_sel += tot_sel;
		__syncthreads();
	}
}

// MiArgs are the minference selection's outputs for one head group.
struct MiArgs {
	unsigned char* vflag; // [B·Hq][KBlocks]: block holds a kept vertical (zeroed before)
	int* cs;              // [B·Hq][2Nk]: kept slashes with offset index < o
	int vertical, slash;  // budgets
	int sinks, recent;    // always-kept keys and diagonals
};

// mi_select: block (head of group, 0 vertical | 1 slash), 1024 threads.
// Vertical keys rank sinks first, then by score, then by index; slash
// offsets (those with mass, and all d ≥ 0) recent diagonals first, then
// by score, then by offset — as minference.Lines sorts them.
extern "C" __global__ void __launch_bounds__(1024) mi_select(PlanArgs a, ProbeArgs p, MiArgs m) {
	__shared__ u32 hist[256];
	__shared__ int red[32];
	int hg = blockIdx.x, head = p.head0 + hg, nkb = (a.Nk + a.bk - 1) / a.bk;
	if (blockIdx.y == 0) {
		const double* v = p.v + (long long)hg * a.Nk;
		int sinks = m.sinks;
		auto key = [&](int j) -> u64 {
			u64 bits = dbits(v[j]);
			return j < sinks ? ((1ull << 63) | bits) : bits + 1;
		};
		TopK r = sel_topk(key, a.Nk, m.vertical, hist, red);
		unsigned char* vf = m.vflag + (long long)head * nkb;
		int bk = a.bk;
		sel_mark(key, a.Nk, r, red, [&](int j, bool sel, int) {
			if (sel) vf[j / bk] = 1;
		});
	} else {
		int no = 2 * a.Nk - 1, nk1 = a.Nk - 1, recent = m.recent;
		const double* s = p.sl + (long long)hg * no;
		auto key = [&](int o) -> u64 {
			double x = s[o];
			int d = o - nk1;
			if (!(x > 0.0) && d < 0) return 0;
			u64 bits = dbits(x);
			return (d >= 0 && d < recent) ? ((1ull << 63) | bits) : bits + 1;
		};
		TopK r = sel_topk(key, no, m.slash, hist, red);
		int* cs = m.cs + (long long)head * (2ll * a.Nk);
		sel_mark(key, no, r, red, [&](int o, bool sel, int before) {
			cs[o] = before;
			if (o == no - 1) cs[no] = before + (sel ? 1 : 0);
		});
	}
}

// mi_rows: one warp per plan row; a visible block is kept when it holds a
// kept vertical key or meets a kept diagonal of one of the row's queries
// (minference.Blocks).
extern "C" __global__ void mi_rows(PlanArgs a, MiArgs m) {
	int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), l = threadIdx.x & 31;
	if (r >= a.rows) return;
	int head = r / a.q_blocks, qb = r % a.q_blocks;
	int nkb = (a.Nk + a.bk - 1) / a.bk, vis = visible_blocks(a, qb), off = a.Nk - a.Nq;
	int plo = qb * a.bq + off, phi = min((qb + 1) * a.bq, a.Nq) - 1 + off;
	const unsigned char* vf = m.vflag + (long long)head * nkb;
	const int* cs = m.cs + (long long)head * (2ll * a.Nk);
	int* out = a.lists + (long long)r * a.stride;
	int cnt = 0;
	for (int kb0 = 0; kb0 < vis; kb0 += 32) {
		int kb = kb0 + l;
		bool want = false;
		if (kb < vis) {
			want = vf[kb] != 0;
			if (!want) {
				int klo = kb * a.bk, khi = min(klo + a.bk, a.Nk) - 1;
				int dlo = max(plo - khi, -(a.Nk - 1)), dhi = min(phi - klo, a.Nk - 1);
				if (dlo <= dhi) want = cs[dhi + a.Nk] - cs[dlo + a.Nk - 1] > 0;
			}
		}
		u32 bal = __ballot_sync(0xffffffffu, want);
		if (want) out[cnt + __popc(bal & ((1u << l) - 1))] = kb;
		cnt += __popc(bal);
	}
	if (l == 0) a.row_len[r] = cnt;
}
