// Package workload generates synthetic attention inputs — Q, K and V
// tensors — whose attention maps have the structures that training-free
// sparse attention methods (SpargeAttn, UniSparse, S2O, PSA) exploit and
// must not break. Every generator is seeded and size-configurable, and
// Generate is a pure function of its Config: the same Config yields
// bit-identical tensors on every run, every GOMAXPROCS and every platform.
//
// # Kinds
//
//   - llm: causal prefill of a decoder-only language model with
//     grouped-query attention and rotary position embeddings (rotate-half
//     layout, as in Llama/NeoX: dimension p pairs with p+D/2, frequency
//     base^(−2p/D), base 10000 by default). Query heads cycle through four
//     types, one of each per KV group with the default 4:1 grouping:
//     "sink+local" streaming heads (StreamingLLM's attention sinks plus
//     RoPE's recency window); "retrieval" heads with vertical stripes at
//     heavy-hitter keys (H2O) that also carry the planted needle;
//     "slash" heads attending at fixed relative offsets (MInference's and
//     S2O's slash stripes, previous-token and induction-like heads); and
//     "semantic" heads whose diffuse, content-driven attention follows a
//     document's recurring topics. Every head has some sink attention. The
//     last query retrieves a planted needle key (see Needle and
//     NeedleRecall), so a method that drops the needle's block is caught.
//   - video: bidirectional self-attention of a video diffusion transformer
//     on a T×H×W latent grid, optionally followed by text tokens. Tokens
//     are a smooth function of (t, h, w) — random low-frequency Fourier
//     features with a global camera motion, plus noise — so adjacent
//     tokens are similar (the locality SpargeAttn's Hilbert-curve
//     permutation and PSA's pooling rely on), and a 3-D axial RoPE gives
//     heads different spatial and temporal bandwidths: spatial (same
//     frame), temporal (same position across frames), local 3-D and
//     global heads. Text tokens are attended by every visual query.
//   - image: the same on an H×W grid with 2-D axial RoPE: local, wide,
//     row-axial and global heads.
//   - random: i.i.d. standard Gaussian Q, K and V: near-uniform attention
//     with no structure, the hard case where sparsity can only cost
//     accuracy.
//
// # Calibration
//
// Component strengths are expressed directly in logits. The llm head types
// were calibrated against the real attention of the embedded byte-level LM
// (the CLI's lm workload): its 16 heads, ranked by their block oracle's
// sparsity at rel-L1 0.05 at 4K tokens, form four groups of four, and each
// head type matches one group's mean sparsity-versus-error curve within
// ±0.05 at rel-L1 0.05 and 0.1, from 4K to 32K tokens (semantic: the
// first layer's dense heads; retrieval, sink+local and slash: the next
// three groups; RESULTS.md has both sets of curves and the command).
// On Default (N=4096, D=128), averaged over queries, dense attention puts
// 0.03–0.53 of a head's mass on the first four tokens (uniform share
// 0.006); sink+local heads put 0.43–0.47 within the last 64 tokens, slash
// heads 0.78–0.98 (90% of the mass on 0.5% of the keys); retrieval heads
// put about 0.49 on the heavy hitters; semantic heads are the most diffuse
// (normalized entropy 0.55–0.58). No head is one-hot (largest weight
// 0.31–0.69 on average, as the LM's heads at 0.13–0.67). The needle heads'
// last query puts 0.85–0.91 of its mass on the needle (TestDiagnostics
// with WORKLOAD_DIAG=1 prints these).
//
// Past 4096 tokens, per head type, the point-like components (sinks,
// heavy hitters; the needle twice as fast) grow by a head type's gain
// times ln(N/4096) logits and the semantic heads' content gain sharpens,
// so that at a fixed error the block oracle's sparsity grows with N as it
// does on the LM. Dense attention retrieves the needle at every N.
//
// # Determinism
//
// Randomness comes only from math/rand/v2's PCG, seeded per purpose,
// batch and head by hashing Config.Seed, so the result does not depend on
// goroutine scheduling. Floating-point work avoids the math package's
// transcendental functions (some have per-architecture assembly) and
// rounds every product explicitly, which forbids fused multiply-add; see
// detmath.go.
package workload
