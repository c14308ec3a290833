// The sink-plus-window planner on the device (package method/window): a
// block is kept when it holds a sink token or lies within Window tokens of
// the query block, as window.Planner decides on the CPU. One thread per
// plan row; the row's blocks are listed in ascending order.

extern "C" __global__ void window_plan(PlanArgs a, int sink, int win) {
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= a.rows) return;
	int nq = a.Nq, nk = a.Nk, bq = a.bq, bk = a.bk, causal = a.causal;
	int qb = r % a.q_blocks, off = nk - nq, nkb = (nk + bk - 1) / bk;
	int qlo = qb * bq + off;
	int qhi = min((qb + 1) * bq, nq) - 1 + off;
	int* out = a.lists + (long long)r * a.stride;
	int n = 0;
	for (int kb = 0; kb < nkb; kb++) {
		int klo = kb * bk, khi = min((kb + 1) * bk, nk) - 1;
		if (causal && klo > qhi) break; // no visible pair from here on
		long long hi = causal ? (long long)qhi : (long long)qhi + win;
		if (klo < sink || ((long long)khi >= (long long)qlo - win && klo <= hi)) out[n++] = kb;
	}
	a.row_len[r] = n;
}
