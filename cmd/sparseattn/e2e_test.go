package main

import "testing"

// TestE2EChoice: e2e --target times the sparsest setting within the
// bound, or the least-error one when no setting is within it.
func TestE2EChoice(t *testing.T) {
	row := func(sp, rel float64) e2eRow { return e2eRow{Sparsity: sp, RelL1: rel} }
	for _, tc := range []struct {
		name string
		rows []e2eRow
		want int
	}{
		{"one row", []e2eRow{row(0.3, 0.2)}, 0},
		{"sparsest within", []e2eRow{row(0.5, 0.2), row(0.1, 0.01), row(0.3, 0.04), row(0.2, 0.03)}, 2},
		{"within beats an out-of-bound sparser one", []e2eRow{row(0.9, 0.5), row(0.05, 0.05)}, 1},
		{"none within: least error", []e2eRow{row(0.5, 0.2), row(0.2, 0.07), row(0.3, 0.09)}, 1},
		{"ties keep the first", []e2eRow{row(0.1, 0.5), row(0.3, 0.01), row(0.3, 0.02)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := e2eChoice(tc.rows, 0.05); got != tc.want {
				t.Errorf("e2eChoice = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestE2EBlockK: e2e runs block masks and S2O at 128-key blocks and PSA
// at 64 unless --block-k sets one size for all.
func TestE2EBlockK(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag int
		want int
	}{
		{"dense", 0, 128}, {"sparge", 0, 128}, {"xattn", 0, 128},
		{"psa", 0, 64}, {"s2o", 0, 128},
		{"sparge", 64, 64}, {"s2o", 64, 64}, {"psa", 128, 128},
	} {
		if got := e2eBlockK(tc.name, tc.flag); got != tc.want {
			t.Errorf("e2eBlockK(%q, %d) = %d, want %d", tc.name, tc.flag, got, tc.want)
		}
	}
}
