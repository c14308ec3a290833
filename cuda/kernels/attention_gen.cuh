// Definitions shared by the two gathering kernels (attention_gen.cu,
// mma.sync for sm_80 and newer, and attention_gen_ws.cu, warp-specialized
// wgmma for sm_90a): the parameter block, the slot markers and the limit
// on staged plan entries. The Go side puts this file between common.cuh
// and the kernel.

#define MAX_LIST 2048       // plan entries staged per row (cuda.maxList)
#define TOK_NONE 0x7fffffff // an empty slot: always masked
#define TOK_ANY (-1)        // a pooled slot: never masked

// GenParams mirrors cuda.genParams on the Go side, field for field.
struct GenParams {
	Params p;
	const unsigned char* level; // per plan entry (LEVELS)
	const u16* pk;              // pooled keys, HEAD_DIM elements a row
	const u16* pv;              // pooled values
	// Level h's entry t of block kb of KV head (b, kvh) is pyramid row
	// lvl_row[h] + ((b·Hkv + kvh)·k_blocks + kb)·lvl_width[h] + t.
	long long lvl_row[9];
	int lvl_width[9];
	int k_blocks;
	const int* q_order;  // [B·Hq·Nq] query token at each position, or null
	const int* kv_order; // key orders, concatenated
	const int* kv_start; // order o is kv_order[kv_start[o] .. kv_start[o+1])
	const int* row_kv;   // key order of each plan row (−1 natural), or null
	float* st_m;         // [B·Hq·Nq] row maxima in log2 units
	float* st_l;         // [B·Hq·Nq] softmax sums
	float* st_acc;       // [B·Hq·Nq·Dv] unnormalized outputs
	const int* row_after; // per-row entries before the stop rule applies, or null
	int after;
	float tau;
	u64* tickets; // the persistent grid's row ticket counter for this pass
};

// warp_scan is the inclusive prefix sum of x over the warp's lanes (all
// 32 active), lane being this thread's.
__device__ __forceinline__ int warp_scan(int x, int lane) {
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		const int y = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o) x += y;
	}
	return x;
}

__device__ __forceinline__ float lg2(float x) {
	float y;
	asm("lg2.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}

