// Definitions shared by the planner and runtime kernels (plan_*.cu,
// runtime.cu): element loads from strided device tensors of any input
// type, and the canonical float64 reductions that the CPU planners repeat
// operation for operation, so that GPU and CPU plans agree bit for bit.
// The Go side compiles each such file with this one in front of it.

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// DType codes, as tensor.DType on the Go side.
#define DT_F32 1
#define DT_F16 2
#define DT_BF16 3

// View mirrors cuda.view on the Go side: a [B, H, N, D] tensor with
// element strides for B, H and N (D is contiguous).
struct View {
	const void* ptr;
	long long sb, sh, sn;
	int dtype;
	int B, H, N, D;
};

__device__ __forceinline__ float bf16_to_f32(u16 x) { return __uint_as_float(((u32)x) << 16); }

__device__ __forceinline__ float f16_to_f32(u16 x) {
	float f;
	asm("{ .reg .f16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(x));
	return f;
}

// load returns element [b, h, n, d] of t as float32 (exact for every
// input type).
__device__ __forceinline__ float load(const View& t, int b, int h, int n, int d) {
	long long i = (long long)b * t.sb + (long long)h * t.sh + (long long)n * t.sn + d;
	switch (t.dtype) {
	case DT_F32:
		return ((const float*)t.ptr)[i];
	case DT_F16:
		return f16_to_f32(((const u16*)t.ptr)[i]);
	default:
		return bf16_to_f32(((const u16*)t.ptr)[i]);
	}
}

// add64 and mul64 are float64 adds and multiplies that are never fused into
// an FMA, as Go does not fuse on amd64: the CPU planners get the same bits.
__device__ __forceinline__ double add64(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double mul64(double a, double b) { return __dmul_rn(a, b); }

// warp_sum is the canonical 32-lane float64 sum: lane l holds the partial
// sum of its own terms, and the lanes are combined by xor butterflies
// 16, 8, 4, 2, 1. Every lane gets the same result (addition is
// commutative), and plan/canon.go's Sum64 repeats it on the CPU.
__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) x = add64(x, __shfl_xor_sync(0xffffffffu, x, o));
	return x;
}

// PlanArgs mirrors cuda.planArgs on the Go side: where a device planner
// writes its rows and the tiling it plans for. Row r = (b·Hq + h)·q_blocks
// + qb lists its KV blocks, ascending, at lists[r·stride ...] and its
// length at row_len[r].
struct PlanArgs {
	int* row_len;
	int* lists;
	int rows, stride, q_blocks;
	int B, Hq, Hkv, Nq, Nk, D;
	int bq, bk, causal;
	float scale; // softmax scale
};

// visible_blocks is the number of leading KV blocks query block qb may
// see: every one without causal masking, else those up to the block of
// the last query's last key (queries are the last Nq of Nk tokens).
__device__ __forceinline__ int visible_blocks(const PlanArgs& a, int qb) {
	int nkb = (a.Nk + a.bk - 1) / a.bk;
	if (!a.causal) return nkb;
	int qhi = min((qb + 1) * a.bq, a.Nq);
	int last = qhi - 1 + (a.Nk - a.Nq);
	if (last < 0) return 0;
	return min(nkb, last / a.bk + 1);
}

// exp64_canon is plan.Exp64 (plan/canon.go) operation for operation: the
// same range reduction by ln 2 split in two, the same Horner polynomial,
// no fused multiply-adds, so the planners' softmaxes match the CPU's bits.
__device__ __forceinline__ double exp64_canon(double x) {
	if (x != x) return x;
	if (x < -708.0) return 0.0;
	if (x > 709.0) return __longlong_as_double(0x7ff0000000000000ll);
	const double log2e = 0x1.71547652b82fep+00, ln2hi = 0x1.62e42feep-01, ln2lo = 0x1.a39ef35793c76p-33;
	double n = floor(add64(mul64(x, log2e), 0.5));
	double r = __dsub_rn(x, mul64(n, ln2hi));
	r = __dsub_rn(r, mul64(n, ln2lo));
	double p = 0x1.6124613a86d09p-33;
	p = add64(mul64(p, r), 0x1.1eed8eff8d898p-29);
	p = add64(mul64(p, r), 0x1.ae64567f544e4p-26);
	p = add64(mul64(p, r), 0x1.27e4fb7789f5cp-22);
	p = add64(mul64(p, r), 0x1.71de3a556c734p-19);
	p = add64(mul64(p, r), 0x1.a01a01a01a01ap-16);
	p = add64(mul64(p, r), 0x1.a01a01a01a01ap-13);
	p = add64(mul64(p, r), 0x1.6c16c16c16c17p-10);
	p = add64(mul64(p, r), 0x1.1111111111111p-07);
	p = add64(mul64(p, r), 0x1.5555555555555p-05);
	p = add64(mul64(p, r), 0x1.5555555555555p-03);
	p = add64(mul64(p, r), 0x1p-01);
	p = add64(mul64(p, r), 1.0);
	p = add64(mul64(p, r), 1.0);
	return mul64(p, __longlong_as_double(((long long)n + 1023) << 52));
}
