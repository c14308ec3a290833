// Plans made of other plans on the device (package method/auto): auto's
// per-head merge and Compose's pooled fill, both pure integer work over
// plans other device planners wrote.
//
//   merge_rows    copies the rows of the heads one sub-plan owns into the
//                 runner's lists (auto.Planner.Plan's merge), with their
//                 levels when the merged plan pools.
//   compose_rows  a binary plan's kept blocks, then the other blocks a
//                 pooled plan visits, at its level raised to at least 2
//                 (Full when the block needs causal masking): auto.Compose.
//   levels_csr    positional levels ([rows][stride], as the lists hold the
//                 blocks) compacted into the CSR order, after csr_scan.

// MergeArgs mirrors cuda.mergeArgs on the Go side: one sub-plan's rows.
struct MergeArgs {
	const int* len;             // [rows] row lengths
	const int* lists;           // [rows][stride] blocks
	const int* start;           // [rows+1] CSR row starts of lv, or null
	const unsigned char* lv;    // CSR levels, or null: every entry Full
	const int* owner;           // [Hq] the sub-plan each query head takes its rows from
	unsigned char* dst_lv;      // [rows][stride] merged levels, or null
	int idx;                    // this sub-plan's index
};

// merge_rows copies the rows of the heads whose owner is m.idx, a CTA per
// row.
extern "C" __global__ void merge_rows(const PlanArgs a, const MergeArgs m) {
	const long long row = blockIdx.x;
	if (row >= a.rows) return;
	const int h = (int)((row / a.q_blocks) % a.Hq);
	if (m.owner[h] != m.idx) return;
	const int n = m.len[row];
	const long long at = row * a.stride;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		a.lists[at + i] = m.lists[at + i];
		if (m.dst_lv) m.dst_lv[at + i] = m.lv ? m.lv[m.start[row] + i] : (unsigned char)1;
	}
	if (threadIdx.x == 0) a.row_len[row] = n;
}

// ComposeArgs mirrors cuda.composeArgs: the binary and the pooled plan.
struct ComposeArgs {
	const int *b_len, *b_lists, *b_start; // binary: lengths, blocks (ascending), CSR starts of b_lv
	const unsigned char* b_lv;            // CSR levels, or null: Full
	const int *p_len, *p_lists, *p_start; // pooled, alike
	const unsigned char* p_lv;
	unsigned char* lv;                    // [rows][stride] the composed levels
};

// in_kept reports whether block kb is one the binary row keeps: listed
// (the list ascends, so a binary search finds it) at a level other than
// Skip.
__device__ __forceinline__ bool in_kept(const int* list, const unsigned char* lv, int n, int kb) {
	int lo = 0, hi = n;
	while (lo < hi) {
		const int mid = (lo + hi) >> 1;
		if (list[mid] < kb) lo = mid + 1;
		else hi = mid;
	}
	return lo < n && list[lo] == kb && (lv == nullptr || lv[lo] != 0);
}

// compose_rows writes each composed row, a warp per row, as
// auto.Compose.Plan does (PSA §3.2, multi-level masks): first the binary
// plan's blocks at their levels (Skip entries dropped), then, in the
// pooled plan's order, each block it visits that the binary plan does not
// keep, at max(level, 2), or Full when the block needs causal masking.
extern "C" __global__ void compose_rows(const PlanArgs a, const ComposeArgs m) {
	const int lane = threadIdx.x & 31;
	const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	if (row >= a.rows) return;
	const long long at = row * a.stride;
	const int bn = m.b_len[row], pn = m.p_len[row];
	const int* bl = m.b_lists + at;
	const int* pl = m.p_lists + at;
	const unsigned char* blv = m.b_lv ? m.b_lv + m.b_start[row] : nullptr;
	const unsigned char* plv = m.p_lv ? m.p_lv + m.p_start[row] : nullptr;
	int cnt = 0;
	for (int base = 0; base < bn; base += 32) {
		const int i = base + lane;
		const int l = i < bn ? (blv ? blv[i] : 1) : 0;
		const unsigned f = __ballot_sync(0xffffffffu, l != 0);
		if (l != 0) {
			const int pos = cnt + __popc(f & ((1u << lane) - 1u));
			a.lists[at + pos] = bl[i];
			m.lv[at + pos] = (unsigned char)l;
		}
		cnt += __popc(f);
	}
	// plan.Plan.BlockVisibility: the causal offset puts the queries last.
	const int off = a.Nk - a.Nq, qb = (int)(row % a.q_blocks);
	const int qlo = qb * a.bq, qhi = min(qlo + a.bq, a.Nq);
	for (int base = 0; base < pn; base += 32) {
		const int i = base + lane;
		int l = 0, kb = 0;
		if (i < pn) {
			kb = pl[i];
			l = plv ? plv[i] : 1;
			if (l != 0 && in_kept(bl, blv, bn, kb)) l = 0;
			if (l != 0) {
				l = max(l, 2);
				if (a.causal) {
					const int klo = kb * a.bk, khi = min(klo + a.bk, a.Nk);
					if (klo <= qhi - 1 + off && khi - 1 > qlo + off) l = 1;
				}
			}
		}
		const unsigned f = __ballot_sync(0xffffffffu, l != 0);
		if (l != 0) {
			const int pos = cnt + __popc(f & ((1u << lane) - 1u));
			a.lists[at + pos] = kb;
			m.lv[at + pos] = (unsigned char)l;
		}
		cnt += __popc(f);
	}
	if (lane == 0) a.row_len[row] = cnt;
}

// levels_csr copies each row's positional levels to its CSR entries, a CTA
// per row.
extern "C" __global__ void levels_csr(const PlanArgs a, const unsigned char* pos, const int* row_start, unsigned char* level) {
	const long long row = blockIdx.x;
	if (row >= a.rows) return;
	const int lo = row_start[row], n = row_start[row + 1] - lo;
	for (int i = threadIdx.x; i < n; i += blockDim.x) level[lo + i] = pos[row * a.stride + i];
}
