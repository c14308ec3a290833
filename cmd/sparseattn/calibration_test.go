package main

import (
	"context"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	sparseattn "github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/method/oracle"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/tensor"
	"github.com/sparseattn/sparseattn/workload"
)

// oneHead copies query head h of q (and its KV head of k and v) into
// single-head tensors.
func oneHead(q, k, v *tensor.Tensor, h int) (hq, hk, hv *tensor.Tensor, err error) {
	g, err := tensor.Validate(q, k, v)
	if err != nil {
		return nil, nil, nil, err
	}
	kvh := g.KVHead(h)
	out := make([]*tensor.Tensor, 3)
	for i, src := range []struct {
		t *tensor.Tensor
		h int
	}{{q, h}, {k, kvh}, {v, kvh}} {
		sh := src.t.Shape()
		d, err := tensor.New(tensor.Float32, tensor.BHND, tensor.Shape{B: 1, H: 1, N: sh.N, D: sh.D})
		if err != nil {
			return nil, nil, nil, err
		}
		row := make([]float32, sh.D)
		for n := range sh.N {
			src.t.ReadRow(0, src.h, n, row)
			d.WriteRow(0, 0, n, row)
		}
		out[i] = d
	}
	return out[0], out[1], out[2], nil
}

// headCurveTaus are the oracle TopCdf values the per-head curves sweep.
var headCurveTaus = []float64{0.999, 0.995, 0.99, 0.985, 0.98, 0.975, 0.97, 0.96, 0.95, 0.94, 0.93, 0.92, 0.9, 0.875, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1}

// headSparsityAt runs the block oracle over headCurveTaus on one head and
// returns the executor-counted sparsity at each rel L1 in targets
// (ascending), interpolated linearly between the sweep points that
// bracket it (from zero sparsity at zero error below the first).
func headSparsityAt(ctx context.Context, q, k, v *tensor.Tensor, targets []float64) ([]float64, error) {
	opts := sparseattn.Options{Causal: true, BlockQ: 64, BlockK: 64, SkipFiniteCheck: true}
	dense, err := sparseattn.Attention(ctx, q, k, v, opts)
	if err != nil {
		return nil, err
	}
	out := make([]float64, 0, len(targets))
	prevS, prevE := 0.0, 0.0
	for _, tau := range headCurveTaus {
		o := opts
		o.Planner = oracle.Planner{CDF: tau}
		res, err := sparseattn.Attention(ctx, q, k, v, o)
		if err != nil {
			return nil, err
		}
		m, err := metrics.CompareTensors(dense.Out, res.Out)
		if err != nil {
			return nil, err
		}
		s, e := res.Stats.Sparsity(), m.RelL1
		for len(out) < len(targets) && e >= targets[len(out)] {
			t := targets[len(out)]
			if e == prevE {
				out = append(out, s)
			} else {
				out = append(out, prevS+(s-prevS)*(t-prevE)/(e-prevE))
			}
		}
		if len(out) == len(targets) {
			return out, nil
		}
		prevS, prevE = s, e
	}
	// The sweep ends below a target only on heads so concentrated that even
	// TopCdf 0.1 keeps the error under it: their curve has flattened at
	// its sparsest point, which stands for the rest.
	for len(out) < len(targets) {
		out = append(out, prevS)
	}
	return out, nil
}

// calibrationErrors are the rel-L1 levels at which TestSyntheticCalibration
// reads the curves; the bound holds at the last two (see calibrationTol).
var calibrationErrors = []float64{0.02, 0.05, 0.1}

// calibrationTol is the issue's ±0.05 sparsity between a synthetic head
// type's mean curve and its group of real heads.
const calibrationTol = 0.05

// calibrationTypes are the llm head types in the order of the real head
// groups they are calibrated against: the densest group first.
var calibrationTypes = []string{"semantic", "retrieval", "sink+local", "slash"}

// headCurves returns, for each head of q, k and v, the oracle's sparsity at
// each of calibrationErrors.
func headCurves(ctx context.Context, q, k, v *tensor.Tensor) ([][]float64, error) {
	out := make([][]float64, q.Shape().H)
	for h := range out {
		hq, hk, hv, err := oneHead(q, k, v, h)
		if err != nil {
			return nil, err
		}
		if out[h], err = headSparsityAt(ctx, hq, hk, hv, calibrationErrors); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// meanCurve averages the curves of heads hs.
func meanCurve(curves [][]float64, hs []int) []float64 {
	m := make([]float64, len(calibrationErrors))
	for _, h := range hs {
		for i, x := range curves[h] {
			m[i] += x / float64(len(hs))
		}
	}
	return m
}

// TestSyntheticCalibration checks the synthetic llm workload against real
// attention (issue 14): the embedded LM's 16 heads, ranked by their block
// oracle's sparsity at rel-L1 0.05 at 4K tokens, form four groups of four;
// each llm head type's mean curve (8 query heads, 2 KV heads, D 128, two
// heads a type) must come within ±0.05 sparsity of its group's at rel-L1
// 0.05 and 0.1. The groups are fixed at 4K and followed to the other
// lengths. 4K always runs (about 15 s); SPARSEATTN_CALIBRATION_N adds
// lengths (e.g. 8192,16384,32768: minutes on two cores).
func TestSyntheticCalibration(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the LM and the block oracle on 24 heads")
	}
	ns := []int{4096}
	if env := os.Getenv("SPARSEATTN_CALIBRATION_N"); env != "" {
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			if n != 4096 {
				ns = append(ns, n)
			}
		}
	}
	ctx := context.Background()
	var groups [][]int // real heads of each group, densest group first
	for _, n := range ns {
		p, err := loadLM(ctx, 0, n, "eval")
		if err != nil {
			t.Fatal(err)
		}
		real, err := headCurves(ctx, p.q, p.k, p.v)
		if err != nil {
			t.Fatal(err)
		}
		if groups == nil {
			order := make([]int, len(real))
			for h := range order {
				order[h] = h
			}
			sort.SliceStable(order, func(a, b int) bool { return real[order[a]][1] < real[order[b]][1] })
			per := len(order) / len(calibrationTypes)
			for g := range calibrationTypes {
				groups = append(groups, order[g*per:(g+1)*per])
			}
		}
		w, err := workload.Generate(ctx, workload.Config{Kind: workload.LLM, Seed: 1, B: 1, Hq: 8, Hkv: 2, N: n, D: 128})
		if err != nil {
			t.Fatal(err)
		}
		syn, err := headCurves(ctx, w.Q, w.K, w.V)
		if err != nil {
			t.Fatal(err)
		}
		for g, typ := range calibrationTypes {
			var hs []int
			for h, pat := range w.HeadPatterns {
				if strings.HasPrefix(pat, typ) {
					hs = append(hs, h)
				}
			}
			r, s := meanCurve(real, groups[g]), meanCurve(syn, hs)
			t.Logf("N=%d %-10s real heads %v: %.3f %.3f %.3f  synthetic heads %v: %.3f %.3f %.3f  (sparsity at rel L1 %v)",
				n, typ, groups[g], r[0], r[1], r[2], hs, s[0], s[1], s[2], calibrationErrors)
			for i := 1; i < len(calibrationErrors); i++ {
				if math.Abs(s[i]-r[i]) > calibrationTol {
					t.Errorf("N=%d %s: sparsity at rel L1 %v is %.3f, real heads %.3f: more than %v apart",
						n, typ, calibrationErrors[i], s[i], r[i], calibrationTol)
				}
			}
		}
	}
}
