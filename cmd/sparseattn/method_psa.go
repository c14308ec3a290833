package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/plan"
)

// psaMethod is Pyramid Sparse Attention: per query block, each KV block is
// read exactly, pooled 2^(h-1)× with a logit bias, or skipped. Its sparsity
// column is PSA's FLOP-equivalent sparsity: the executor counts a level-h
// block as 1/2^(h-1) of a product, so 1 − sparsity is psa.Budget, the share
// of blocks an equal-cost binary mask would keep.
func psaMethod() *method {
	var rule, estimator, thresholds, quantiles, sim string
	var scale float64
	var sampleQ, sampleK, outQ, outK, stride int
	var seed uint64
	build := func(scale float64) (plan.Planner, error) {
		p := psa.Planner{Scale: scale, SampleQ: sampleQ, SampleK: sampleK, OutlierQ: outQ, OutlierK: outK, Stride: stride, Seed: seed}
		switch rule {
		case "threshold":
			p.Rule = psa.Threshold
		case "quantile":
			p.Rule = psa.Quantile
		default:
			return nil, fmt.Errorf("%w: --psa-rule must be threshold or quantile, not %q", errUsage, rule)
		}
		switch estimator {
		case "sampling":
			p.Estimator = psa.Sampling
		case "antidiagonal":
			p.Estimator = psa.Antidiagonal
		default:
			return nil, fmt.Errorf("%w: --psa-estimator must be sampling or antidiagonal, not %q", errUsage, estimator)
		}
		var err error
		if p.Thresholds, err = psaFloats("psa-thresholds", thresholds, 0, 1); err != nil {
			return nil, err
		}
		if p.Quantiles, err = psaFloats("psa-quantiles", quantiles, 0, 1); err != nil {
			return nil, err
		}
		if p.Similarity, err = psaFloats("psa-sim", sim, -1, 1); err != nil {
			return nil, err
		}
		if p.Thresholds == nil {
			p.Thresholds = psa.DefaultThresholds()
		}
		if p.Quantiles == nil {
			p.Quantiles = psa.DefaultQuantiles()
		}
		levels := len(p.Thresholds)
		if p.Rule == psa.Quantile {
			levels = len(p.Quantiles)
		}
		switch {
		case !(scale > 0) || scale > 1e6:
			return nil, fmt.Errorf("%w: --psa-scale %v must be in (0, 1e6]", errUsage, scale)
		case levels < 1 || levels > int(plan.MaxLevel):
			return nil, fmt.Errorf("%w: --psa-%ss needs 1 to %d values, one per pyramid level", errUsage, rule, plan.MaxLevel)
		case p.Similarity != nil && len(p.Similarity) != levels-1:
			return nil, fmt.Errorf("%w: --psa-sim needs %d values (levels 2..%d), or none", errUsage, levels-1, levels)
		case sampleQ < 0 || sampleK < 0:
			return nil, fmt.Errorf("%w: --psa-sample-q and --psa-sample-k must be ≥ 0 (0 = a quarter of the block)", errUsage)
		case outQ < psa.NoOutliers || outK < psa.NoOutliers:
			return nil, fmt.Errorf("%w: --psa-outliers-q and --psa-outliers-k must be ≥ -1 (0 = a quarter of the sample, -1 = none)", errUsage)
		case stride < 0:
			return nil, fmt.Errorf("%w: --psa-stride must be ≥ 0 (0 = 8)", errUsage)
		}
		for i := 1; i < levels; i++ {
			cuts := p.Thresholds
			if p.Rule == psa.Quantile {
				cuts = p.Quantiles
			}
			if cuts[i] < cuts[i-1] {
				return nil, fmt.Errorf("%w: --psa-%ss must be non-decreasing", errUsage, rule)
			}
		}
		return p, nil
	}
	return &method{
		name: "psa",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&rule, "psa-rule", "threshold", "psa: level assignment, threshold (cumulative importance, Alg. 2) or quantile (fixed block shares)")
			fs.StringVar(&thresholds, "psa-thresholds", fmtCSV(psa.DefaultThresholds()), "psa: cumulative importance thresholds τ1..τH in [0,1], one per pyramid level")
			fs.StringVar(&quantiles, "psa-quantiles", fmtCSV(psa.DefaultQuantiles()), "psa: cumulative block shares per level in [0,1], for --psa-rule quantile")
			fs.Float64Var(&scale, "psa-scale", psa.DefaultScale, "psa: multiplies every threshold or quantile (capped at 1); ≥ 1/τ1 is dense")
			fs.StringVar(&estimator, "psa-estimator", "sampling", "psa: block importance, sampling (video generation) or antidiagonal (video understanding)")
			fs.IntVar(&sampleQ, "psa-sample-q", 0, "psa: query tokens sampled per block (0 = a quarter of the block)")
			fs.IntVar(&sampleK, "psa-sample-k", 0, "psa: key tokens sampled per block (0 = a quarter of the block)")
			fs.IntVar(&outQ, "psa-outliers-q", 0, "psa: of the sampled queries per block, how many are the block's most outlying (our extension; 0 = a quarter of the sample, -1 = none: the paper's random draw)")
			fs.IntVar(&outK, "psa-outliers-k", 0, "psa: of the sampled keys per block, how many are the block's most outlying (our extension; 0 = a quarter of the sample, -1 = none: the paper's random draw)")
			fs.IntVar(&stride, "psa-stride", 0, "psa: antidiagonal stride (0 = 8)")
			fs.StringVar(&sim, "psa-sim", "", "psa: H−1 cosine thresholds capping the pooling level of dissimilar key blocks, e.g. 0.75,0.7,0.7 (empty = off)")
			fs.Uint64Var(&seed, "psa-seed", 0, "psa: seed of the sampling estimator")
		},
		planner: func() (plan.Planner, error) { return build(scale) },
		knob: &knob{
			name:    "scale",
			values:  []float64{1.43, 1.3, 1.2, 1.1, 1, 0.8, 0.6},
			planner: build,
		},
	}
}

// psaFloats parses a comma-separated list of numbers in [lo, hi]; an empty
// string gives nil.
func psaFloats(flagName, s string, lo, hi float64) ([]float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(x >= lo && x <= hi) {
			return nil, fmt.Errorf("%w: --%s: %q is not a number in [%v, %v]", errUsage, flagName, f, lo, hi)
		}
		out = append(out, x)
	}
	return out, nil
}

// fmtCSV writes xs as a flag value: shortest decimals, comma-separated.
func fmtCSV(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}
