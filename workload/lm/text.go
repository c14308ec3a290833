package lm

import _ "embed"

//go:embed lm.bin
var weights string

//go:embed text/eval.txt
var evalText string

//go:embed text/calib.txt
var calibText string

// Default loads the embedded model (see the package documentation).
func Default() (*Model, error) { return Load([]byte(weights)) }

// EvalText returns the held-out evaluation text (65537 bytes of the Jargon
// File, never seen in training): the default real-attention workload reads
// its first 4096 bytes. The slice is fresh; callers may modify it.
func EvalText() []byte { return []byte(evalText) }

// CalibText returns a second held-out text (65537 bytes of the Jargon File,
// disjoint from EvalText and from training), for calibrating or tuning
// methods on a text other than the one they are evaluated on. The slice
// is fresh; callers may modify it.
func CalibText() []byte { return []byte(calibText) }
