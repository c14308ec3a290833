package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
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
		// The check's cost is a difference of two timed calls, so in noise
		// it may be negative; it must be a number, and not all of the call.
		if math.IsNaN(r.CheckMS) || math.IsInf(r.CheckMS, 0) || !(r.CheckPct < 100) {
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

// TestBenchPeer runs bench with a stand-in --peer command: its time and
// settings land in the report, our speedup is its time over ours, and a
// peer that prints no JSON is an error.
func TestBenchPeer(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "peer.sh")
	if err := os.WriteFile(good, []byte("#!/bin/sh\necho '{\"impl\": \"stand-in\", \"args\": \"'\"$*\"'\", \"rows\": [{\"ms\": 2.5}]}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "bench", "--n", "128", "--heads", "2", "--kv-heads", "1", "--d", "32",
		"--repeat", "1", "--warmup", "0", "--decode", "--json", "--peer", good)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var b benchReport
	if err := json.Unmarshal([]byte(out), &b); err != nil || len(b.Rows) != 1 {
		t.Fatalf("%q (%v)", out, err)
	}
	r := b.Rows[0]
	if r.PeerMS != 2.5 || math.Abs(r.PeerRatio-2.5/r.MS) > 1e-9 || b.PeerInfo["impl"] != "stand-in" {
		t.Errorf("row %+v, peer info %v", r, b.PeerInfo)
	}
	if args, _ := b.PeerInfo["args"].(string); !strings.Contains(args, "--n 128 --nq 1 --heads 2 --kv-heads 1 --d 32") {
		t.Errorf("peer got args %q", args)
	}
	bad := filepath.Join(dir, "bad.sh")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "bench", "--n", "128", "--d", "32", "--repeat", "1", "--warmup", "0", "--peer", bad); code == 0 || !strings.Contains(errs, "JSON") {
		t.Errorf("peer without JSON: exit %d, %s", code, errs)
	}
}
