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
// launch, for plans of at most cuda.csrRowsMax rows: one block of
// CSR_ROWS_THREADS threads per CSR_ROWS_WARPS consecutive rows, a warp a
// row. Each block sums the lengths of every row before its own (16-byte
// loads; so that the blocks need not wait for each other), places its
// rows, copies their lists to kv_block, and, when order is not null,
// ranks each row among its head's q_blocks rows, longest first, rows of
// equal length in plan order. The last block writes row_start[rows].
// row_len must be 16-byte aligned.
#define CSR_ROWS_WARPS 8
#define CSR_ROWS_THREADS (CSR_ROWS_WARPS * 32)
extern "C" __global__ void __launch_bounds__(CSR_ROWS_THREADS)
    csr_rows(const int* row_len, const int* lists, int* row_start, int* kv_block, int* order, int rows, int q_blocks, int stride) {
	__shared__ int part[CSR_ROWS_WARPS], len[CSR_ROWS_WARPS];
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, r0 = blockIdx.x * CSR_ROWS_WARPS;
	// Rows [0, r0): r0 is a multiple of 8, so whole int4s.
	int before = 0;
	const int4* v4 = (const int4*)row_len;
	for (int i = tid; i < r0 / 4; i += CSR_ROWS_THREADS) {
		const int4 x = v4[i];
		before += x.x + x.y + x.z + x.w;
	}
	before = __reduce_add_sync(0xffffffffu, before);
	const int r = r0 + warp, n = r < rows ? row_len[r] : 0;
	if (lane == 0) {
		part[warp] = before;
		len[warp] = n;
	}
	__syncthreads();
	int at = 0;
#pragma unroll
	for (int w = 0; w < CSR_ROWS_WARPS; w++) at += part[w] + (w < warp ? len[w] : 0);
	if (r >= rows) return;
	if (lane == 0) {
		row_start[r] = at;
		if (r == rows - 1) row_start[rows] = at + n;
	}
	const int* src = lists + (long long)r * stride;
	for (int j = lane; j < n; j += 32) kv_block[at + j] = src[j];
	if (order != nullptr) {
		const int base = r - r % q_blocks, i = r - base;
		int rank = 0;
		for (int j = lane; j < q_blocks; j += 32) {
			const int lj = row_len[base + j];
			rank += (lj > n) || (lj == n && j < i);
		}
		rank = __reduce_add_sync(0xffffffffu, rank);
		if (lane == 0) order[base + rank] = r;
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
