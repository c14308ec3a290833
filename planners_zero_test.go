package sparseattn_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/auto"
	"github.com/sparseattn/sparseattn/method/flexprefill"
	"github.com/sparseattn/sparseattn/method/minference"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/method/psa"
	"github.com/sparseattn/sparseattn/method/s2o"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/method/unisparse"
	"github.com/sparseattn/sparseattn/method/window"
	"github.com/sparseattn/sparseattn/method/xattn"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/reference"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestPlannerZeroValues runs every planner's zero value on a small random
// GQA input (N = 200: ragged in 64-token blocks), causal and not. Each must
// plan without error; where its zero fields stand for defaults the package
// exports, its output must be bit for bit that of the planner with those
// defaults spelled out (the defaults live in the method's package, not in
// the CLI, and are the ones the CLI runs). Every planner's bad settings must answer
// errors.Is(err, plan.ErrInvalid), the one sentinel of a planner's bad
// settings (sparge.ErrParams and auto.ErrPlan wrap it). Auto's zero value
// tunes on the input itself: its rel L1 against the float64 reference must
// stay within DefaultBudget (its tuner holds DefaultMargin of it back, far
// more than float32 rounding).
func TestPlannerZeroValues(t *testing.T) {
	ctx := context.Background()
	q, k, v := zeroTestInputs(t)
	for _, tc := range []struct {
		zero plan.Planner
		// spelled is the zero value with its defaults written out; nil
		// where every zero field is a setting of its own.
		spelled plan.Planner
		bad     plan.Planner
	}{
		{auto.Planner{}, auto.Planner{Budget: auto.DefaultBudget}, auto.Planner{Heads: []auto.Head{{Method: "dense"}}}},
		{flexprefill.Planner{}, flexprefill.Planner{Gamma: flexprefill.DefaultGamma, Tau: flexprefill.DefaultTau}, flexprefill.Planner{Gamma: 2}},
		{minference.Planner{}, minference.Planner{LastQ: minference.DefaultLastQ, Budget: 1}, minference.Planner{LastQ: -1}},
		{oracle.Planner{}, oracle.Planner{CDF: oracle.DefaultCDF}, oracle.Planner{CDF: 2}},
		{psa.Planner{}, psa.Planner{Thresholds: psa.DefaultThresholds(), Scale: psa.DefaultScale}, psa.Planner{Scale: -1}},
		{s2o.Planner{}, s2o.Planner{Segment: s2o.DefaultSegment(zeroTestN, sparseattn.DefaultBlockQ), Tau: s2o.DefaultTau, Outliers: s2o.DefaultOutliers}, s2o.Planner{Tau: 2}},
		{sparge.Planner{}, sparge.Planner{Params: sparge.Params{CDF: sparge.DefaultCDF, Theta: sparge.DefaultTheta}}, sparge.Planner{Params: sparge.Params{TopK: -1}}},
		{unisparse.Planner{}, unisparse.Planner{TopP: unisparse.DefaultTopP, CQ: unisparse.DefaultCQ, CK: unisparse.DefaultCK}, unisparse.Planner{TopP: 2}},
		{window.Planner{}, nil, window.Planner{Sink: -1}},
		{xattn.Planner{}, xattn.Planner{Stride: xattn.DefaultStride, Threshold: xattn.DefaultThreshold}, xattn.Planner{Stride: 5}},
	} {
		for _, causal := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/causal=%v", tc.zero.Name(), causal), func(t *testing.T) {
				run := func(p plan.Planner) (*sparseattn.Result, error) {
					return sparseattn.Attention(ctx, q, k, v, sparseattn.Options{Causal: causal, Planner: p})
				}
				zero, err := run(tc.zero)
				if err != nil {
					t.Fatalf("zero value: %v", err)
				}
				if err := zero.Out.CheckFinite("output"); err != nil {
					t.Fatal(err)
				}
				if tc.spelled != nil {
					spelled, err := run(tc.spelled)
					if err != nil {
						t.Fatalf("defaults spelled out: %v", err)
					}
					e, err := metrics.CompareTensors(spelled.Out, zero.Out)
					if err != nil {
						t.Fatal(err)
					}
					if e.MaxAbs != 0 || zero.Stats != spelled.Stats {
						t.Errorf("zero value differs from its defaults spelled out: max |Δ| %v, stats %+v vs %+v", e.MaxAbs, zero.Stats, spelled.Stats)
					}
				}
				if _, err := run(tc.bad); !errors.Is(err, plan.ErrInvalid) {
					t.Errorf("bad settings %+v: %v, want an error wrapping plan.ErrInvalid", tc.bad, err)
				}
				if tc.zero.Name() == "auto" {
					ref, err := reference.Attention(ctx, q, k, v, causal, 0, nil)
					if err != nil {
						t.Fatal(err)
					}
					e, err := metrics.Compare(ref, metrics.Tensor{Tensor: zero.Out})
					if err != nil {
						t.Fatal(err)
					}
					if !(e.RelL1 <= auto.DefaultBudget) || math.IsNaN(e.RelL1) {
						t.Errorf("auto tuned on the input: rel L1 %v over the default budget %v", e.RelL1, auto.DefaultBudget)
					}
				}
			})
		}
	}
}

// TestPlannerOffSettings: the settings a zero field meant before it meant
// the default stay one field away, and do what they say on the input of
// TestPlannerZeroValues, causal and not. s2o.NoStop attaches no stop rule
// (the default attaches τ = s2o.DefaultTau) and gives dense attention
// within 2e-5 absolute (float32 execution of unit-scale values against
// the float64 reference). flexprefill.NoQueryAware makes every head
// vertical-slash, and plans as the default exactly when no head is
// query-aware at flexprefill.DefaultTau. psa Scale 1 runs the paper's
// thresholds unscaled (the default scales them by psa.DefaultScale,
// capped at 1), so it never reads more than the default (PSA budget).
func TestPlannerOffSettings(t *testing.T) {
	ctx := context.Background()
	q, k, v := zeroTestInputs(t)
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	for _, causal := range []bool{true, false} {
		tl := plan.Tiling{Geometry: g, Causal: causal, BlockQ: sparseattn.DefaultBlockQ, BlockK: sparseattn.DefaultBlockK}
		planOf := func(p plan.Planner) *plan.Plan {
			t.Helper()
			pl, err := p.Plan(ctx, tl, q, k, v)
			if err != nil {
				t.Fatalf("%+v: %v", p, err)
			}
			return pl
		}
		t.Run(fmt.Sprintf("s2o/causal=%v", causal), func(t *testing.T) {
			if def := planOf(s2o.Planner{}); def.Stop == nil || def.Stop.Tau != float32(s2o.DefaultTau) {
				t.Errorf("zero value: stop rule %+v, want τ %v", def.Stop, s2o.DefaultTau)
			}
			if off := planOf(s2o.Planner{Tau: s2o.NoStop}); off.Stop != nil {
				t.Errorf("NoStop: stop rule %+v", off.Stop)
			}
			res, err := sparseattn.Attention(ctx, q, k, v, sparseattn.Options{Causal: causal, Planner: s2o.Planner{Tau: s2o.NoStop}})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := reference.Attention(ctx, q, k, v, causal, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			e, err := metrics.Compare(ref, metrics.Tensor{Tensor: res.Out})
			if err != nil {
				t.Fatal(err)
			}
			if !(e.MaxAbs <= 2e-5) || res.Stats.Stopped != 0 {
				t.Errorf("NoStop: max |Δ| %v against dense, %d rows stopped", e.MaxAbs, res.Stats.Stopped)
			}
		})
		t.Run(fmt.Sprintf("flexprefill/causal=%v", causal), func(t *testing.T) {
			dense, err := plan.Dense(tl)
			if err != nil {
				t.Fatal(err)
			}
			anyQA := false
			for h := range g.Hq {
				if (flexprefill.Planner{Tau: flexprefill.NoQueryAware}).Decide(dense, q, k, 0, h).QueryAware {
					t.Errorf("NoQueryAware: head %d query-aware", h)
				}
				anyQA = anyQA || (flexprefill.Planner{}).Decide(dense, q, k, 0, h).QueryAware
			}
			same := reflect.DeepEqual(planOf(flexprefill.Planner{}), planOf(flexprefill.Planner{Tau: flexprefill.NoQueryAware}))
			if same == anyQA {
				t.Errorf("NoQueryAware plans as the default: %v; some head query-aware at the default: %v", same, anyQA)
			}
		})
		t.Run(fmt.Sprintf("psa/causal=%v", causal), func(t *testing.T) {
			def, err := psa.Planner{}.Settings(tl)
			if err != nil {
				t.Fatal(err)
			}
			paper, err := psa.Planner{Scale: 1}.Settings(tl)
			if err != nil {
				t.Fatal(err)
			}
			for i, x := range psa.DefaultThresholds() {
				if paper.Cuts[i] != x || def.Cuts[i] != min(1, x*psa.DefaultScale) {
					t.Errorf("level %d: cut %v at Scale 1 and %v at the default; want %v and %v", i+1, paper.Cuts[i], def.Cuts[i], x, min(1, x*psa.DefaultScale))
				}
			}
			if bd, bp := psa.PlanBudget(planOf(psa.Planner{})), psa.PlanBudget(planOf(psa.Planner{Scale: 1})); bp > bd {
				t.Errorf("Scale 1 reads %v of the dense work, more than the default's %v", bp, bd)
			}
		})
	}
}

// zeroTestN is the zero-value tests' sequence length.
const zeroTestN = 200

// zeroTestInputs are the zero-value tests' fresh random GQA inputs: 4
// query heads on 2 KV heads, N = 200 (ragged in 64-token blocks), D = 32.
func zeroTestInputs(t *testing.T) (q, k, v *tensor.Tensor) {
	t.Helper()
	r := testutil.Rand(t)
	const n, d = zeroTestN, 32
	q = testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 4, N: n, D: d}, 1.5)
	k = testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: n, D: d}, 1.5)
	v = testutil.Gaussian(t, r, tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 2, N: n, D: d}, 1)
	return q, k, v
}
