// The selection half of bm_mass (block_mass.cuh, which includes this
// before the kernel): each segment's block masses sorted heaviest first,
// the blocks a rule keeps flagged, and the flagged blocks written to the
// plan rows.

// precedes orders blocks for selection: heavier first, then lower index
// (the CPU's stable sort). Masses are ≥ 0, so their bits order as they do.
__device__ __forceinline__ bool precedes(u64 ka, int ia, u64 kb, int ib) { return ka > kb || (ka == kb && ia < ib); }

// sort_desc sorts skey/sidx[0..n2) (n2 a power of two) by precedes, with
// every thread of the block. Each thread takes pair p of a stage: elements
// i = p + (p with the bits below j cleared), whose bit j is clear, and
// i + j. For strides j ≤ 32 a warp's pairs lie within its own 64
// elements (per BM_T pairs), so between two such stages a warp waits only
// for itself.
__device__ __forceinline__ void sort_desc(u64* skey, int* sidx, int n2, int tid) {
	const int half = n2 >> 1;
	for (int kq = 2; kq <= n2; kq <<= 1) {
		for (int j = kq >> 1; j > 0; j >>= 1) {
			for (int p = tid; p < half; p += BM_T) {
				const int i = p + (p & ~(j - 1)), ixj = i + j;
				const bool up = (i & kq) == 0;
				const u64 ki = skey[i], kx = skey[ixj];
				const int ii = sidx[i], ix = sidx[ixj];
				if (precedes(kx, ix, ki, ii) == up) {
					skey[i] = kx;
					skey[ixj] = ki;
					sidx[i] = ix;
					sidx[ixj] = ii;
				}
			}
			const int next = j > 1 ? j >> 1 : kq; // the next stage's stride
			if (j >= 64 || next >= 64 || (j == 1 && kq == n2))
				__syncthreads();
			else
				__syncwarp();
		}
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

// bm_select flags the blocks of one segment (masses ms[0..nvis)) by the
// rule: forced blocks (XAttention, causal: the first and the last visible)
// and then, heaviest first, the others until the kept mass reaches
// thresh × the total (XAttention §2.2 as xattn.Select; UniSparse Eq. 6 as
// unisparse's topP, which keeps nothing when the total is 0 and
// everything when Top-P ≥ 1), and block ex besides (UniSparse's outlier
// query; −1: none), which counts toward nothing. Sums are float64 in a
// fixed order; they differ from the CPU's only in rounding.
__device__ __forceinline__ void bm_select(const PlanArgs& a, const BmArgs& m, const double* ms, int nvis, int ex, unsigned char* smem) {
	__shared__ double wpart[BM_T / 32];
	__shared__ double stot, shave;
	__shared__ int scount;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	int n2 = 1;
	while (n2 < nvis) n2 <<= 1;
	u64* skey = (u64*)smem;
	int* sidx = (int*)(skey + n2);
	unsigned char* flag = (unsigned char*)(sidx + n2);
	const bool xrule = m.rule == 0, forcing = xrule && a.causal;
	// The total, in a fixed order.
	double p = 0.0;
	for (int kb = tid; kb < nvis; kb += BM_T) p += ms[kb];
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) p += __shfl_xor_sync(0xffffffffu, p, o);
	if (lane == 0) wpart[warp] = p;
	__syncthreads();
	if (tid == 0) {
		double t = 0.0;
		for (int x = 0; x < BM_T / 32; x++) t += wpart[x];
		stot = t;
		double h = 0.0;
		if (forcing && nvis > 0) h = ms[0] + (nvis > 1 ? ms[nvis - 1] : 0.0);
		shave = h;
		scount = n2;
	}
	__syncthreads();
	const double total = stot;
	if (!xrule && (total == 0.0 || m.thresh >= 1.0)) {
		for (int kb = tid; kb < nvis; kb += BM_T) flag[kb] = total != 0.0 || kb == ex;
		__syncthreads();
		return;
	}
	auto forced = [&](int kb) { return forcing && (kb == 0 || kb == nvis - 1); };
	for (int i = tid; i < n2; i += BM_T) {
		skey[i] = i < nvis && !forced(i) ? (u64)__double_as_longlong(ms[i]) : 0ull;
		sidx[i] = i < nvis ? i : 0x7fffffff;
	}
	__syncthreads();
	sort_desc(skey, sidx, n2, tid);
	// The kept count is the first position s at which the forced mass plus
	// the sorted masses before s reach thresh × total.
	const double need = m.thresh * total;
	const int span = (n2 + BM_T - 1) / BM_T, lo = tid * span, hi = min(lo + span, n2);
	double loc = 0.0;
	for (int s = lo; s < hi; s++) loc += __longlong_as_double((long long)skey[s]);
	double inc = loc;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		double y = __shfl_up_sync(0xffffffffu, inc, o);
		if (lane >= o) inc += y;
	}
	__syncthreads();
	if (lane == 31) wpart[warp] = inc;
	__syncthreads();
	double c = shave + (inc - loc);
	for (int x = 0; x < warp; x++) c += wpart[x];
	for (int s = lo; s < hi; s++) {
		if (c >= need) {
			atomicMin(&scount, s);
			break;
		}
		c += __longlong_as_double((long long)skey[s]);
	}
	__syncthreads();
	const int count = scount;
	for (int s = tid; s < n2; s += BM_T) {
		int kb = sidx[s];
		if (kb < nvis) flag[kb] = s < count || forced(kb) || kb == ex;
	}
	__syncthreads();
}
