package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchDecodeAndChunkedPrefill runs bench with --decode and --nq and
// checks the rows: query count, K/V read rate and the input-check share.
func TestBenchDecodeAndChunkedPrefill(t *testing.T) {
	for _, c := range []struct {
		flag []string
		nq   int
	}{
		{[]string{"--decode"}, 1},
		{[]string{"--nq", "50"}, 50},
	} {
		args := append([]string{"bench", "--n", "300", "--heads", "4", "--kv-heads", "2", "--d", "32",
			"--repeat", "1", "--warmup", "0", "--json"}, c.flag...)
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.flag, code, errs)
		}
		var b benchReport
		if err := json.Unmarshal([]byte(out), &b); err != nil || len(b.Rows) != 1 {
			t.Fatalf("%v: %q (%v)", c.flag, out, err)
		}
		r := b.Rows[0]
		if r.N != 300 || r.NQ != c.nq || r.MS <= 0 || r.KVGBs <= 0 || r.ReadPct <= 0 || b.ReadGBs <= 0 {
			t.Errorf("%v: row %+v, read %v GB/s", c.flag, r, b.ReadGBs)
		}
		if r.CheckMS <= 0 || r.CheckPct <= 0 || r.CheckPct >= 100 {
			t.Errorf("%v: check %v ms, %v%%", c.flag, r.CheckMS, r.CheckPct)
		}
	}
	code, out, _ := runCLI(t, "bench", "--n", "200", "--heads", "1", "--kv-heads", "1", "--d", "32", "--repeat", "1", "--warmup", "0", "--decode")
	if code != 0 || !strings.Contains(out, "KV GB/s") || !strings.Contains(out, "check %") {
		t.Errorf("decode table: exit %d:\n%s", code, out)
	}
	for _, bad := range [][]string{{"--nq", "-1"}, {"--decode", "--nq", "5"}} {
		if code, _, errs := runCLI(t, append([]string{"bench", "--n", "200"}, bad...)...); code != 2 || !strings.Contains(errs, "--nq") {
			t.Errorf("%v: exit %d, %s; want a usage error naming --nq", bad, code, errs)
		}
	}
}
