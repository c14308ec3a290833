// Definitions shared by the attention kernels (attention.cu, the
// FlashAttention-2-style kernel for sm_80 and newer, and attention_ws.cu,
// the warp-specialized Hopper kernel): the parameter block, inline-PTX
// wrappers for the tensor-core, copy and warp instructions, and on Hopper
// the warpgroup-MMA wrappers. The Go side compiles each kernel with this
// file in front of it; it needs IS_BF16 and WGMMA defined.

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Params mirrors cuda.kernelParams on the Go side, field for field.
struct Params {
	const u16* q;
	const u16* k;
	const u16* v;
	float* o; // float32, or u16 bits of the input type under OUT16
	const int* row_start;
	const int* kv_block;
	u64* counters; // [0] QK blocks, [1] PV blocks, [2] PV row groups in full q-blocks, [3] in the last partial q-block, [4] row tickets drawn (attention_ws.cu)
	long long q_sb, q_sh, q_sn;
	long long k_sb, k_sh, k_sn;
	long long v_sb, v_sh, v_sn;
	long long o_sb, o_sh, o_sn;
	int B, Hq, Hkv, Nq, Nk, Dv;
	int q_blocks;
	int block_k;
	int causal;
	int filter;
	int row_group;
	float lambda_log2; // λ·log2(e)
	float scale_log2;  // softmax scale·log2(e)
	int split; // CTAs per plan query block (BLOCK_Q = plan BlockQ / split)
	const int* order; // launch order of the plan rows (longest first), or null
	const float* head_lambda_log2; // λ·log2(e) per query head (a tuned profile), or null: lambda_log2 for all
};

__device__ __forceinline__ u32 smem_addr(const void* p) {
	u32 r;
	asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
	return r;
}

__device__ __forceinline__ void cp_async16(u32 dst, const void* src, int bytes) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }
__device__ __forceinline__ void cp_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::); }

__device__ __forceinline__ void ldsm_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
	             : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
	             : "r"(addr));
}

__device__ __forceinline__ void mma16816(float* d, const u32* a, u32 b0, u32 b1) {
#if IS_BF16
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#else
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#endif
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// pack2 rounds (lo, hi) to the input type, lo in the low half.
__device__ __forceinline__ u32 pack2(float lo, float hi) {
	u32 r;
#if IS_BF16
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
	asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
	return r;
}

// bar_and and bar_or are named barrier id over n threads (bar.red) that
// return whether pred holds in all of them, or in any.
#define BAR_RED(NAME, OP)                                                   \
	__device__ __forceinline__ bool NAME(int id, int n, bool pred) {       \
		u32 r;                                                             \
		asm volatile(                                                      \
		    "{\n.reg .pred p, q;\n"                                        \
		    "setp.ne.u32 p, %1, 0;\n"                                      \
		    "bar.red." OP ".pred q, %2, %3, p;\n"                          \
		    "selp.u32 %0, 1, 0, q;\n}\n"                                    \
		    : "=r"(r)                                                      \
		    : "r"((u32)pred), "r"(id), "r"(n)                              \
		    : "memory");                                                   \
		return r != 0;                                                     \
	}
BAR_RED(bar_and, "and")
BAR_RED(bar_or, "or")
#undef BAR_RED

__device__ __forceinline__ float ex2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}
__device__ __forceinline__ float shfl_xor(float x, int m) {
	float y;
	asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\n" : "=f"(y) : "f"(x), "r"(m));
	return y;
}
__device__ __forceinline__ float fmax_(float a, float b) { return a > b ? a : b; }
__device__ __forceinline__ float fma_(float a, float b, float c) {
	float d;
	asm("fma.rn.f32 %0, %1, %2, %3;\n" : "=f"(d) : "f"(a), "f"(b), "f"(c));
	return d;
}
__device__ __forceinline__ bool any_sync(bool pred) {
	u32 r;
	asm volatile("{ .reg .pred p; setp.ne.u32 p, %1, 0; vote.sync.any.pred p, p, 0xffffffff; selp.u32 %0, 1, 0, p; }\n"
	             : "=r"(r)
	             : "r"((u32)pred));
	return r != 0;
}
__device__ __forceinline__ void atomic_add_u64(u64* p, u64 v) {
	asm volatile("red.global.add.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ float neg_inf() {
	float f;
	asm("mov.b32 %0, 0xff800000;\n" : "=f"(f));
	return f;
}
#define NEG_INF (neg_inf())
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
struct alignas(8) F2 {
	float x, y;
};


#if WGMMA
#if IS_BF16
#define WG_T "bf16"
#else
#define WG_T "f16"
#endif
#include "wgmma.cuh"
// mbarriers (sm_90): init, arrive, arrive with a transaction count, and
// the wait for a phase's parity.
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// mbar_expect arrives on bar and adds bytes to the transaction count the
// phase waits for.
__device__ __forceinline__ void mbar_expect(u32 bar, u32 bytes) {
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// mbar_wait returns once the phase of bar with the given parity completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
	asm volatile(
	    "{\n.reg .pred done;\n"
	    "WAIT:\n"
	    "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
	    "@!done bra WAIT;\n}\n" ::"r"(bar),
	    "r"(parity)
	    : "memory");
}
#endif

// mask_tile sets to −∞ the logits of a tile of keys starting at k0 that
// this thread's two rows (row0 + lane/4 and row0 + lane/4 + 8, in the MMA
// accumulator layout) may not see: keys at or past Nk and, under causal
// masking, keys after the query (queries are the last Nq of the Nk tokens:
// off = Nk − Nq). One bound per row and one compare per logit; callers
// branch around it once per tile, so unmasked tiles pay nothing.
template <int NJ>
__device__ __forceinline__ void mask_tile(float (&s)[NJ][4], int k0, int row0, int lane, int Nk, int causal, int off) {
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		const int row = row0 + (lane >> 2) + 8 * hf;
		const int end = causal ? imin(Nk, row + off + 1) : Nk; // first key the row may not see
		const int lim = end - k0 - 2 * (lane & 3);
#pragma unroll
		for (int j = 0; j < NJ; j++) {
			if (j * 8 >= lim) s[j][2 * hf] = NEG_INF;
			if (j * 8 + 1 >= lim) s[j][2 * hf + 1] = NEG_INF;
		}
	}
}

// online_softmax folds one tile of logits x (this thread's two rows, in
// the MMA accumulator layout, masked) into the running row maxima m (in
// log2 units) and sums ℓ, replacing x by exp2(x·scale_log2 − m): the
// FlashAttention-2 recurrence (Dao 2023, Alg. 1). alphas are the factors
// by which the rows' O must be rescaled; it returns whether any differs
// from 1. A row with no visible key so far keeps m = −∞ and gets zeros.
// mlocs receives each row's largest logit of the tile (log2 units), which
// SpargeAttn's λ filter compares with the new maximum.
template <int NJ>
__device__ __forceinline__ bool online_softmax(float (&x)[NJ][4], float (&m)[2], float (&l)[2], float (&alphas)[2], float scale_log2, float (&mlocs)[2]) {
	bool rescale = false;
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float mloc = NEG_INF;
#pragma unroll
		for (int j = 0; j < NJ; j++) mloc = fmax_(mloc, fmax_(x[j][2 * hf], x[j][2 * hf + 1]));
		mloc = fmax_(mloc, shfl_xor(mloc, 1));
		mloc = fmax_(mloc, shfl_xor(mloc, 2));
		mloc *= scale_log2; // the scale is positive: max commutes with it
		mlocs[hf] = mloc;
		const float mnew = fmax_(m[hf], mloc);
		const float muse = mnew == NEG_INF ? 0.f : mnew;
		const float alpha = ex2(m[hf] - muse);
		float sum = 0.f;
#pragma unroll
		for (int j = 0; j < NJ; j++) {
			const float p0 = ex2(fma_(x[j][2 * hf], scale_log2, -muse));
			const float p1 = ex2(fma_(x[j][2 * hf + 1], scale_log2, -muse));
			x[j][2 * hf] = p0, x[j][2 * hf + 1] = p1;
			sum += p0 + p1;
		}
		l[hf] = l[hf] * alpha + sum;
		m[hf] = mnew;
		alphas[hf] = alpha;
		rescale |= alpha != 1.f;
	}
	return rescale;
}
template <int NJ>
__device__ __forceinline__ bool online_softmax(float (&x)[NJ][4], float (&m)[2], float (&l)[2], float (&alphas)[2], float scale_log2) {
	float mlocs[2];
	return online_softmax(x, m, l, alphas, scale_log2, mlocs);
}

// pack_tile rounds a tile of probabilities (accumulator layout, NJ 8-key
// column groups) to the 16-bit A-operand fragments of the P̃V MMA, one
// per 16 keys.
template <int NJ>
__device__ __forceinline__ void pack_tile(const float (&x)[NJ][4], u32 (&pc)[NJ / 2][4]) {
#pragma unroll
	for (int kk = 0; kk < NJ / 2; kk++) {
		pc[kk][0] = pack2(x[2 * kk][0], x[2 * kk][1]);
		pc[kk][1] = pack2(x[2 * kk][2], x[2 * kk][3]);
		pc[kk][2] = pack2(x[2 * kk + 1][0], x[2 * kk + 1][1]);
		pc[kk][3] = pack2(x[2 * kk + 1][2], x[2 * kk + 1][3]);
	}
}

// store_rows normalizes one 16-row MMA atom of the output (rows row0 +
// lane/4 and row0 + lane/4 + 8, in the mma.sync / wgmma accumulator
// layout) by its softmax sums ℓ and writes the rows below Nq. Rows with no
// visible key have ℓ = 0 and come out as zeros.
__device__ __forceinline__ void store_rows(const Params& p, const float (&acc)[HEAD_DIM / 8][4], const float (&l)[2], int b, int h, int row0, int lane) {
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float lsum = l[hf];
		lsum += shfl_xor(lsum, 1);
		lsum += shfl_xor(lsum, 2);
		float inv = lsum > 0.f ? 1.f / lsum : 0.f;
		int row = row0 + (lane >> 2) + 8 * hf;
		if (row >= p.Nq) continue;
#if OUT16
		// The output in the input type: half the bytes of float32.
		u16* o = reinterpret_cast<u16*>(p.o) + b * p.o_sb + h * p.o_sh + (long long)row * p.o_sn;
#else
		float* o = p.o + b * p.o_sb + h * p.o_sh + (long long)row * p.o_sn;
#endif
#pragma unroll
		for (int j = 0; j < HEAD_DIM / 8; j++) {
			int col = j * 8 + 2 * (lane & 3);
			float x0 = acc[j][2 * hf] * inv, x1 = acc[j][2 * hf + 1] * inv;
#if OUT16
			u32 w = pack2(x0, x1);
			if (col + 1 < p.Dv && (p.Dv & 1) == 0) {
				*reinterpret_cast<u32*>(o + col) = w;
			} else {
				if (col < p.Dv) o[col] = (u16)(w & 0xffff);
				if (col + 1 < p.Dv) o[col + 1] = (u16)(w >> 16);
			}
#else
			if (col + 1 < p.Dv && (p.Dv & 1) == 0) {
				F2 f;
				f.x = x0, f.y = x1;
				*reinterpret_cast<F2*>(o + col) = f;
			} else {
				if (col < p.Dv) o[col] = x0;
				if (col + 1 < p.Dv) o[col + 1] = x1;
			}
#endif
		}
	}
}
