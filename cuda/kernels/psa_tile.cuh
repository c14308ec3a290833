// psa_score's epilogue (plan_psa_score.cu includes it after its
// compile-time shape): a finished 64-column logit tile's masks, row maxima
// and exp-sums folded into running values, and per-unit maxima or sums,
// with the softmax terms and Antidiagonal's partial sums on the causal
// diagonal it needs.

__device__ __forceinline__ float psa_f(u16 x) { return __uint_as_float(((u32)x) << 16); }

// psa_ex2 is 2^x for the softmax terms, x ≤ 0 (or −∞, giving +0): one
// MUFU.EX2, relative error about 2⁻²², results below 2⁻¹²⁶ flushed to
// zero (as the CPU's kernel.ExpShift does).
__device__ __forceinline__ float psa_ex2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

// psa_w is a softmax term e^{(x − m)·lscale} of raw dot products x and m
// (the maximum), with c = lscale·log2 e and nm = −m·c: one FFMA and one
// MUFU, the scale folded into the shift (block_mass.cuh's form).
__device__ __forceinline__ float psa_w(float x, float c, float nm) { return psa_ex2(fmaf(x, c, nm)); }

// psa_c is lscale·log2 e, the factor of psa_w.
__device__ __forceinline__ float psa_c(const PsaArgs& s) { return __fmul_rn(s.lscale, 1.44269504088896341f); }

// psa_partial is the raw dot product (the logit over lscale) of a query
// group and a key group on the causal diagonal: the sum over the
// antidiagonal pairs that are visible (estimator.antidiagonal), -inf when
// none is. qs is the query row in shared memory (pitch Wp + 8, hi then
// lo), kc the key column's index.
__device__ float psa_partial(const PlanArgs& a, const PsaArgs& s, const u16* qsh, const u16* qsl, long long kc, int qt, int kt, int qhi, int khi) {
	const int off = a.Nk - a.Nq;
	float sum = 0.0f;
	bool any = false;
	for (int k = 0; k < min(s.S, qhi - qt); k++) {
		const int j = kt + s.S - 1 - k;
		if (j >= khi || j > qt + k + off) continue;
		any = true;
		const u16* kh = s.kh + kc * s.Wp + k * a.D;
		for (int d = 0; d < a.D; d++) {
			float qv = psa_f(qsh[k * a.D + d]), kv = psa_f(kh[d]);
			sum += qv * kv;
			if (s.split) {
				const u16* kl = s.kl + kc * s.Wp + k * a.D;
				sum += qv * psa_f(kl[d]) + psa_f(qsl[k * a.D + d]) * kv;
			}
		}
	}
	return any ? sum : PSA_NEG_INF;
}

// psa_running folds a tile's row maximum mt and exp-sum st (relative to
// mt) into row r's running maximum rm[r] and running sum rl[r] (relative
// to rm[r]), as an online softmax does: the sum is rescaled to the new
// maximum, rl·e^{(rm − m')·lscale} + st·e^{(mt − m')·lscale}, each
// factor by psa_w. A tile with no visible logit (mt = −∞) changes
// nothing; the first visible one finds rl = 0 and rm = −∞ (factor 0).
__device__ __forceinline__ void psa_running(float* rm, float* rl, int r, float mt, float st, float c) {
	if (mt == PSA_NEG_INF) return;
	const float mo = rm[r], mn = fmaxf(mo, mt), nn = -__fmul_rn(mn, c);
	rl[r] = fmaf(rl[r], psa_w(mo, c, nn), __fmul_rn(st, psa_w(mt, c, nn)));
	rm[r] = mn;
}

// psa_tile finishes a warp's 16 rows of 64-column logit tile `tile` from
// their float32 dot products acc. Everything stays in raw dot products
// (logit = dot · lscale, lscale > 0, so maxima are the same order): the
// masks (padding, columns past the block's nc, causal tokens for
// Sampling, antidiagonal pairs for Antidiagonal) set −∞; then per row the
// tile's maximum dot (MT, kept for Antidiagonal only) and its exp-sum
// Σ e^{(x − MT)·lscale} (by psa_w), folded into the row's running maximum
// rm[row] and sum rl[row] by lane t = 0 (psa_running), and per unit of
// PSA_CPU columns the maximum dot (Sampling) or the exp-sum relative to
// MT (Antidiagonal) into E. r0 is the thread's first row in the item (the
// other is r0 + 8), kts the tile's key tokens, qsh the staged query rows
// (lo halves lo elements after), qhi the rows' query bound, k0 the head's
// first key column. inner (Sampling): no logit of the tile is masked.
__device__ __forceinline__ void psa_tile(const PlanArgs& a, const PsaArgs& s, float (&acc)[8][4], float* rm, float* rl, const int* kts, const u16* qsh, int lo,
                                         float* E, float* MT, const int* sqt, int r0, int tile, int nc, int qhi, long long k0, int t, bool inner) {
	const int r1 = r0 + 8, c0 = tile * PSA_TC, off = a.Nk - a.Nq;
#if PSA_EST == 0
	if (!inner) {
		// A logit is masked when its key token is padding (-1, or past nc)
		// or past the row's last visible one, qlim (−1: the row is padding).
		int qlim[2];
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			const int qt = sqt[hf ? r1 : r0];
			qlim[hf] = qt < 0 ? -1 : (a.causal ? qt + off : 0x7ffffffe);
		}
#pragma unroll
		for (int j = 0; j < 8; j++) {
			const int2 k2 = *reinterpret_cast<const int2*>(kts + j * 8 + 2 * t);
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int kt = e ? k2.y : k2.x;
				const int k = kt < 0 || c0 + j * 8 + 2 * t + e >= nc ? 0x7fffffff : kt;
#pragma unroll
				for (int hf = 0; hf < 2; hf++)
					if (k > qlim[hf]) acc[j][2 * hf + e] = PSA_NEG_INF;
			}
		}
	}
#else
	// The thread's columns' key tokens, -1 for padding and past nc.
	int kt[8][2];
#pragma unroll
	for (int j = 0; j < 8; j++) {
		const int2 k2 = *reinterpret_cast<const int2*>(kts + j * 8 + 2 * t);
		kt[j][0] = c0 + j * 8 + 2 * t < nc ? k2.x : -1;
		kt[j][1] = c0 + j * 8 + 2 * t + 1 < nc ? k2.y : -1;
	}
	// Antidiagonal. A pair on the causal diagonal needs its partial sum
	// (psa_partial): those entries are marked in diag (bit 4j + 2·hf + e)
	// and summed after, at one call site, so that the unrolled loop holds
	// no call.
	unsigned diag = 0;
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		const int qt = sqt[hf ? r1 : r0];
#pragma unroll
		for (int j = 0; j < 8; j++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				const int k = kt[j][e];
				float l = acc[j][2 * hf + e];
				if (qt < 0 || k < 0) {
					l = PSA_NEG_INF;
				} else {
					const int khi = min((k / a.bk + 1) * a.bk, a.Nk);
					const int qn = min(s.S, qhi - qt), kn = min(s.S, khi - k);
					if (qn + kn <= s.S) l = PSA_NEG_INF;
					else if (a.causal && k + s.S - 1 > qt + off) diag |= 1u << (4 * j + 2 * hf + e);
				}
				acc[j][2 * hf + e] = l;
			}
	}
	while (diag) {
		const int x = __ffs(diag) - 1, j = x >> 2, hf = (x >> 1) & 1, e = x & 1;
		diag &= diag - 1;
		const int r = hf ? r1 : r0, col = j * 8 + 2 * t + e, qt = sqt[r], k = c0 + col < nc ? kts[col] : -1, QP = s.Wp + 8;
		const int khi = min((k / a.bk + 1) * a.bk, a.Nk);
		const float l = psa_partial(a, s, qsh + r * QP, qsh + lo + r * QP, k0 + c0 + col, qt, k, qhi, khi);
#pragma unroll
		for (int y = 0; y < 32; y++)
			if (y == x) acc[y >> 2][y & 3] = l;
	}
#endif
	// Row maxima of the tile, and Sampling's unit maxima (a maximum in any
	// order is the same number).
	float mt[2];
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float* er = E + (long long)(hf ? r1 : r0) * s.UN + c0 / PSA_CPU;
		float m = PSA_NEG_INF;
		if (PSA_EST == 0 && PSA_CPU == 16) {
			// Four units of two n-tiles: the quad reduces them transposed,
			// two units a lane after the xor-1 exchange and one after the
			// xor-2 exchange, so that lane t ends with unit t (3 shuffles,
			// not 8); then the row maximum over the four lanes.
			float um[4];
#pragma unroll
			for (int u = 0; u < 4; u++)
				um[u] = fmaxf(fmaxf(acc[2 * u][2 * hf], acc[2 * u][2 * hf + 1]), fmaxf(acc[2 * u + 1][2 * hf], acc[2 * u + 1][2 * hf + 1]));
			const bool odd = t & 1, up = t & 2;
			// Lane t keeps units t & 1 and (t & 1) + 2 and sends the others.
			const float s0 = odd ? um[0] : um[1], s1 = odd ? um[2] : um[3];
			float k0 = odd ? um[1] : um[0], k1 = odd ? um[3] : um[2];
			k0 = fmaxf(k0, __shfl_xor_sync(0xffffffffu, s0, 1));
			k1 = fmaxf(k1, __shfl_xor_sync(0xffffffffu, s1, 1));
			// Lanes t and t ^ 2 hold the same two units: t keeps unit t.
			const float sd = up ? k0 : k1;
			float v = up ? k1 : k0;
			v = fmaxf(v, __shfl_xor_sync(0xffffffffu, sd, 2));
			er[t] = v;
			m = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
		} else if (PSA_EST == 0 && PSA_CPU >= 8) {
			// Every lane of a row's quad gets each unit's maximum; lane t
			// stores units t·NU/4 … (t+1)·NU/4 − 1 with one store (NU = 8),
			// or lanes t < NU one each.
			constexpr int NJ = PSA_CPU >= 8 ? PSA_CPU / 8 : 1; // n-tiles per unit
			constexpr int NU = 8 / NJ;                          // units per tile
			float um[NU];
#pragma unroll
			for (int u = 0; u < NU; u++) {
				um[u] = PSA_NEG_INF;
#pragma unroll
				for (int j = u * NJ; j < (u + 1) * NJ; j++) um[u] = fmaxf(um[u], fmaxf(acc[j][2 * hf], acc[j][2 * hf + 1]));
				um[u] = fmaxf(um[u], __shfl_xor_sync(0xffffffffu, um[u], 1));
				um[u] = fmaxf(um[u], __shfl_xor_sync(0xffffffffu, um[u], 2));
				m = fmaxf(m, um[u]);
			}
			if (NU == 8) {
				float2 v = make_float2(um[0], um[1]);
#pragma unroll
				for (int q = 1; q < 4; q++)
					if (t == q) v = make_float2(um[(2 * q) % NU], um[(2 * q + 1) % NU]);
				*reinterpret_cast<float2*>(er + 2 * t) = v;
			} else if (NU == 2) { // (NU = 4, PSA_CPU = 16, is the branch above)
				if (t < 2) er[t] = t ? um[1 % NU] : um[0];
			} else if (t == 0) {
				er[0] = um[0];
			}
		} else {
#pragma unroll
			for (int j = 0; j < 8; j++) {
				const float v0 = acc[j][2 * hf], v1 = acc[j][2 * hf + 1];
				float pm = fmaxf(v0, v1);
				m = fmaxf(m, pm);
				if (PSA_EST != 0) continue;
				const int col = j * 8 + 2 * t; // within the tile
				if (PSA_CPU == 1) {
					er[col] = v0, er[col + 1] = v1;
				} else if (PSA_CPU == 2) {
					er[col / 2] = pm;
				} else { // 4
					pm = fmaxf(pm, __shfl_xor_sync(0xffffffffu, pm, 1));
					if ((t & 1) == 0) er[col / 4] = pm;
				}
			}
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
		}
		mt[hf] = m;
#if PSA_EST != 0
		if (t == 0) MT[(long long)(hf ? r1 : r0) * s.NT + tile] = m;
#endif
	}
	// Exp-sums relative to the tile maximum, and Antidiagonal's unit sums.
	// A masked logit's term is 2^−∞ = 0 (no branch); a row masked
	// throughout has maximum −∞, and its terms are taken relative to 0.
	const float c = psa_c(s);
#if PSA_EST == 0
	{
		// Both rows at once: four independent exponentials a step, each
		// row's sum in its own order.
		const float n0 = mt[0] == PSA_NEG_INF ? 0.0f : -__fmul_rn(mt[0], c), n1 = mt[1] == PSA_NEG_INF ? 0.0f : -__fmul_rn(mt[1], c);
		float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			const float p00 = psa_w(acc[j][0], c, n0), p01 = psa_w(acc[j][1], c, n0);
			const float p10 = psa_w(acc[j][2], c, n1), p11 = psa_w(acc[j][3], c, n1);
			s0 += p00 + p01;
			s1 += p10 + p11;
		}
		s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
		s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
		s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
		s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
		if (t == 0) {
			psa_running(rm, rl, r0, mt[0], s0, c);
			psa_running(rm, rl, r1, mt[1], s1, c);
		}
	}
#else
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float* er = E + (long long)(hf ? r1 : r0) * s.UN + c0 / PSA_CPU;
		const float nb = mt[hf] == PSA_NEG_INF ? 0.0f : -__fmul_rn(mt[hf], c);
		float sum = 0.0f, us = 0.0f;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			const float p0 = psa_w(acc[j][2 * hf], c, nb), p1 = psa_w(acc[j][2 * hf + 1], c, nb);
			float ps = p0 + p1;
			sum += ps;
			const int col = j * 8 + 2 * t;
			if (PSA_CPU == 1) {
				er[col] = p0, er[col + 1] = p1;
			} else if (PSA_CPU == 2) {
				er[col / 2] = ps;
			} else {
				ps += __shfl_xor_sync(0xffffffffu, ps, 1);
				if (PSA_CPU == 4) {
					if ((t & 1) == 0) er[col / 4] = ps;
				} else {
					ps += __shfl_xor_sync(0xffffffffu, ps, 2);
					us += ps;
					if (((j + 1) * 8) % PSA_CPU == 0) {
						if (t == 0) er[j * 8 / PSA_CPU] = us;
						us = 0.0f;
					}
				}
			}
		}
		sum += __shfl_xor_sync(0xffffffffu, sum, 1);
		sum += __shfl_xor_sync(0xffffffffu, sum, 2);
		if (t == 0) psa_running(rm, rl, hf ? r1 : r0, mt[hf], sum, c);
	}
#endif
}
