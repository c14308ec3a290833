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
	slashPos float64 // rotary kernel peak at each slash offset
	slashID  float64 // identity-match peak at each slash offset
	semantic float64 // content-similarity gain λ
	noise    float64 // per-dimension query noise (pre-scaling)
}

// atLength returns p for an N-token sequence: past 4096 tokens the
// concentrated components (sinks, the local and slash kernels, the needle) grow by
// lengthGain·ln(N/4096) logits, so that they hold their share of the mass
// against the diffuse content-driven part, which spreads over N keys.
func (p llmHeadParams) atLength(n int) llmHeadParams {
	g := max(0, float64(lengthGain*dlog(float64(n)/4096)))
	p.sink += g
	p.local += g
	if p.needle != 0 {
		p.needle += 2 * g // it must outgrow the sinks it competes with
	}
	if p.slashPos != 0 {
		p.slashPos += g
		p.slashID += g
	}
	return p
}

// lengthGain scales atLength's growth.
const lengthGain = 1.4

// llmParams holds the calibrated strengths. They were tuned so that, at
// N = 4096, D = 128, dense attention has realistic spread: sink heads put
// roughly a third of their mass on the first four tokens and most of the
// rest within the window, retrieval heads spend a large share on heavy
// hitters, and the needle head's last query puts most of its mass on the
// needle.
func llmParams(t llmHeadType) llmHeadParams {
	switch t {
	case headLocal:
		return llmHeadParams{sink: 9.0, stripe: 1.0, local: 7.5, widen: 1, semantic: 1.0, noise: 0.15}
	case headRetrieval:
		return llmHeadParams{sink: 7.5, stripe: 6.0, needle: 12, local: 3.0, widen: 2, semantic: 1.5, noise: 0.15}
	case headSlash:
		return llmHeadParams{sink: 7.0, stripe: 1.0, local: 0.5, widen: 1, slashPos: 2.0, slashID: 6.5, semantic: 1.0, noise: 0.15}
	default:
		return llmHeadParams{sink: 6.0, stripe: 2.0, local: 2.0, widen: 4, semantic: 5.0, noise: 0.15}
	}
}
