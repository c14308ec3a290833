// Tensor-core helpers shared by the planners that score Q·Kᵀ with
// mma.sync (plan_oracle.cu, probe.cuh): one m16n8k16 MMA with float32
// accumulation on 16-bit operands, the loader of one MMA register from a
// View, and a 16-byte word. The including file defines DTYPE (DT_F32,
// DT_F16 or DT_BF16): f16 inputs multiply as f16, bf16 and f32 ones as
// bf16, f32 values split into bf16 high and low halves.

// mma16 adds the 16×8 product of a (four registers, row-major 16×16) and
// b0, b1 (column-major 16×8) into d. Not volatile: independent MMAs may
// overlap.
__device__ __forceinline__ void mma16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if DTYPE == DT_F16
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#else
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#endif
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// pair16 returns elements d and d+1 of row n of head h as one MMA
// register (element d in the low half); elements past D, or a row outside
// [0, N), read as zero. For float32 inputs it returns the bf16 high halves
// and sets lo to the bf16 low halves.
__device__ __forceinline__ u32 pair16(const View& t, int b, int h, int n, int d, u32& lo) {
	lo = 0;
	if (n < 0 || n >= t.N || d >= t.D) return 0;
	long long i = (long long)b * t.sb + (long long)h * t.sh + (long long)n * t.sn + d;
	bool two = d + 1 < t.D;
#if DTYPE == DT_F32
	const float* p = (const float*)t.ptr + i;
	float x0 = p[0], x1 = two ? p[1] : 0.0f;
	u32 hi;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hi) : "f"(x1), "f"(x0));
	float r0 = x0 - __uint_as_float(hi << 16), r1 = x1 - __uint_as_float(hi & 0xffff0000u);
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(lo) : "f"(r1), "f"(r0));
	return hi;
#else
	const u16* p = (const u16*)t.ptr + i;
	u32 x0 = p[0], x1 = two ? p[1] : 0;
	return x0 | (x1 << 16);
#endif
}

// U4 is 16 bytes moved by one load or store.
struct alignas(16) U4 {
	u32 x, y, z, w;
};
