// Package evaluate measures sparse attention methods against dense
// attention: the evaluation science behind "sparseattn eval" and
// "sparseattn compare", in plain Go types a program can use without the
// command line.
//
// # Measuring one method
//
// Measure runs a method's options through a Runner (Time, the CPU's
// medians of timed runs, or any other executor's) and compares the output
// with a dense Reference element by element in float64 (package metrics):
// relative L1 and L2, cosine, MSE, MAE and the largest difference. Its
// sparsity is never the planner's claim: it is the skipped fraction of
// the QK and PV block products a dense causal-aware pass needs, read off
// the executor's counters (plan.Stats). On the embedded LM workload
// BitsPerByte scores a method at the level of the model: the bits per
// byte of the text with the method's attention in every layer.
//
// # Sweeping a knob
//
// A Sweeper measures each method at each value of its main knob, giving
// one Curve of (sparsity, error) points per method. The block oracle
// (exact TopCdf on the true block mass) is the yardstick: each point's
// ×oracle is its error divided by the oracle's error at the same sparsity
// (MatchOracle), and where another method's point falls in a gap of the
// oracle's curve wider than MinGap in sparsity, RefineOracle bisects the
// oracle's knob there, so that the ratio is not an artefact of sparse
// sampling (the oracle's error climbs decades within its first percent of
// sparsity).
//
// # Reading a curve
//
// An ErrorCurve is error as a function of sparsity, known at points. Between
// two points log(error) is interpolated linearly in sparsity — error falls
// roughly exponentially as a plan keeps more blocks, so this is the
// natural straight line — and nothing is extrapolated outside the points'
// range. At reads the error at a sparsity (the matched-sparsity view,
// behind ×oracle); SparsityAt inverts it, reading the sparsity at which the
// error first reaches a target such as rel-L1 0.05 (the matched-error
// view, behind "sparsity at rel-L1 X"). AtTarget fills the latter in for
// every curve.
package evaluate
