package sparge

// Options configure sparseattn.Sparge, the one-call SpargeAttn API. The zero value is non-causal SpargeAttn with
// the defaults: top-k 0.5, θ = DefaultTheta, no λ filter, 128×64 blocks.
type Options struct {
	// Params apply to every query head (see Params for the defaults).
	Params
	// Heads, when non-nil, gives each query head its own hyperparameters,
	// as a tuned profile does (tune.Layer.Heads); it overrides Params.
	Heads []Params
	// Causal masks keys after each query, token-exact; queries are the last
	// Nq of the Nk tokens.
	Causal bool
	// Scale multiplies QKᵀ before the softmax; 0 means 1/sqrt(D).
	Scale float32
	// BlockQ and BlockK are the tile sizes; 0 means DefaultBlockQ/K.
	BlockQ, BlockK int
	// RowGroup and Sink are as in Planner.
	RowGroup int
	Sink     bool
	// Workers is the number of CPU goroutines; 0 means GOMAXPROCS.
	Workers int
}
