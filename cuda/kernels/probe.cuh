// The probe's scratch layout, shared by the MInference planner
// (plan_minference.cu, whose probe kernels fill it) and the FlexPrefill
// planner (plan_flexprefill.cu, which reads it), and their bit helper.

// ProbeArgs locate one head group's probe scratch.
struct ProbeArgs {
	float* e;    // [G][n][Nk] float32 exponentials (0 where not visible)
	double* m;   // [G][n][tiles] tile maxima, then (probe_norm) factors c_t
	double* s;   // [G][n][tiles] tile sums
	double* v;   // [G][Nk] vertical sums
	double* sl;  // [G][2Nk−1] slash sums, offset d at d + Nk − 1
	int head0;   // first head (b·Hq + h) of the group
	int G, n, tiles;
};

// dbits is x's bit pattern, for ordering non-negative doubles as integers.
__device__ __forceinline__ u64 dbits(double x) { return (u64)__double_as_longlong(x); }
