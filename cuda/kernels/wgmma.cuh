// Hopper warpgroup MMA (sm_90a) wrappers, shared by the attention kernels
// (common.cuh takes this file in under WGMMA) and the block-mass planner
// kernel (block_mass.cuh under BM_WG). The includer defines WG_T, the
// operand type's PTX name ("bf16" or "f16"), and the u32 and u64 types.
//
// Operands in shared memory are described
// by 64-bit descriptors over the 128-byte-swizzled canonical layout: rows
// of 64 elements (128 bytes), chunk c of row r at chunk c ^ (r & 7), in
// 1024-byte atoms of 8 rows; a 128-wide head dimension is two such column
// blocks one after the other.
__device__ __forceinline__ u64 wg_desc(u32 addr, u32 lbo, u32 sbo) {
	return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo & 0x3FFFF) >> 4) << 16) | ((u64)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
// reg_fence pins registers at this point of the instruction stream (an
// empty asm that reads and redefines them, as CUTLASS's
// warpgroup_fence_operand does). The compiler does not know that wgmma
// reads its register operands and writes its accumulators asynchronously,
// until the wait that retires it: without these pins it moves arithmetic
// on those registers across the wait, or reuses the A-operand registers
// of an MMA in flight for the next P̃, and ptxas then serializes the MMAs
// (warning C7513).
template <int N>
__device__ __forceinline__ void reg_fence(float (&a)[N][4]) {
#pragma unroll
	for (int i = 0; i < N; i++)
#pragma unroll
		for (int e = 0; e < 4; e++) asm volatile("" : "+f"(a[i][e])::"memory");
}
template <int N>
__device__ __forceinline__ void reg_fence(u32 (&a)[N][4]) {
#pragma unroll
	for (int i = 0; i < N; i++)
#pragma unroll
		for (int e = 0; e < 4; e++) asm volatile("" : "+r"(a[i][e])::"memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// The accumulator operands of an m64nNk16 wgmma: N/2 floats a thread, as
// d[N/8][4], with constraint c ("+f" to accumulate, "=f" to overwrite).
#define WG_D4(c, d, i) c(d[i][0]), c(d[i][1]), c(d[i][2]), c(d[i][3])
#define WG_D32(c, d) WG_D4(c, d, 0), WG_D4(c, d, 1), WG_D4(c, d, 2), WG_D4(c, d, 3), WG_D4(c, d, 4), WG_D4(c, d, 5), WG_D4(c, d, 6), WG_D4(c, d, 7)
#define WG_D64(c, d) WG_D32(c, d), WG_D4(c, d, 8), WG_D4(c, d, 9), WG_D4(c, d, 10), WG_D4(c, d, 11), WG_D4(c, d, 12), WG_D4(c, d, 13), WG_D4(c, d, 14), WG_D4(c, d, 15)
#define WG_R32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define WG_R64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"

// wgmma_ss_* compute d (+)= A·Bᵀ with A and B in shared memory (K-major):
// accumulating when accumulate is non-zero. wgmma_ss_*_first overwrite d
// and do not read it, so that d is not live before the first k-step.
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[8][4], u64 da, u64 db, int accumulate) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n64k16.f32." WG_T "." WG_T " " WG_R32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
	             : WG_D32("+f", d)
	             : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[16][4], u64 da, u64 db, int accumulate) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n128k16.f32." WG_T "." WG_T " " WG_R64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
	             : WG_D64("+f", d)
	             : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_ss_n64_first(float (&d)[8][4], u64 da, u64 db) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n64k16.f32." WG_T "." WG_T " " WG_R32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
	             : WG_D32("=f", d)
	             : "l"(da), "l"(db), "r"(0));
}
__device__ __forceinline__ void wgmma_ss_n128_first(float (&d)[16][4], u64 da, u64 db) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n128k16.f32." WG_T "." WG_T " " WG_R64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
	             : WG_D64("=f", d)
	             : "l"(da), "l"(db), "r"(0));
}
// wgmma_rs_* compute d += A·B with A in registers (a 16×16 fragment a
// thread) and B in shared memory, transposed (MN-major, as V is stored).
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[8][4], const u32 (&a)[4], u64 db) {
	asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." WG_T "." WG_T " " WG_R32 ", {%32,%33,%34,%35}, %36, 1, 1, 1, 1;\n"
	             : WG_D32("+f", d)
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[16][4], const u32 (&a)[4], u64 db) {
	asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." WG_T "." WG_T " " WG_R64 ", {%64,%65,%66,%67}, %68, 1, 1, 1, 1;\n"
	             : WG_D64("+f", d)
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
