// What the PSA planner's kernels share (plan_psa.cu, plan_psa_score.cu):
// their sizes and PsaArgs. The planner on the device (package method/psa;
// Li et al., "PSA: Pyramid Sparse Attention", §3.3 and App. B.1) runs these
// steps, one kernel each:
//
//   psa_outliers Sampling's outlier-led draws (our extension of §3.3.1):
//                per block the m most outlying tokens by the CPU's
//                canonical float32 score, largest first (psa_outliers16,
//                plan_psa_outlier.cu, for 16-byte rows of 16-bit elements).
//   psa_tokens   the first token of each estimator row (a sampled query, or
//                a Stride-token query group) and column (a sampled key, or
//                a key group), -1 for padding. Sampling repeats the CPU's
//                draw bit for bit: psa_outliers' tokens swapped to the
//                front, then Go's math/rand/v2 PCG (a 128-bit LCG with the
//                DXSM output mix), Rand.IntN and a partial Fisher–Yates
//                shuffle.
//   psa_gather   those rows as 16-bit operands of width W (D, or Stride·D
//                with query slot k holding token t+k and key slot s token
//                t+Stride−1−s, zero past the block: the antidiagonal);
//                not run where psa_score reads Sampling's bf16 rows
//                straight from q and k (PSA_DIRECT, cuda.psaDirect).
//   psa_score    per plan row, the rows' logits against every visible
//                column on the tensor cores (mma.sync m16n8k16, bf16,
//                float32 accumulation; non-bf16 inputs as bf16 high and low
//                halves, three products), per 64-column tile the rows'
//                maximum and exp-sum, folded into each row's running
//                maximum and sum (an online softmax), and per unit of
//                min(CP, 64) columns the maximum logit (Sampling) or
//                exp-sum (Antidiagonal),
//                kept as raw dot products with the scale folded into each
//                term's shift, 2^{(x − m)·lscale·log2 e} on the MUFU;
//                then the block importance: the largest softmax weight of
//                the block (PSA Eq. 4) or the summed weight (XAttention's
//                scoring), in float64.
//   psa_caps     the similarity cap (Algorithm 3) in canonical float64, bit
//                for bit the CPU's.
//   psa_assign   Algorithm 2 (threshold) or the quantile rule, the cap and
//                the causal rule, bit for bit the CPU's given the
//                importance; writes the row's blocks and their levels.
//   psa_levels   the levels compacted into the CSR order, after csr_scan.


#define PSA_T 256   // threads of psa_score and psa_caps
#ifndef PSA_AT
#define PSA_AT 64   // threads of psa_assign (64 to 256: cuda.psaAssignThreads): many rows in flight, as its float64 sums run on one thread
#endif
#define PSA_R 128   // most rows of a psa_score work item
#define PSA_TC 64   // columns of a logit tile
#ifndef PSA_KC
#define PSA_KC 64   // k chunk of a staged key tile: 64, or 128 (cuda.psaShape.kc)
#endif
#define PSA_KP (PSA_KC + 8) // its pitch in elements: ldmatrix rows hit distinct banks
#define PSA_NEG_INF __int_as_float(0xff800000)


// PsaArgs mirrors cuda.psaArgs on the Go side.
struct PsaArgs {
	u16 *qh, *ql;       // [B·Hq·QB·RQ][Wp] (ql: low halves, split only; qh, kh: null with PSA_DIRECT)
	u16 *kh, *kl;       // [B·Hkv·KB·CP][Wp]
	int *qtok, *ktok;   // first token of each row and column, -1 for padding
	double* imp;        // [rows][KB]
	float* work;        // per CTA slot: E [R][UN], MT [R][NT] (Antidiagonal)
	unsigned char* cap; // [B·Hkv·KB], or null
	unsigned char* lvl; // [rows][KB]: the listed blocks' levels
	int *qout, *kout;   // [B·Hq·QB][oq], [B·Hkv·KB][ok]: psa_outliers' offsets, or null
	double cuts[8];
	double sim[7];
	u64 seed;
	int est, rule, H, S;
	int sq, sk;         // Sampling's draws per block
	int oq, ok;         // of which the blocks' most outlying tokens (0: none)
	int RQ, CP, W, Wp;  // rows per query block, columns per KV block (a power of two), width, padded width
	int UN, NT;         // units and tiles of the longest row
	int split, slots, G, P; // G query heads and P query blocks per work item of psa_score
	float lscale;       // logit = dot · lscale
};
