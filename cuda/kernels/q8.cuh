// Helpers of the quantized attention kernel (attention_q8.cu): 1-D bulk
// copies, and the 8-bit warpgroup MMAs (sm_90a). common.cuh goes
// in front (it defines the wgmma fences and the accumulator operand
// macros).

// bulk_load copies bytes (a multiple of 16) from global src to shared dst
// with the copy engine, completing them on bar.
__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src), "r"(bytes),
	             "r"(bar)
	             : "memory");
}

// desc64 is a wgmma descriptor over the 64-byte-swizzled K-major layout
// (rows of 64 bytes, 512-byte atoms of 8 rows); wg_desc (common.cuh) is
// the 128-byte one.
__device__ __forceinline__ u64 desc64(u32 addr) {
	return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(512 >> 4) << 32) | (2ull << 62);
}

template <int N>
__device__ __forceinline__ void reg_fence(int (&a)[N][4]) {
#pragma unroll
	for (int i = 0; i < N; i++)
#pragma unroll
		for (int e = 0; e < 4; e++) asm volatile("" : "+r"(a[i][e])::"memory");
}

// wgmma_s8_* compute d (+)= A·Bᵀ, INT8 A and B from shared memory
// (K-major), int32 d; the _first forms overwrite d.
__device__ __forceinline__ void wgmma_s8_n64(int (&d)[8][4], u64 da, u64 db, int accumulate) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 " WG_R32 ", %32, %33, p;\n}\n"
	             : WG_D32("+r", d)
	             : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_s8_n64_first(int (&d)[8][4], u64 da, u64 db) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 " WG_R32 ", %32, %33, p;\n}\n"
	             : WG_D32("=r", d)
	             : "l"(da), "l"(db), "r"(0));
}
__device__ __forceinline__ void wgmma_s8_n128(int (&d)[16][4], u64 da, u64 db, int accumulate) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 " WG_R64 ", %64, %65, p;\n}\n"
	             : WG_D64("+r", d)
	             : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_s8_n128_first(int (&d)[16][4], u64 da, u64 db) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 " WG_R64 ", %64, %65, p;\n}\n"
	             : WG_D64("=r", d)
	             : "l"(da), "l"(db), "r"(0));
}
// wgmma_e4m3_n128 computes d += A·B, FP8 e4m3 A in registers (a 16×32
// fragment a thread: row lane/4 (+8 in a[1], a[3]), keys 4·(lane%4)..+3
// (+16 in a[2], a[3])) and B in shared memory, K-major, fp32 d.
__device__ __forceinline__ void wgmma_e4m3_n128(float (&d)[16][4], const u32 (&a)[4], u64 db) {
	asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " WG_R64 ", {%64,%65,%66,%67}, %68, 1, 1, 1;\n"
	             : WG_D64("+f", d)
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// e4m3x4 packs four floats to FP8 e4m3 codes, a in the low byte,
// rounding to nearest and saturating at ±448.
__device__ __forceinline__ u32 e4m3x4(float a, float b, float c, float d) {
	u32 r;
	asm("{\n.reg .b16 lo, hi;\n"
	    "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
	    "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
	    "mov.b32 %0, {lo, hi};\n}\n"
	    : "=r"(r)
	    : "f"(a), "f"(b), "f"(c), "f"(d));
	return r;
}

// P_SCALE multiplies the probabilities (in [0, 1]) before they round to
// e4m3, whose largest finite value is 448: the whole range is used, and
// probabilities down to 2^-17.8 stay representable instead of 2^-9
// (SageAttention2 §4 takes the same static scale for P̃).
#define P_SCALE 448.f

// pack_p8 rounds a tile of probabilities (accumulator layout, NJ 8-key
// column groups) times P_SCALE to the FP8 A fragments of the P̃V MMA, one
// per 32 keys. A fragment byte 4t+e (t = lane%4) of each 16 keys holds
// key 2t + (e & 1) + 8·(e >> 1), which is where quant_v (quant.cu) put
// that key in V's rows.
template <int NJ>
__device__ __forceinline__ void pack_p8(const float (&x)[NJ][4], u32 (&pc)[NJ / 4][4]) {
#pragma unroll
	for (int kk = 0; kk < NJ / 4; kk++) {
		const int j = 4 * kk;
		pc[kk][0] = e4m3x4(x[j][0] * P_SCALE, x[j][1] * P_SCALE, x[j + 1][0] * P_SCALE, x[j + 1][1] * P_SCALE);
		pc[kk][1] = e4m3x4(x[j][2] * P_SCALE, x[j][3] * P_SCALE, x[j + 1][2] * P_SCALE, x[j + 1][3] * P_SCALE);
		pc[kk][2] = e4m3x4(x[j + 2][0] * P_SCALE, x[j + 2][1] * P_SCALE, x[j + 3][0] * P_SCALE, x[j + 3][1] * P_SCALE);
		pc[kk][3] = e4m3x4(x[j + 2][2] * P_SCALE, x[j + 2][3] * P_SCALE, x[j + 3][2] * P_SCALE, x[j + 3][3] * P_SCALE);
	}
}
