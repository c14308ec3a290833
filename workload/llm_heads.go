package workload

import "fmt"

// The llm workload's head types and their per-type strengths (and how they
// grow with N); llm.go builds the tensors from them.

// llmHeadType is the dominant pattern a query head is built to show.
type llmHeadType int

const (
	headLocal     llmHeadType = iota // streaming head: sinks + local window
	headRetrieval                    // vertical stripes: heavy hitters; carries the needle
	headSlash                        // slash stripes at fixed relative offsets
	headSemantic                     // diffuse, content-driven
	numLLMHeadTypes
)

// String names the head pattern, as Workload.HeadPatterns reports it.
func (t llmHeadType) String() string {
	switch t {
	case headLocal:
		return "sink+local"
	case headRetrieval:
		return "retrieval (vertical stripes, needle)"
	case headSlash:
		return "slash (fixed offsets)"
	case headSemantic:
		return "semantic (diffuse)"
	}
	return fmt.Sprintf("headtype(%d)", int(t))
}

// llmHeadParams are a head type's component strengths, in logits.
type llmHeadParams struct {
	sink     float64 // boost of sink token 0 (later sinks get less)
	stripe   float64 // boost of an average heavy hitter
	needle   float64 // boost of the needle key at the needle query
	local    float64 // peak of the recency kernel
	widen    float64 // kernel roll-off window, in units of Config.Window
	spread   float64 // width of the kernels' peaks, in tokens (0: one token)
	slashPos float64 // rotary kernel peak at each slash offset
	slashID  float64 // identity-match peak at each slash offset
	semantic float64 // content-similarity gain λ
	noise    float64 // per-dimension query noise (pre-scaling)
	grow     float64 // growth of the point-like components per ln(N/4096), in logits
	sharpen  float64 // growth of the semantic gain per ln(N/4096)
}

// atLength returns p for an N-token sequence: past 4096 tokens the
// point-like concentrated components (the sinks, the heavy hitters, the
// needle) grow by grow·ln(N/4096) logits, so that they hold their
// share of the mass against the diffuse content-driven part, which spreads
// over N keys. The RoPE kernels (local and slash positional peaks) do not
// grow: their far-field ripples grow with the peak and would spread mass
// over the whole sequence; nor does the slash identity match, whose
// cross-talk with every other key's identity grows with it.
func (p llmHeadParams) atLength(n int) llmHeadParams {
	g := max(0, float64(p.grow*dlog(float64(n)/4096)))
	p.sink += g
	p.stripe += g
	p.semantic += max(0, float64(p.sharpen*dlog(float64(n)/4096)))
	if p.needle != 0 {
		p.needle += 2 * g // it must outgrow the sinks it competes with
	}
	return p
}

// llmParams holds the calibrated strengths: each head type's block oracle
// curve (sparsity against rel-L1) matches, within ±0.05 at rel-L1 0.05 and
// 0.1 from 4K to 32K tokens, the mean curve of one group of the embedded
// LM's heads (see the package doc's Calibration section), while no head's
// dense attention is one-hot and the needle heads' last query puts most of
// its mass on the needle.
func llmParams(t llmHeadType) llmHeadParams {
	switch t {
	case headLocal:
		return llmHeadParams{sink: 10.75, stripe: 1.0, local: 9.3, widen: 1, semantic: 1.0, noise: 0.15, grow: 3.0}
	case headRetrieval:
		return llmHeadParams{sink: 9.0, stripe: 7.3, needle: 15, local: 4.5, widen: 2, semantic: 1.5, noise: 0.15, grow: 1.8}
	case headSlash:
		return llmHeadParams{sink: 12.5, stripe: 1.0, local: 5.0, widen: 1, spread: 4, slashPos: 5.0, slashID: 4.0, semantic: 1.0, noise: 0.15, grow: 4.0}
	default:
		return llmHeadParams{sink: 7.0, stripe: 2.0, local: 2.0, widen: 4, semantic: 6.0, noise: 0.15, grow: 1.0, sharpen: 2.0}
	}
}
