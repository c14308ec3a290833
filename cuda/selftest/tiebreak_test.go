package selftest

import "testing"

// TestTopCDFWithin checks the oracle's tie-break judge on hand-made masses:
// sets that are TopCdf sets under a perturbation of tol pass, and sets that
// miss mass, keep a superfluous block or skip a heavier block fail.
func TestTopCDFWithin(t *testing.T) {
	mass := []float64{0.5, 0.45, 0.03, 0.02, 0}
	for _, tc := range []struct {
		name string
		kept []int32
		cdf  float64
		ok   bool
	}{
		{"exact TopCdf set", []int32{0, 1}, 0.95, true},
		{"boundary block dropped within tol", []int32{0, 1}, 0.950005, true},
		{"next block added within tol", []int32{0, 1, 2}, 0.949995, true},
		{"too little mass", []int32{0}, 0.95, false},
		{"superfluous block", []int32{0, 1, 2}, 0.9, false},
		{"heavier block left out", []int32{0, 2}, 0.53, false},
		{"nothing kept", nil, 0.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := topCDFWithin(mass, tc.kept, tc.cdf, 1e-5)
			if (err == nil) != tc.ok {
				t.Errorf("topCDFWithin(%v, cdf %v) = %v, want ok=%v", tc.kept, tc.cdf, err, tc.ok)
			}
		})
	}
}
