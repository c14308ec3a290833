package cuda

import "testing"

// TestQueryResident checks where bm_mass keeps its query rows resident:
// UniSparse's main pass (hi and lo halves of one-token rows) at D 128 and
// 64 on an sm_90 (227 KB a block), not at D 256, not outside split or
// with argmax, and not where two blocks would no longer share a
// multiprocessor (an sm_86's 99 KB).
func TestQueryResident(t *testing.T) {
	split := bmMass{split: true, q: bmOp{s: 1}}
	for _, c := range []struct {
		m        bmMass
		dp, bk   int
		nst, opt int
		want     bool
	}{
		{split, 128, 32, 2, 232448, true},
		{split, 64, 32, 2, 232448, true},
		{split, 80, 16, 4, 232448, true},
		{split, 256, 32, 2, 232448, false},
		{bmMass{split: true, argmax: true, q: bmOp{s: 1}}, 128, 32, 2, 232448, false},
		{bmMass{q: bmOp{s: 1}}, 128, 64, 2, 232448, false},
		{bmMass{split: true, q: bmOp{s: 2}}, 128, 32, 2, 232448, false},
		{split, 128, 32, 2, 101376, false},
	} {
		if got := bmQueryResident(c.m, c.dp, c.nst, bmRows*(c.bk+8)*2, c.opt); got != c.want {
			t.Errorf("split %v argmax %v S %d, D %d, %d×%d, opt-in %d: resident %v, want %v", c.m.split, c.m.argmax, c.m.q.s, c.dp, c.bk, c.nst, c.opt, got, c.want)
		}
	}
}
