// MInference's vertical-slash planner on the device (package
// method/minference): the probe of the last queries (probe.cuh, on the
// tensor cores), then the top-k vertical keys and slash diagonals as
// minference.Lines ranks them (probe.cuh's radix selection, ties by
// index), then, over all rows, mi_rows lists the kept visible blocks
// (minference.Blocks). The line scores differ from the CPU's float64 ones
// by about 1e-6 relative, so a line within that of the k-th may be kept
// by one side only (cuda/selftest's minferenceTieBreak bounds it).

#include "probe.cuh"

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
	__shared__ SelShared sh;
	int hg = blockIdx.x, head = p.head0 + hg, nkb = (a.Nk + a.bk - 1) / a.bk;
	if (blockIdx.y == 0) {
		const double* v = p.v + (long long)hg * a.Nk;
		int sinks = m.sinks;
		auto key = [&](int j) -> u64 {
			u64 bits = dbits(v[j]);
			return j < sinks ? ((1ull << 63) | bits) : bits + 1;
		};
		Cut r = topk_cut(key, a.Nk, m.vertical, sh);
		unsigned char* vf = m.vflag + (long long)head * nkb;
		int bk = a.bk;
		cut_mark(key, a.Nk, r, [&](int j, bool sel, int) {
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
		Cut r = topk_cut(key, no, m.slash, sh);
		int* cs = m.cs + (long long)head * (2ll * a.Nk);
		cut_mark(key, no, r, [&](int o, bool sel, int before) {
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
