// Runtime kernels of the device plan/run path: the dense plan, the CSR
// assembly every device planner ends with, the launch order of the rows,
// and the staging of inputs the attention kernels cannot read in place.
//
// A device planner writes, for each plan row r, its length row_len[r] and
// its KV blocks in ascending order at lists[r·stride ...]. csr_scan and
// csr_compact turn that into the plan's CSR arrays (row_start, kv_block),
// which the attention kernels read.

// dense_plan lists every causally visible block of every row.
extern "C" __global__ void dense_plan(PlanArgs a) {
	int r = blockIdx.x;
	if (r >= a.rows) return;
	int vis = visible_blocks(a, r % a.q_blocks);
	for (int j = threadIdx.x; j < vis; j += blockDim.x) a.lists[(long long)r * a.stride + j] = j;
	if (threadIdx.x == 0) a.row_len[r] = vis;
}

// csr_scan writes row_start[0..rows] = exclusive prefix sums of row_len,
// in one block of 1024 threads, chunk by chunk.
extern "C" __global__ void csr_scan(const int* row_len, int* row_start, int rows) {
	__shared__ long long buf[1024];
	__shared__ long long carry;
	if (threadIdx.x == 0) carry = 0;
	__syncthreads();
	for (int base = 0; base < rows; base += 1024) {
		int i = base + threadIdx.x;
		long long x = i < rows ? row_len[i] : 0;
		buf[threadIdx.x] = x;
		__syncthreads();
		for (int o = 1; o < 1024; o <<= 1) {
			long long y = threadIdx.x >= o ? buf[threadIdx.x - o] : 0;
			__syncthreads();
			buf[threadIdx.x] += y;
			__syncthreads();
		}
		if (i < rows) row_start[i] = (int)(carry + buf[threadIdx.x] - x);
		__syncthreads();
		if (threadIdx.x == 1023) carry += buf[1023];
		__syncthreads();
	}
	if (threadIdx.x == 0) row_start[rows] = (int)carry;
}

// csr_compact copies each row's list to its place in kv_block.
extern "C" __global__ void csr_compact(const int* row_len, const int* lists, const int* row_start, int* kv_block, int rows, int stride) {
	int r = blockIdx.x;
	if (r >= rows) return;
	int n = row_len[r], at = row_start[r];
	const int* src = lists + (long long)r * stride;
	for (int j = threadIdx.x; j < n; j += blockDim.x) kv_block[at + j] = src[j];
}

// longest_first orders the rows of each head (a window of q_blocks
// consecutive rows) by decreasing length, rows of equal length in plan
// order, as cuda.longestFirst does on the host. One block per head.
extern "C" __global__ void longest_first(const int* row_start, int* order, int q_blocks) {
	int base = blockIdx.x * q_blocks;
	for (int i = threadIdx.x; i < q_blocks; i += blockDim.x) {
		int li = row_start[base + i + 1] - row_start[base + i];
		int rank = 0;
		for (int j = 0; j < q_blocks; j++) {
			int lj = row_start[base + j + 1] - row_start[base + j];
			rank += (lj > li) || (lj == li && j < i);
		}
		order[base + rank] = base + i;
	}
}

// csr_rows does what csr_scan, csr_compact and longest_first do, in one
// launch, for plans of at most cuda.csrRowsMax rows made of whole heads
// (rows is a multiple of q_blocks): one block of CSR_ROWS_THREADS threads
// per CSR_ROWS_ROWS consecutive rows, a half warp a row. Each block sums
// the lengths of every row before its own (16-byte loads; so that the
// blocks need not wait for each other), places its rows, copies their
// lists to kv_block, and, when order is not null, ranks each row among
// its head's q_blocks rows, longest first, rows of equal length in plan
// order. The last row's half warp writes row_start[rows]. row_len must be
// 16-byte aligned, and lists must hold stride entries for every row: a
// lane reads its first CSR_ROWS_SPEC entries (up to stride) before it
// knows the row's length and drops those past it. On sm_90 it executes
// griddepcontrol.wait before its first memory access, so that it may be a
// programmatic dependent launch of the planner's last kernel
// (runner_plan.go; a no-op for a plain launch).
//
// At 8K the kernel is latency, so it keeps the dependent steps few: each
// thread issues its row's length, its first entries, its share of the
// earlier lengths and its share of the lengths of the block's heads (the
// ranks read these from shared memory when they fit CSR_ROWS_WIN, else
// from row_len) at once; then one barrier, and the stores. Rows longer
// than 16·CSR_ROWS_SPEC entries load the rest CSR_ROWS_BATCH entries a
// lane at a time. At 32 registers four blocks fit an SM, so the 16384
// rows of csrRowsMax (512 blocks) run in one wave on 132 SMs.
#define CSR_ROWS_ROWS 32                        // rows a block
#define CSR_ROWS_THREADS (CSR_ROWS_ROWS * 16)   // a half warp a row
#define CSR_ROWS_WARPS (CSR_ROWS_THREADS / 32)
#define CSR_ROWS_SPEC 8                         // list entries a lane loads before its row's length is known
#define CSR_ROWS_BATCH 8                        // list entries a lane loads at once past them
#define CSR_ROWS_WIN 2048                       // lengths of the block's heads kept in shared memory
#define CSR_ROWS_PRE 4                          // 16-byte loads of earlier lengths a thread has in flight
#define CSR_ROWS_WLOADS (CSR_ROWS_WIN / CSR_ROWS_THREADS)
static_assert(CSR_ROWS_ROWS == 32, "a lane of each warp reads one row's length in the block (len[lane])");
static_assert(CSR_ROWS_WIN % CSR_ROWS_THREADS == 0, "every thread loads CSR_ROWS_WLOADS window lengths");
// row_len and lists are not __restrict__: their loads must not take the
// read-only (nc) path, which assumes data unchanged for the kernel's
// lifetime, while a dependent launch overlaps the planner's last writes.
extern "C" __global__ void __launch_bounds__(CSR_ROWS_THREADS, 4)
    csr_rows(const int* row_len, const int* lists, int* __restrict__ row_start, int* __restrict__ kv_block, int* __restrict__ order, int rows, int q_blocks, int stride) {
	__shared__ int part[CSR_ROWS_WARPS], len[CSR_ROWS_ROWS], win[CSR_ROWS_WIN];
#if __CUDA_ARCH__ >= 900
	// Launched as a programmatic dependent (cuda/driver LaunchDependent),
	// the block may start before the planner's last kernel has finished:
	// wait for it before the first access to memory. A no-op otherwise.
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
	const unsigned full = 0xffffffffu;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, half = lane >> 4, hl = lane & 15;
	const int r0 = blockIdx.x * CSR_ROWS_ROWS, hw = tid >> 4, r = r0 + hw;
	const bool live = r < rows;
	// The block's heads: rows [w0, w1), in shared memory when they fit.
	const int last = min(rows, r0 + CSR_ROWS_ROWS) - 1;
	const int w0 = r0 - r0 % q_blocks, w1 = min(rows, last - last % q_blocks + q_blocks);
	const bool inwin = order != nullptr && w1 - w0 <= CSR_ROWS_WIN;
	// Every load that needs no other: the row's length (a broadcast), its
	// first entries, the window, the lengths before r0.
	const int n = live ? row_len[r] : 0;
	const int* src = lists + (long long)r * stride;
	int spec[CSR_ROWS_SPEC];
#pragma unroll
	for (int k = 0; k < CSR_ROWS_SPEC; k++) {
		const int j = hl + 16 * k;
		spec[k] = live && j < stride ? src[j] : 0;
	}
	int wv[CSR_ROWS_WLOADS];
#pragma unroll
	for (int k = 0; k < CSR_ROWS_WLOADS; k++) {
		const int i = w0 + tid + k * CSR_ROWS_THREADS;
		wv[k] = inwin && i < w1 ? row_len[i] : 0;
	}
	// Rows [0, r0): r0 is a multiple of 32, so whole int4s.
	int before = 0;
	const int4* v4 = (const int4*)row_len;
	const int n4 = r0 >> 2;
#pragma unroll 1
	for (int b = 0; b < n4; b += CSR_ROWS_PRE * CSR_ROWS_THREADS) {
		int4 x[CSR_ROWS_PRE];
#pragma unroll
		for (int k = 0; k < CSR_ROWS_PRE; k++) {
			const int i = b + tid + k * CSR_ROWS_THREADS;
			x[k] = i < n4 ? v4[i] : make_int4(0, 0, 0, 0);
		}
#pragma unroll
		for (int k = 0; k < CSR_ROWS_PRE; k++) before += x[k].x + x[k].y + x[k].z + x[k].w;
	}
	before = __reduce_add_sync(full, before);
	if (lane == 0) part[warp] = before;
	if (hl == 0) len[hw] = n;
#pragma unroll
	for (int k = 0; k < CSR_ROWS_WLOADS; k++)
		if (inwin && w0 + tid + k * CSR_ROWS_THREADS < w1) win[tid + k * CSR_ROWS_THREADS] = wv[k];
	__syncthreads();
	// The warp's first row (2·warp in the block) starts after every
	// earlier row; its second after the first. No thread has left yet:
	// the reductions below take the full warp.
	const int c = (lane < CSR_ROWS_WARPS ? part[lane] : 0) + (lane < 2 * warp ? len[lane] : 0);
	const int at = __reduce_add_sync(full, c) + (half ? len[2 * warp] : 0);
	int* dst = kv_block + at;
	if (live) {
		if (hl == 0) {
			row_start[r] = at;
			if (r == rows - 1) row_start[rows] = at + n;
		}
#pragma unroll
		for (int k = 0; k < CSR_ROWS_SPEC; k++) {
			const int j = hl + 16 * k;
			if (j < n) dst[j] = spec[k];
		}
	}
	if (order != nullptr) {
		const int base = r - r % q_blocks, i = r - base;
		int rank = 0;
		if (live && inwin) {
			const int* h = win + (base - w0);
			for (int j = hl; j < q_blocks; j += 16) {
				const int lj = h[j];
				rank += (lj > n) || (lj == n && j < i);
			}
		} else if (live) {
			for (int j = hl; j < q_blocks; j += 16) {
				const int lj = row_len[base + j];
				rank += (lj > n) || (lj == n && j < i);
			}
		}
		const int lo = __reduce_add_sync(full, half ? 0 : rank), hi = __reduce_add_sync(full, half ? rank : 0);
		if (live && hl == 0) order[base + (half ? hi : lo)] = r;
	}
	if (!live) return;
	for (int j0 = 16 * CSR_ROWS_SPEC; j0 < n; j0 += 16 * CSR_ROWS_BATCH) {
		int v[CSR_ROWS_BATCH];
#pragma unroll
		for (int k = 0; k < CSR_ROWS_BATCH; k++) {
			const int j = j0 + hl + 16 * k;
			v[k] = j < n ? src[j] : 0;
		}
#pragma unroll
		for (int k = 0; k < CSR_ROWS_BATCH; k++) {
			const int j = j0 + hl + 16 * k;
			if (j < n) dst[j] = v[k];
		}
	}
}

__device__ __forceinline__ u16 f32_to_bf16(float f) {
	u32 u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40); // NaN stays NaN
	u += 0x7fffu + ((u >> 16) & 1);                                        // round to nearest even
	return (u16)(u >> 16);
}

__device__ __forceinline__ u16 f32_to_f16(float f) {
	u16 h;
	asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h) : "f"(f));
	return h;
}

// stage16 copies a strided tensor of any input type into a contiguous
// BHND 16-bit one (bfloat16, or float16 when to_f16), zero-padding each
// row from D to head_dim columns: the form every attention kernel reads.
// One block per (b, h, n) row group of 8 rows.
extern "C" __global__ void stage16(View src, u16* dst, int head_dim, int to_f16) {
	long long rows = (long long)src.B * src.H * src.N;
	for (long long r = (long long)blockIdx.x * 8 + threadIdx.y; r < rows; r += (long long)gridDim.x * 8) {
		int n = (int)(r % src.N);
		int h = (int)((r / src.N) % src.H);
		int b = (int)(r / ((long long)src.N * src.H));
		for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
			float x = d < src.D ? load(src, b, h, n, d) : 0.0f;
			dst[r * head_dim + d] = to_f16 ? f32_to_f16(x) : f32_to_bf16(x);
		}
	}
}

// l2_read reads n16 16-byte words from p past L1 (ld.global.cg), so that
// L2 ends up holding clean lines of p: after Benchmark's overwrite of its
// scratch, a read of scratch the overwrite has already evicted leaves no
// dirty line for the timed kernel to write back (BenchmarkPlanCold). sink
// is written only when the words' xor has one value, which the compiler
// cannot rule out.
extern "C" __global__ void l2_read(const uint4* p, long long n16, unsigned* sink) {
	unsigned x = 0;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x) {
		const uint4 v = __ldcg(p + i);
		x ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (x == 0x9e3779b9u) *sink = x;
}
