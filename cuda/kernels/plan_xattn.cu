// The XAttention planner on the device (package method/xattn; Xu et al.,
// "XAttention: Block Sparse Attention with Antidiagonal Scoring", §2).
// A reshaped query group is Q[iS+S−1], …, Q[iS] concatenated and a key
// group K[jS], …, K[jS+S−1]; their dot product of length S·D is the
// antidiagonal score (§2.1). bm_mass (block_mass.cuh) reads the groups
// straight from Q and K (rev = 1 on the query side), scores them on the
// tensor cores, takes each query group's softmax over its visible key
// groups (logits times scale/S), sums it per KV block and query block,
// and applies the threshold selection of §2.2 as xattn.Select does
// (causal: the first and the diagonal block always kept). Float32 inputs
// are first split into bf16 halves by bm_split.

#include "block_mass.cuh"
