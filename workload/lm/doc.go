// Package lm is a small byte-level transformer language model, trained on
// public-domain and BSD-licensed text and embedded in the binary, that
// serves as sparseattn's real-attention workload.
//
// Its attention is real: Forward runs the model on a text, captures every
// layer's Q, K (after RoPE) and V, and runs each layer's attention through
// sparseattn.Attention, so any planner and executor can replace dense
// attention in every layer and the model's bits per byte then say what
// the sparse attention cost at the level of the model, not only of the
// operator.
//
// The embedded model (Default) has 4 pre-norm layers, d_model 256, 4 heads
// of dim 64, RoPE base 10000, a SwiGLU MLP of width 768 and a tied byte
// embedding: 3.5 M parameters stored as int8 with a float32 scale per row
// (3.5 MB). scripts/train_lm.py trained it in 7.5 minutes on one H100 with
// sequences of 1K to 32K bytes mixed, so it stays usable to 32K tokens:
// on EvalText it scores 1.80, 1.77, 1.76 and 1.76 bits per byte at 1K, 4K,
// 16K and 32K tokens of context.
//
// EvalText and CalibText are two disjoint 64 KiB (+1 byte) regions of the
// Jargon File 4.4.7 (public domain) held out of training; text/LICENSE
// gives the sources and licenses of the training corpus.
package lm
