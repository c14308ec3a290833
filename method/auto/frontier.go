package auto

import (
	"context"
	"fmt"

	"github.com/sparseattn/sparseattn/plan"
)

// candidate is one (method, knob) of a search.
type candidate struct {
	method string
	knob   float64
}

// option is one candidate measured on one head's cases.
type option struct {
	c        candidate
	worst    float64   // the head's largest rel L1 over its cases
	sparsity float64   // mean executor sparsity over the cases
	diff     []float64 // per input: Σ|O − O'| over the input's batches
}

// frontier is what one head can choose from: dense (options[0]) and every
// candidate measured within the head cap, with the head's Σ|O| per input
// that rel L1 is taken against.
type frontier struct {
	options []option
	abs     []float64 // per input: Σ|O| of dense over the input's batches
}

// search measures one query head's candidates.
type search struct {
	cfg    Config
	layer  *layerPlans
	cases  []*headCase
	inputs int
	plans  map[candidate][]*plan.Plan // single-head plans, one per case
	evals  int
}

// planned returns the candidate's plans of every case and their mean
// nominal sparsity, planning each once.
func (s *search) planned(ctx context.Context, c candidate) ([]*plan.Plan, float64, error) {
	ps, ok := s.plans[c]
	if !ok {
		full, err := s.layer.planned(ctx, c)
		if err != nil {
			return nil, 0, err
		}
		for _, hc := range s.cases {
			p, err := headPlan(full[hc.input], hc.t, hc.b, hc.h)
			if err != nil {
				return nil, 0, fmt.Errorf("%s at %v: %w", c.method, c.knob, err)
			}
			ps = append(ps, p)
		}
		s.plans[c] = ps
	}
	var sp float64
	for _, p := range ps {
		sp += nominal(p)
	}
	return ps, sp / float64(len(ps)), nil
}

// eval runs the candidate on every case; ok is false, and the option
// incomplete, as soon as one case is over the head cap.
func (s *search) eval(ctx context.Context, c candidate) (o option, ok bool, err error) {
	ps, _, err := s.planned(ctx, c)
	if err != nil {
		return option{}, false, err
	}
	o = option{c: c, diff: make([]float64, s.inputs)}
	for i, hc := range s.cases {
		if err := ctx.Err(); err != nil {
			return option{}, false, err
		}
		l1, st, err := hc.run(ctx, ps[i])
		if err != nil {
			return option{}, false, err
		}
		s.evals++
		if !(l1 <= s.cfg.HeadCap) {
			return o, false, nil
		}
		o.worst = max(o.worst, l1)
		o.sparsity += st.Sparsity() / float64(len(s.cases))
		o.diff[hc.input] += l1 * hc.denseAbs
	}
	return o, true, nil
}

// frontier measures every candidate method of the head along its knob
// sweep, from the most accurate knob towards the sparsest, up to the
// first knob over the head cap on some case: error is assumed to grow
// along a sweep, so the sparser knobs are not run. Knobs whose plans skip
// nothing are not run either: dense is already an option.
func (s *search) frontier(ctx context.Context) (frontier, error) {
	f := frontier{abs: make([]float64, s.inputs)}
	for _, hc := range s.cases {
		f.abs[hc.input] += hc.denseAbs
	}
	f.options = append(f.options, option{c: candidate{method: Dense}, diff: make([]float64, s.inputs)})
	for _, m := range s.cfg.Methods {
		sp, _ := lookup(m)
		for _, k := range sp.knobs {
			c := candidate{m, k}
			_, nom, err := s.planned(ctx, c)
			if err != nil {
				return frontier{}, err
			}
			if nom <= 0 {
				continue
			}
			o, ok, err := s.eval(ctx, c)
			if err != nil {
				return frontier{}, err
			}
			if !ok {
				break
			}
			f.options = append(f.options, o)
		}
	}
	return f, nil
}
